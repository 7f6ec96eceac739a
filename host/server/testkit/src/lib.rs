//! What the crates' integration tests share: real servers started on
//! loopback for the length of a test, and checks every storage engine passes.
//!
//! Every server here listens on 127.0.0.1 on a free port, keeps its data in a
//! temporary directory, and is stopped when its handle is dropped.
//!
//! # Layout
//! - [`server`]: `fencing serve` as a child process ([`server::ServeProcess`]).
//! - [`postgres`]: a throwaway PostgreSQL 15 ([`postgres::Postgres`]).
//! - [`etcd`]: one etcd member or a cluster ([`etcd::cluster`]).
//! - [`storage`]: the conformance checks every storage engine passes.
//! - [`fake`]: small stand-ins for the storage and lock servers, for testing
//!   the chaos campaign's machinery apart from the real servers.

pub mod etcd;
pub mod fake;
pub mod postgres;
pub mod server;
pub mod storage;

use std::path::PathBuf;

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The `fencing` binary of the build running this test: `target/<profile>/fencing`,
/// beside the test executable's `deps/` folder. Cargo builds it before the
/// `fencing` crate's tests; other crates' tests need it built first
/// (`cargo build -p fencing`, which `cargo test --workspace` does).
pub fn fencing_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe.parent().expect("the test executable's folder");
    let dir = if dir.ends_with("deps") { dir.parent().expect("the profile folder") } else { dir };
    let bin = dir.join("fencing");
    assert!(bin.exists(), "{} not found: build it first with `cargo build -p fencing`", bin.display());
    bin
}

/// Writes `text` to a new file at `path` readable by its owner only (0600),
/// as a server requires of a token or key file.
pub fn secret_file(path: &std::path::Path, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write the secret file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("make it private");
    path.to_path_buf()
}
