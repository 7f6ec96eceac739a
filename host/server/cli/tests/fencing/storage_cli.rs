//! `fencing write` / `fencing read` against a spawned `fencing serve`: output and exit codes.

use fencing_testkit::server::ServeProcess;
use std::process::{Command, Output};

fn fencing(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencing")).args(args).output().expect("run fencing")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_and_read_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start(dir.path(), &["--guard", "wasm"]);
    server.ready().await;
    let s = server.base.clone();
    let base = ["--server", s.as_str(), "--resource", "storage:customer-orders-bucket", "--path", "/uploads/o.csv"];
    let run = |extra: &[&str], cmd: &str| {
        let mut args = vec![cmd];
        args.extend_from_slice(&base);
        args.extend_from_slice(extra);
        fencing(&args)
    };

    let out =
        tokio::task::block_in_place(|| run(&["--token", "34", "--mutation", "APPEND", "--data", "B,1\n"], "write"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(json(&out)["high_water"], 34);

    let out = tokio::task::block_in_place(|| run(&["--token", "33", "--data", "A"], "write"));
    assert_eq!(out.status.code(), Some(1), "a write refused by the fence (409) exits 1: {out:?}");
    assert_eq!(json(&out)["reason"], "stale_token");

    let out = tokio::task::block_in_place(|| run(&["--raw"], "read"));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"B,1\n");

    let out = tokio::task::block_in_place(|| run(&[], "read"));
    assert_eq!(json(&out)["fence"]["high_water"], 34);

    // Bad input: missing bytes (client-side) and a traversal path (server 400).
    let out = tokio::task::block_in_place(|| run(&["--token", "35"], "write"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = tokio::task::block_in_place(|| {
        fencing(&["write", "--server", &s, "--resource", "r", "--path", "../x", "--token", "1", "--data", "x"])
    });
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(json(&out)["error"]["field"], "write_payload.file_path");

    // Unreachable server: exit 1.
    let port = fencing_testkit::free_port();
    let out = tokio::task::block_in_place(|| {
        fencing(&["read", "--server", &format!("http://127.0.0.1:{port}"), "--resource", "r", "--path", "/x"])
    });
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn serve_rejects_postgres_without_url() {
    let out = fencing(&["serve", "--store", "postgres", "--data-dir", "/nonexistent-fencing-test"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
