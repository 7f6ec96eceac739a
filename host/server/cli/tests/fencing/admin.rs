//! The operator's tools against real `fencing serve` processes: a fence reset
//! and re-bind with an operator's token (refused without it, refused with a
//! writer's token, 403 on a server without `--admin-token-file`, bad bodies
//! named, every use in the audit log), a paused writer unable to reset the
//! fence that refuses it, `--max-token-advance`
//! refusing a runaway token, `fencing admin bump-tokens` moving tokens
//! above every one handed out after the backup a data directory was restored
//! from, and a copied storage directory restoring every fence (an older one
//! raised again with a reset).

use base64::Engine as _;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// The writers' token, and the operator's.
const TOKEN: &str = "writer-Token_7-abcdef";
const OPERATOR: &str = "operator-Token_9-xyz123";

fn fencing() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencing"));
    cmd.env_remove("FENCING_AUTH_TOKEN_FILE")
        .env_remove("FENCING_ADMIN_TOKEN_FILE")
        .env_remove("FENCING_SERVER")
        .env_remove("FENCING_DATA_DIR");
    cmd
}

/// The writers' token file and the operators' file (operator `alice`) in `dir`.
fn credentials(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let writers = fencing_testkit::secret_file(&dir.join("token"), &format!("{TOKEN}\n"));
    let operators = fencing_testkit::secret_file(&dir.join("operators"), &format!("alice {OPERATOR}\n"));
    (writers, operators)
}

