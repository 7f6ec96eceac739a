//! Where the embedded `fencing:guard` component comes from
//! (`wasm::plugin::EMBEDDED`).
//!
//! By default nothing is built: the runtime embeds the committed component,
//! `fencing_rules::COMPONENT` (`guest/fencing_guard.wasm`, written by
//! `scripts/build-component` and checked against a fresh build in CI), so a
//! build from crates.io or a checkout needs no `wasm32-wasip2` target.
//!
//! With `FENCING_BUILD_COMPONENT=1`, for developers of the rules, this script
//! builds the component from the checkout's `guest/` instead and the runtime
//! embeds that (cfg `fencing_component_from_source`), so a change to the
//! rules reaches the Wasm guard without refreshing the committed file first.
//! The nested cargo uses its own target directory, so it never waits on the
//! lock of the build that runs this script.

use std::path::{Path, PathBuf};
use std::process::Command;

const SWITCH: &str = "FENCING_BUILD_COMPONENT";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fencing_component_from_source)");
    println!("cargo::rerun-if-env-changed={SWITCH}");
    println!("cargo::rerun-if-changed=build.rs");
    let on = std::env::var(SWITCH).is_ok_and(|v| !v.is_empty() && v != "0");
    if !on {
        return;
    }
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    // host/runtime -> the workspace root.
    let root = manifest_dir.ancestors().nth(2).map(Path::to_path_buf).unwrap_or_default();
    if !root.join("guest/Cargo.toml").is_file() {
        panic!(
            "{SWITCH}=1 builds the component from a checkout of the fencing repository, and {} is not one \
             (no guest/Cargo.toml). Unset {SWITCH} to embed the committed component (fencing_rules::COMPONENT).",
            root.display()
        );
    }
    for watched in ["guest/src", "guest/Cargo.toml", "wit", "Cargo.lock"] {
        println!("cargo::rerun-if-changed={}", root.join(watched).display());
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
    let status = cmd.status().unwrap_or_else(|e| panic!("{SWITCH}=1: cannot run cargo to build the component: {e}"));
    if !status.success() {
        panic!(
            "{SWITCH}=1: building the fencing:guard component failed. Is the target installed? Run: rustup target add wasm32-wasip2"
        );
    }
    let built = target_dir.join("wasm32-wasip2/release/fencing_rules.wasm");
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let to = out_dir.join("fencing_rules.wasm");
    std::fs::copy(&built, &to).unwrap_or_else(|e| panic!("copy {} -> {}: {e}", built.display(), to.display()));
    println!("cargo::rustc-cfg=fencing_component_from_source");
}
