//! Gives the shared library the soname of its ABI's major version
//! (`libfencing_guard.so.1`, `FENCING_GUARD_ABI_MAJOR` in the header), so a
//! program linked against one major never loads another.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libfencing_guard.so.1");
    }
}
