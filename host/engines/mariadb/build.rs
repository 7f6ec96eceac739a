//! The library stays loaded once mariadbd has loaded it: `DROP FUNCTION` of
//! its last function would otherwise `dlclose` it while the guard's epoch
//! thread and the connections' thread-local workers still run its code.
//! A new build takes effect at the server's next start (docs/mariadb.md).
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
