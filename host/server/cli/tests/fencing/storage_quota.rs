//! The store's quota and its fences, end to end: `--max-store-bytes` counts
//! resource names, paths and fences as well as object bytes (empty writes
//! with long names stop at the quota, and the file stays small), and
//! `fencing admin retire-fences` removes the fences of empty resources while
//! their locks' floors keep every older token out.

use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

async fn write(
    http: &reqwest::Client,
    base: &str,
    resource: &str,
    lock: &str,
    token: u64,
    how: (&str, &str),
) -> (u16, Value) {
    let (path, mutation) = how;
    let body = json!({"resource_id": resource, "lock_id": lock, "fencing_token": token,
        "write_payload": {"file_path": path, "mutation_type": mutation, "bytes": ""}});
    let resp = http.post(format!("{base}/v1/storage/write")).json(&body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

async fn stored_bytes(http: &reqwest::Client, base: &str) -> u64 {
    let text = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find_map(|l| l.strip_prefix("fencing_storage_stored_bytes "));
    line.and_then(|n| n.trim().parse().ok()).expect("fencing_storage_stored_bytes")
}

async fn start(data: &Path, extra: &[&str]) -> ServeProcess {
    let mut server = ServeProcess::start(data, extra);
    server.ready().await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_counts_names_paths_and_fences() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--max-store-bytes", "1048576"]).await;
    let (http, base) = (reqwest::Client::new(), server.base.as_str());
    let path = format!("/{}", "p".repeat(1000));
    let mut admitted = 0;
    let mut refused = None;
    // Empty objects under 1,000-byte paths on 256-byte names: 1.5 KB each in names and fences.
    for i in 0..2000 {
        let resource = format!("{i:0>256}");
        match write(&http, base, &resource, "quota", 1, (&path, "PUT")).await {
            (200, _) => admitted += 1,
            (status, body) => {
                refused = Some((status, body));
                break;
            }
        }
    }
    let (status, body) = refused.expect("the quota was never reached");
    assert_eq!((status, body["error"]["code"].as_str()), (507, Some("quota_exceeded")), "{body}");
    assert!((500..1000).contains(&admitted), "{admitted} empty writes admitted under a 1 MiB quota");
    let measured = stored_bytes(&http, base).await;
    println!("{admitted} empty writes admitted under a 1 MiB quota; the store measures {measured} bytes");
    assert!(measured <= 1 << 20 && measured > 1_400 * admitted as u64, "stored {measured} bytes for {admitted} writes");
    // Still refused, and nothing changed: the measure is where it was.
    assert_eq!(write(&http, base, &format!("{:0>256}", "x"), "quota", 1, (&path, "PUT")).await.0, 507);
    assert_eq!(stored_bytes(&http, base).await, measured);
    // Deleting an object shrinks the store and is always decided.
    assert_eq!(write(&http, base, &format!("{:0>256}", 0), "quota", 1, (&path, "DELETE")).await.0, 200);
    assert!(stored_bytes(&http, base).await < measured);
    let file = std::fs::metadata(dir.path().join("storage/fencing.redb")).unwrap().len();
    assert!(file < 16 << 20, "fencing.redb is {file} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retired_fences_leave_floors_that_keep_older_tokens_out() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let before = {
        let server = start(dir.path(), &[]).await;
        let base = server.base.as_str();
        for (resource, token) in [("emptied-a", 5), ("emptied-b", 9)] {
            assert_eq!(write(&http, base, resource, "shared", token, ("/o", "PUT")).await.0, 200);
            assert_eq!(write(&http, base, resource, "shared", token, ("/o", "DELETE")).await.0, 200);
        }
        assert_eq!(write(&http, base, "kept", "other", 3, ("/o", "PUT")).await.0, 200);
        stored_bytes(&http, base).await
    };
    let fencing = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencing"));
        cmd.env_remove("FENCING_DATA_DIR");
        cmd
    };
    let out = fencing().args(["admin", "retire-fences", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&report["fences"], &report["floors_raised"]), (&json!(2), &json!(1)), "{report}");
    assert_eq!(report["stored_bytes_before"], json!(before));
    assert!(report["stored_bytes_after"].as_u64().unwrap() < before, "{report}");
    let out = fencing().args(["admin", "compact", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let server = start(dir.path(), &[]).await;
    let base = server.base.as_str();
    assert_eq!(stored_bytes(&http, base).await, report["stored_bytes_after"].as_u64().unwrap());
    let fence: Value =
        http.get(format!("{base}/v1/storage/fence?resource_id=emptied-a")).send().await.unwrap().json().await.unwrap();
    assert_eq!(fence["fence"], Value::Null, "the fence is gone");
    // The lock's floor is the highest retired mark (9): older tokens stay out of both resources.
    for (resource, token) in [("emptied-a", 4), ("emptied-a", 8), ("emptied-b", 8)] {
        let (status, body) = write(&http, base, resource, "shared", token, ("/o", "PUT")).await;
        assert_eq!(
            (status, body["reason"].as_str(), &body["high_water"]),
            (409, Some("stale_token"), &json!(9)),
            "{resource} {token}"
        );
    }
    assert_eq!(write(&http, base, "emptied-b", "shared", 9, ("/o", "PUT")).await.0, 200, "the floor's own token");
    assert_eq!(write(&http, base, "emptied-a", "shared", 10, ("/o", "PUT")).await.0, 200, "a newer token");
    // A fence with objects is kept, and other locks start from nothing.
    assert_eq!(write(&http, base, "kept", "other", 2, ("/o", "PUT")).await.0, 409);
    assert_eq!(write(&http, base, "fresh", "new-lock", 1, ("/o", "PUT")).await.0, 200);
    drop(server);
    let out = fencing().args(["admin", "retire-fences", "--data-dir"]).arg(dir.path().join("none")).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a directory without a store is bad input");
}
