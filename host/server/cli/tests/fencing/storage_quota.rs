//! The store's quota and its fences, end to end: `--max-store-bytes` counts
//! resource names, paths and fences as well as object bytes (empty writes
//! with long names stop at the quota, and the file stays small), and
//! `fencing admin retire-fences` removes the fences of empty resources while
//! their locks' floors keep every older token out; `fencing admin
//! drop-floors` folds the floors the lock service has passed into one.

use base64::Engine as _;
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

/// The story: four rounds of writes on new resources, each with
/// `retire-fences` and `compact`, leave floors that fill a 256 KiB quota
/// (a 16 KiB object no longer fits). `fencing admin drop-floors` (reading
/// the stopped lock service in the same directory) folds every floor into
/// one store floor: the object fits again, a paused holder's old token
/// stays refused, and a fresh grant's token is admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floors_the_lock_service_has_passed_fold_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let quota = ["--max-store-bytes", "262144"];
    let fencing = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencing"));
        cmd.env_remove("FENCING_DATA_DIR");
        cmd
    };
    let admin = |args: &[&str]| {
        let out = fencing().arg("admin").args(args).arg("--data-dir").arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let acquire = |base: String, lock: String| {
        let http = http.clone();
        async move {
            let body = json!({"resource_id": lock, "client_id": "c", "lease_duration_ms": 100, "wait_ms": 5000});
            let g: Value =
                http.post(format!("{base}/v1/locks/acquire")).json(&body).send().await.unwrap().json().await.unwrap();
            g["fencing_token"].as_u64().expect("a grant")
        }
    };
    // Short resource names under long lock names: a floor costs the lock's name (212) + 49 bytes,
    // so 960 floors take 250,560 bytes of 262,144, and each round's fences still fit beside them.
    let name = |round: usize, i: usize| format!("{round}-{i:03}");
    let lock = |round: usize, i: usize| format!("{round}-{i:03}-{}", "l".repeat(206));
    let mut first_round_token = 0;
    let mut retired = json!(null);
    for round in 0..4 {
        let mut server = ServeProcess::start_role("all", dir.path(), &quota);
        server.ready().await;
        let base = server.base.clone();
        // Each resource its own lock: one grant shows the round's token, which every new lock starts from.
        let token = acquire(base.clone(), lock(round, 999)).await;
        if round == 0 {
            first_round_token = token;
        }
        for i in 0..240 {
            let (resource, lock) = (name(round, i), lock(round, i));
            assert_eq!(write(&http, &base, &resource, &lock, token, ("/o", "PUT")).await.0, 200, "{round} {i}");
            assert_eq!(write(&http, &base, &resource, &lock, token, ("/o", "DELETE")).await.0, 200);
        }
        server.kill9();
        retired = admin(&["retire-fences"]);
        assert_eq!(retired["floors"], json!(240 * (round + 1)), "{retired}");
        admin(&["compact"]);
    }
    let floor_bytes = retired["floor_bytes"].as_u64().unwrap();
    assert_eq!(floor_bytes, 960 * (212 + 49), "{retired}");
    let big = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 16 << 10]);
    let put_big = |base: String, token: u64| {
        let http = http.clone();
        let big = big.clone();
        async move {
            let body = json!({"resource_id": "big", "fencing_token": token, "write_payload":
                {"file_path": "/big", "mutation_type": "PUT", "bytes": big}});
            let resp = http.post(format!("{base}/v1/storage/write")).json(&body).send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    {
        let mut server = ServeProcess::start_role("all", dir.path(), &quota);
        server.ready().await;
        let token = acquire(server.base.clone(), "big".into()).await;
        let (status, body) = put_big(server.base.clone(), token).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (507, Some("quota_exceeded")),
            "floors fill the quota: {body}"
        );
        server.kill9();
    }

    let dropped = admin(&["drop-floors"]);
    assert_eq!(
        (&dropped["floors_before"], &dropped["floors_dropped"], &dropped["floors_after"]),
        (&json!(960), &json!(960), &json!(1)),
        "{dropped}"
    );
    assert!(dropped["floor_bytes_after"].as_u64().unwrap() < 1024, "{dropped}");
    // The rounds' probe leases, killed with their servers, are restored at the next start with lower tokens.
    let listed = dropped["held_leases_below_store_floor"].as_array().expect("the restored leases listed");
    assert!(listed.iter().any(|l| l == &json!(lock(0, 999))), "{dropped}");
    println!("floors: {} bytes in 960 floors, {} bytes after drop-floors", floor_bytes, dropped["floor_bytes_after"]);
    // Each offline command is in the operators' audit log, as the routes are: the four rounds'
    // retire-fences and compact and then drop-floors, each requested before it ran and done with its report.
    let audit = fencing_server::http::audit::read(dir.path()).unwrap();
    let actions: Vec<_> = audit.iter().map(|r| (r["action"].as_str().unwrap(), r["phase"].as_str().unwrap())).collect();
    assert_eq!(actions.iter().filter(|(_, phase)| *phase == "requested").count(), 9, "{actions:?}");
    assert_eq!(actions[actions.len() - 2..], [("drop-floors", "requested"), ("drop-floors", "done")], "{actions:?}");
    let done = audit.last().unwrap();
    assert_eq!(done["report"]["floors_dropped"], json!(960), "{done}");
    assert!(done["uid"].is_u64() && done["at"].is_string(), "{done}");

    let mut server = ServeProcess::start_role("all", dir.path(), &quota);
    server.ready().await;
    let base = server.base.clone();
    let token = acquire(base.clone(), "big".into()).await;
    assert_eq!(put_big(base.clone(), token).await.0, 200, "the room the floors took is back");
    // A paused holder of a first-round token is still refused on its resource.
    let (old, old_lock) = (name(0, 7), lock(0, 7));
    let (status, body) = write(&http, &base, &old, &old_lock, first_round_token, ("/o", "PUT")).await;
    assert_eq!((status, body["reason"].as_str()), (409, Some("stale_token")), "{body}");
    // A fresh grant for that lock is above every floor.
    let fresh = acquire(base.clone(), old_lock.clone()).await;
    assert_eq!(write(&http, &base, &old, &old_lock, fresh, ("/o", "PUT")).await.0, 200);
    drop(server);
}
