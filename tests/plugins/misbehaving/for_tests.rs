//! Builds the misbehaving plugin for a test binary (included by `#[path]`
//! from the runtime's and the PostgreSQL extension's tests). Cargo rebuilds it only when the
//! plugin or the guest files it includes changed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The misbehaving component's path, built once per test binary.
pub fn misbehaving() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|dir| dir.join("wit/guard.wit").exists())
            .expect("the repository root, which holds wit/guard.wit")
            .to_path_buf();
        let target = root.join("target/test-plugins");
        let wasm = target.join("wasm32-wasip2/release/fencing_misbehaving.wasm");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.current_dir(&root)
            .args(["build", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
            .arg(root.join("tests/plugins/misbehaving/Cargo.toml"))
            .arg("--target-dir")
            .arg(&target);
        for var in ["RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS"] {
            cmd.env_remove(var);
        }
        let status = cmd.status().expect("run cargo to build the misbehaving plugin");
        assert!(status.success(), "building tests/plugins/misbehaving failed");
        assert!(wasm.exists(), "{} missing after build", wasm.display());
        wasm
    })
}
