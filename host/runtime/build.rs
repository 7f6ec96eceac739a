//! Builds the `fencing:guard` component from `guest/` for `wasm32-wasip2` so
//! the host binary can embed it (`guard::plugin::EMBEDDED`).
//!
//! The nested cargo uses its own target directory, so it never waits on the
//! lock of the build that runs this script.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    // host/runtime -> the workspace root.
    let root = manifest_dir.ancestors().nth(2).expect("workspace root").to_path_buf();
    for watched in ["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    // A prebuilt component (e.g. for toolchains without the wasm32-wasip2 target, such as the fuzz build).
    println!("cargo:rerun-if-env-changed=FENCING_RULES_WASM");
    if let Some(prebuilt) = std::env::var_os("FENCING_RULES_WASM") {
        copy(Path::new(&prebuilt), &out_dir.join("fencing_rules.wasm"));
        return;
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
        .join("embedded-rules");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--locked", "-p", "fencing-rules", "--release", "--target", "wasm32-wasip2", "--target-dir"])
        .arg(&target_dir);
    // The outer build's wrappers and flags (clippy, coverage, host rustflags) must not leak into the guest build.
    for var in
        ["RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS"]
    {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("run cargo to build the guest component");
    if !status.success() {
        panic!(
            "building the fencing:guard component failed. Is the target installed? Run: rustup target add wasm32-wasip2"
        );
    }
    let built = target_dir.join("wasm32-wasip2/release/fencing_rules.wasm");
    copy(&built, &out_dir.join("fencing_rules.wasm"));
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} -> {}: {e}", from.display(), to.display()));
}
