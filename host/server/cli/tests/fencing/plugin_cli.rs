//! `fencing plugin inspect`: what it prints for the embedded component and
//! its exit code for an incompatible or missing file.

use std::process::Command;

/// A component exporting `fencing:guard/check@0.4.0`, a breaking version for 0.3 hosts.
const V040: &str = include_str!("../../../../../tests/plugins/check-0.4.0.wat");

fn fencing(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencing")).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().expect("exited"), text)
}

#[test]
fn inspect_embedded_is_compatible() {
    let (code, out) = fencing(&["plugin", "inspect"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("fencing:guard/check@0.3.0"), "{out}");
    assert!(out.contains("imports:    (none)"), "{out}");
    assert!(out.contains("compatible: yes"), "{out}");
    assert!(out.contains("call path:  direct"), "{out}");
}

#[test]
fn inspect_incompatible_file_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v030.wat");
    std::fs::write(&path, V040).unwrap();
    let (code, out) = fencing(&["plugin", "inspect", path.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("fencing:guard/check@0.4.0") && out.contains("compatible: no"), "{out}");
    let (code, out) = fencing(&["plugin", "inspect", dir.path().join("missing.wasm").to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
}
