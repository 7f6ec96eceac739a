//! `fencing demo` end to end with real processes (SIGSTOP/SIGCONT).

use std::process::Command;

fn demo(only: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencing")).args(["demo", "--only", only]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn without_fencing_the_paused_clients_stale_write_lands() {
    let (code, out) = demo("unfenced");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("fencing_token=1") && out.contains("fencing_token=2"), "{out}");
    assert!(out.contains("written by client-1 with token 1"), "{out}");
    assert!(out.contains("corruption"), "{out}");
}

#[test]
fn with_fencing_the_storage_rejects_the_paused_client() {
    let (code, out) = demo("both");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("HTTP 409"), "{out}");
    assert!(out.contains("client-2's data is intact"), "{out}");
}