async fn post(base: &str, path: &str, body: Value, bearer: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(format!("{base}{path}")).json(&body);
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

async fn write(base: &str, resource: &str, lock: &str, token: u64) -> (u16, Value) {
    let body = json!({"resource_id": resource, "lock_id": lock, "fencing_token": token,
        "write_payload": {"file_path": "/f", "mutation_type": "PUT",
            "bytes": base64::engine::general_purpose::STANDARD.encode(format!("by {token}"))}});
    post(base, "/v1/storage/write", body, Some(TOKEN)).await
}

#[tokio::test]
async fn reset_unbricks_and_rebinds_with_an_operators_token_and_max_advance_refuses_runaways() {
    let dir = tempfile::tempdir().unwrap();
    let (token_file, operators) = credentials(dir.path());
    let auth = [
        "--auth-token-file",
        token_file.to_str().unwrap(),
        "--admin-token-file",
        operators.to_str().unwrap(),
        "--max-token-advance",
        "1000",
    ];
    let mut server = ServeProcess::start(&dir.path().join("data"), &auth);
    server.ready().await;
    let base = server.base.clone();

    // --max-token-advance: a runaway token is refused, a reasonable jump is not.
    assert_eq!(write(&base, "bounded", "bounded", 5).await.0, 200);
    let (st, body) = write(&base, "bounded", "bounded", u64::MAX).await;
    assert_eq!((st, body["reason"].as_str(), &body["high_water"]), (409, Some("token_too_far_ahead"), &json!(5)));
    assert_eq!(body["max_token_advance"], 1000);
    assert_eq!(write(&base, "bounded", "bounded", 1005).await.0, 200);

    // A first write counts from 0: 2^64-1 is refused, with no fence as its evidence.
    let (st, body) = write(&base, "first", "first", u64::MAX).await;
    assert_eq!((st, body["reason"].as_str(), &body["fence"]), (409, Some("token_too_far_ahead"), &Value::Null));
    assert_eq!((&body["high_water"], &body["max_token_advance"]), (&json!(0), &json!(1000)));
    assert_eq!(write(&base, "first", "first", 1000).await.0, 200, "a first token up to the bound is admitted");

    // A token far ahead within the bound still leaves the real holders behind until an operator resets it.
    assert_eq!(write(&base, "bricked", "bricked", 1000).await.0, 200);
    let (st, body) = write(&base, "bricked", "bricked", 7).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("stale_token")));
    let reset = ["admin", "reset-fence", "bricked", "--reason", "runaway token from a test client"];
    let out = fencing()
        .args(reset)
        .args(["--server", &base, "--admin-token-file", operators.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((&answer["previous"]["high_water"], &answer["fence"]), (&json!(1000), &Value::Null));
    assert_eq!(write(&base, "bricked", "bricked", 7).await.0, 200, "writable again after the reset");

    // Re-bind: a first write under the wrong lock binds the resource; a reset moves it to the right one.
    assert_eq!(write(&base, "bound", "stray-lock", 3).await.0, 200);
    assert_eq!(write(&base, "bound", "bound", 4).await.1["reason"], "wrong_lock");
    let body =
        json!({"resource_id": "bound", "reason": "bound by a stray client", "lock_id": "bound", "high_water": 10});
    let (st, answer) = post(&base, "/v1/admin/fences/reset", body.clone(), Some(OPERATOR)).await;
    assert_eq!(
        (st, &answer["fence"]["lock_id"], &answer["previous"]["lock_id"]),
        (200, &json!("bound"), &json!("stray-lock"))
    );
    assert_eq!(write(&base, "bound", "bound", 9).await.0, 409, "the new mark holds");
    assert_eq!(write(&base, "bound", "bound", 11).await.0, 200);

    // An operator's token only: none or a wrong one is 401, a writer's 403; bad bodies name their field.
    assert_eq!(post(&base, "/v1/admin/fences/reset", body.clone(), None).await.0, 401);
    assert_eq!(post(&base, "/v1/admin/fences/reset", body.clone(), Some("wrong")).await.0, 401);
    let (st, e) = post(&base, "/v1/admin/fences/reset", body, Some(TOKEN)).await;
    assert_eq!(
        (st, e["error"]["code"].as_str(), e["error"]["field"].as_str()),
        (403, Some("operator_only"), Some("authorization"))
    );
    for (bad, field) in [
        (json!({"resource_id": "bound", "reason": "x", "lock_id": "bound"}), "high_water"),
        (json!({"resource_id": "bound", "reason": "x", "high_water": 1}), "lock_id"),
        (json!({"resource_id": "bound", "reason": "  "}), "reason"),
        (json!({"resource_id": "bound", "reason": "x", "lock_id": "bound", "high_water": 0}), "high_water"),
        (json!({"resource_id": "", "reason": "x"}), "resource_id"),
        (json!({"resource_id": "bound", "reason": "x", "extra": 1}), "extra"),
    ] {
        let (st, e) = post(&base, "/v1/admin/fences/reset", bad.clone(), Some(OPERATOR)).await;
        assert_eq!((st, e["error"]["field"].as_str()), (400, Some(field)), "{bad}: {e}");
    }
    let fence: Value =
        reqwest::get(format!("{base}/v1/storage/fence?resource_id=bound")).await.unwrap().json().await.unwrap();
    assert_eq!(fence["high_water"], 11);
    let out = fencing().args(["admin", "reset-fence", "bound", "--reason", "x", "--lock", "l"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--lock without --high-water is a usage error");

    // Every reset is in the audit log: who, when, what was asked, the fence before and after.
    let audit = fencing_server::http::audit::read(&dir.path().join("data")).unwrap();
    let done: Vec<&Value> = audit.iter().filter(|r| r["phase"] == "done").collect();
    assert_eq!(done.len(), 2, "{audit:#?}");
    assert_eq!(audit.iter().filter(|r| r["phase"] == "requested").count(), 2, "each recorded before it was applied");
    let rebind = done[1];
    assert_eq!(
        (&rebind["operator"], &rebind["peer"], &rebind["resource_id"]),
        (&json!("alice"), &json!("127.0.0.1"), &json!("bound"))
    );
    assert_eq!((&rebind["before"]["lock_id"], &rebind["after"]["high_water"]), (&json!("stray-lock"), &json!(10)));
    assert_eq!(rebind["reason"], "bound by a stray client");
    assert!(rebind["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{rebind}");
}

/// Operator routes are off unless operators are configured, whatever the request carries.
#[tokio::test]
async fn resets_need_a_server_with_operators() {
    let dir = tempfile::tempdir().unwrap();
    let (token_file, _) = credentials(dir.path());
    let mut server =
        ServeProcess::start(&dir.path().join("data"), &["--auth-token-file", token_file.to_str().unwrap()]);
    server.ready().await;
    let body = json!({"resource_id": "r", "reason": "try"});
    for bearer in [None, Some(TOKEN), Some(OPERATOR)] {
        let (st, e) = post(&server.base, "/v1/admin/fences/reset", body.clone(), bearer).await;
        assert_eq!((st, e["error"]["code"].as_str()), (403, Some("admin_disabled")), "{bearer:?}");
    }
}

/// An operators' file that holds the writers' token, or that others can
/// read, stops the server at start (exit 2, naming the file).
#[test]
fn an_operators_file_must_be_private_and_hold_no_writers_token() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let (writers, operators) = credentials(dir.path());
    let shared = fencing_testkit::secret_file(&dir.path().join("shared"), &format!("alice {TOKEN}\n"));
    std::fs::set_permissions(&operators, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (file, problem) in [(&shared, "the writers' token"), (&operators, "chmod 600")] {
        let out = fencing()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--auth-token-file")
            .arg(&writers)
            .arg("--admin-token-file")
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&file.display().to_string()) && stderr.contains(problem), "{stderr}");
    }
}

/// The story the operator's credential exists for: with signing on, a holder
/// paused past its lease is refused `stale_token`; with the writers' token it
/// cannot reset the fence (403), so its stale write stays refused and the
/// next holder's data stays. The log line of the operator's own reset holds
/// the client's values quoted and escaped.
#[tokio::test]
async fn a_paused_writer_cannot_reset_the_fence_that_refuses_it() {
    let dir = tempfile::tempdir().unwrap();
    let (writers, operators) = credentials(dir.path());
    let key = dir.path().join("signing.key");
    let out = fencing().args(["admin", "keygen", "--id", "1", "--out"]).arg(&key).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let public = dir.path().join("signing.key.pub");
    let log = dir.path().join("server.log");
    let flags = [
        "--auth-token-file",
        writers.to_str().unwrap(),
        "--admin-token-file",
        operators.to_str().unwrap(),
        "--signing-key",
        key.to_str().unwrap(),
        "--verify-keys",
        public.to_str().unwrap(),
    ];
    let mut server = ServeProcess::start_logging_role("all", &dir.path().join("data"), &flags, &log);
    server.ready().await;
    let base = server.base.clone();
    let acquire = |client: &str| {
        let body = json!({"resource_id": "orders", "client_id": client, "lease_duration_ms": 200, "wait_ms": 5000});
        post(&base, "/v1/locks/acquire", body, Some(TOKEN))
    };
    let signed = |grant: &Value, data: &str| {
        json!({"resource_id": "orders", "fencing_token": grant["fencing_token"], "fencing_proof": grant["fencing_proof"],
            "write_payload": {"file_path": "/f", "mutation_type": "PUT",
                "bytes": base64::engine::general_purpose::STANDARD.encode(data)}})
    };
    let (_, paused) = acquire("paused").await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (_, next) = acquire("next").await;
    assert_eq!(post(&base, "/v1/storage/write", signed(&next, "next's data"), Some(TOKEN)).await.0, 200);
    let (st, late) = post(&base, "/v1/storage/write", signed(&paused, "stale"), Some(TOKEN)).await;
    assert_eq!((st, late["reason"].as_str()), (409, Some("stale_token")));
    // The paused writer tries to clear the fence with what it holds: the writers' token.
    let clear = json!({"resource_id": "orders", "reason": "let me in"});
    let (st, e) = post(&base, "/v1/admin/fences/reset", clear, Some(TOKEN)).await;
    assert_eq!((st, e["error"]["code"].as_str()), (403, Some("operator_only")));
    let (st, late) = post(&base, "/v1/storage/write", signed(&paused, "stale"), Some(TOKEN)).await;
    assert_eq!((st, late["reason"].as_str()), (409, Some("stale_token")), "the fence still stands");
    let read: Value = reqwest::get(format!("{base}/v1/storage/read?resource_id=orders&file_path=/f"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["bytes"], base64::engine::general_purpose::STANDARD.encode("next's data"));
    // An operator's reset is logged with every client value quoted and escaped.
    let forged = "rebind\" operator=\"mallory";
    let rebind =
        json!({"resource_id": "orders", "reason": forged, "lock_id": "orders", "high_water": next["fencing_token"]});
    assert_eq!(post(&base, "/v1/admin/fences/reset", rebind, Some(OPERATOR)).await.0, 200);
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let line = text.lines().find(|l| l.contains("fence reset by an operator")).expect("the reset's log line");
    assert!(line.contains(r#"operator="alice""#), "{line}");
    assert!(line.contains(r#"reason="rebind\" operator=\"mallory""#), "escaped: {line}");
    assert!(!line.contains(r#" operator="mallory""#), "{line}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else if !entry.file_name().to_string_lossy().ends_with(".lock") {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// One grant on `lock` (waiting out a restart's wait, if any), released at once; its token.
async fn grant(base: &str, lock: &str) -> u64 {
    let body = json!({"resource_id": lock, "client_id": "c", "lease_duration_ms": 200, "wait_ms": 5000});
    let (st, g) = post(base, "/v1/locks/acquire", body, None).await;
    assert_eq!(st, 200, "{g}");
    let release = json!({"resource_id": lock, "lock_token": g["lock_token"]});
    assert_eq!(post(base, "/v1/locks/release", release, None).await.0, 200);
    g["fencing_token"].as_u64().unwrap()
}

async fn locks_server(data: &Path) -> ServeProcess {
    let mut s = ServeProcess::start_role("locks", data, &[]);
    s.ready().await;
    s
}

#[tokio::test]
async fn bump_tokens_moves_a_restored_directory_above_tokens_handed_out_since_the_backup() {
    let dir = tempfile::tempdir().unwrap();
    let (data, backup) = (dir.path().join("data"), dir.path().join("backup"));
    let mut s = locks_server(&data).await;
    let before_backup = grant(&s.base, "k").await;
    s.kill9();
    copy_dir(&data, &backup);
    // After the backup: a restart and more grants.
    let mut s = locks_server(&data).await;
    let mut since = Vec::new();
    for _ in 0..3 {
        since.push(grant(&s.base, "k").await);
    }
    s.kill9();
    let highest = *since.iter().max().unwrap();
    assert!(since.iter().all(|t| *t > before_backup));

    // Restored as it is, the directory hands out a token it handed out before: the hazard.
    let restored = dir.path().join("restored");
    copy_dir(&backup, &restored);
    let mut s = locks_server(&restored).await;
    assert!(grant(&s.base, "k").await <= highest, "a restored directory repeats tokens");
    s.kill9();

    // Bumped, every token is above them all.
    let bumped = dir.path().join("bumped");
    copy_dir(&backup, &bumped);
    let out = fencing()
        .args(["admin", "bump-tokens", "--data-dir"])
        .arg(&bumped)
        .args(["--by", "10000000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["leases_dropped"], true);
    let s = locks_server(&bumped).await;
    let first = grant(&s.base, "k").await;
    assert!(first > highest, "{first} after {highest}");
    assert!(grant(&s.base, "another-lock").await > highest);

    // A running server's directory is refused (1); a directory no lock service used is bad input (2).
    let out = fencing().args(["admin", "bump-tokens", "--data-dir"]).arg(&bumped).args(["--by", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    drop(s);
    let empty = dir.path().join("empty");
    let out = fencing().args(["admin", "bump-tokens", "--data-dir"]).arg(&empty).args(["--to", "5"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = fencing().args(["admin", "bump-tokens", "--data-dir"]).arg(&bumped).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "--by or --to is required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_gives_the_space_of_deleted_objects_back() {
    use fencing_server::storage::{Engine, Mutation, RedbEngine};
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("storage");
    {
        let guard = std::sync::Arc::new(fencing_runtime::NativeGuard);
        let engine = RedbEngine::open(&store, guard, fencing_runtime::Policy::NonDecreasing).unwrap();
        for i in 0..40 {
            let w = fencing_testkit::storage::req("big", 1, &format!("/o{i}"), Mutation::Put, &[7u8; 256 << 10]);
            engine.write(w).await.unwrap();
        }
        for i in 1..40 {
            engine
                .write(fencing_testkit::storage::req("big", 1, &format!("/o{i}"), Mutation::Delete, b""))
                .await
                .unwrap();
        }
    }
    let out = fencing().args(["admin", "compact", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (before, after) = (report["bytes_before"].as_u64().unwrap(), report["bytes_after"].as_u64().unwrap());
    assert!(before > 8 << 20 && after < before / 4, "{report}");
    let guard = std::sync::Arc::new(fencing_runtime::NativeGuard);
    let engine = RedbEngine::open(&store, guard, fencing_runtime::Policy::NonDecreasing).unwrap();
    assert_eq!(engine.read("big", "/o0").await.unwrap().bytes.map(|b| b.len()), Some(256 << 10), "kept object intact");
    assert_eq!(engine.read("big", "/o1").await.unwrap().bytes, None);
    // A directory without a store is bad input.
    let out = fencing().args(["admin", "compact", "--data-dir"]).arg(dir.path().join("none")).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn a_copied_data_directory_restores_every_fence_and_an_older_one_is_raised_by_reset() {
    let dir = tempfile::tempdir().unwrap();
    let (data, backup) = (dir.path().join("data"), dir.path().join("backup"));
    let (token_file, operators) = credentials(dir.path());
    let auth = ["--auth-token-file", token_file.to_str().unwrap(), "--admin-token-file", operators.to_str().unwrap()];
    let mut s = ServeProcess::start(&data, &auth);
    s.ready().await;
    for r in ["a", "b"] {
        assert_eq!(write(&s.base, r, r, 34).await.0, 200);
    }
    // A crash-consistent copy (as a filesystem snapshot takes it), then newer writes.
    s.kill9();
    copy_dir(&data, &backup);
    let mut s = ServeProcess::start(&data, &auth);
    s.ready().await;
    assert_eq!(write(&s.base, "a", "a", 40).await.0, 200);
    s.kill9();

    // Restored: every fence of the copy is there, with its data.
    let restored = dir.path().join("restored");
    copy_dir(&backup, &restored);
    let mut s = ServeProcess::start(&restored, &auth);
    s.ready().await;
    for r in ["a", "b"] {
        let (st, body) = write(&s.base, r, r, 33).await;
        assert_eq!((st, body["reason"].as_str(), &body["high_water"]), (409, Some("stale_token"), &json!(34)), "{r}");
    }
    // The copy is older than "a"'s last write: 39 would be let in again, until
    // the operator re-binds the fence above every token handed out since.
    let reset =
        json!({"resource_id": "a", "reason": "restored from an older backup", "lock_id": "a", "high_water": 40});
    assert_eq!(post(&s.base, "/v1/admin/fences/reset", reset, Some(OPERATOR)).await.0, 200);
    let (st, body) = write(&s.base, "a", "a", 39).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("stale_token")));
    assert_eq!(write(&s.base, "a", "a", 41).await.0, 200);
    assert_eq!(write(&s.base, "b", "b", 35).await.0, 200);
    s.kill9();
}
