//! A real `fencing serve --role locks` process: tokens stay monotonic across
//! a kill -9 loop; after a kill -9 or a SIGTERM a free lock is granted at
//! once, a held lease stays held for its holder only, a released one-hour
//! lease is gone, with `--lease-sync background` (the default) and `each-grant`; re-entry
//! needs the lease id; the HTTP API's shapes and errors, the `fencing lock`
//! exit codes and `--lease-sync`'s usage errors; a lost journal stops the
//! server until an operator recovers it.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(data_dir: &Path, port: u16) -> Server {
        Server::start_with(data_dir, port, &[])
    }

    fn start_with(data_dir: &Path, port: u16, extra: &[&str]) -> Server {
        let child = Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["serve", "--role", "locks", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn fencing serve");
        let server = Server { child, base: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(20);
        while reqwest::blocking_get(&format!("{}/metrics", server.base)).is_err() {
            assert!(Instant::now() < deadline, "server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    fn kill9(self) {
        self.stop(nix::sys::signal::Signal::SIGKILL);
    }

    fn stop(mut self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), signal).unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod reqwest {
    //! Tiny blocking helpers over the async client.
    pub fn blocking_get(url: &str) -> Result<(u16, serde_json::Value), String> {
        call(::reqwest::Method::GET, url, None)
    }
    pub fn post(url: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        call(::reqwest::Method::POST, url, Some(body)).expect("request")
    }
    fn call(
        m: ::reqwest::Method,
        url: &str,
        body: Option<serde_json::Value>,
    ) -> Result<(u16, serde_json::Value), String> {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut req = ::reqwest::Client::new().request(m, url);
            if let Some(b) = body {
                req = req.json(&b);
            }
            let resp = req.send().await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let text = resp.text().await.map_err(|e| e.to_string())?;
            Ok((status, serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text))))
        })
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn acquire(base: &str, lock: &str, client: &str, lease: u64, wait: Option<u64>) -> (u16, serde_json::Value) {
    let mut body = serde_json::json!({"resource_id": lock, "client_id": client, "lease_duration_ms": lease});
    if let Some(w) = wait {
        body["wait_ms"] = w.into();
    }
    reqwest::post(&format!("{base}/v1/locks/acquire"), body)
}

#[test]
fn tokens_stay_monotonic_across_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut last = 0u64;
    let mut all = Vec::new();
    for round in 0..8 {
        let server = Server::start(dir.path(), port);
        for i in 0..(5 + round) {
            // wait_ms covers a lease held at the crash, restored for its
            // full second; the 1 s lease outlives a release delayed by a
            // loaded machine.
            let (st, g) = acquire(&server.base, "k", &format!("c{round}-{i}"), 1_000, Some(5_000));
            assert_eq!(st, 200, "{g}");
            let token = g["fencing_token"].as_u64().unwrap();
            assert!(token > last, "round {round}: token {token} after {last}");
            last = token;
            all.push(token);
            let (st, _) = reqwest::post(
                &format!("{}/v1/locks/release", server.base),
                serde_json::json!({"resource_id": "k", "lock_token": g["lock_token"]}),
            );
            assert_eq!(st, 200);
        }
        // Hold a lease at the moment of the crash in some rounds.
        if round % 2 == 0 {
            let (st, g) = acquire(&server.base, "k", "crasher", 1_000, Some(5_000));
            assert_eq!(st, 200, "{g}");
            last = g["fencing_token"].as_u64().unwrap();
        }
        server.kill9();
    }
    assert!(all.len() > 40);
}

fn lease_body(lock: &str, g: &serde_json::Value) -> serde_json::Value {
    serde_json::json!({"resource_id": lock, "lock_token": g["lock_token"]})
}

/// A restart by `signal`: before it, a one-hour lease released, a lease
/// held and a lock never used; after it, each is as it was. Under
/// `--lease-sync background` (the default) the held lease's grant was
/// answered ahead of its sync (the one-hour grant had raised the bound above it).
fn restart_keeps_leases(signal: nix::sys::signal::Signal, extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start_with(dir.path(), port, extra);
    let (st, long) = acquire(&server.base, "long", "c", 3_600_000, None);
    assert_eq!(st, 200, "{long}");
    assert_eq!(reqwest::post(&format!("{}/v1/locks/release", server.base), lease_body("long", &long)).0, 200);
    let (st, held) = acquire(&server.base, "held", "holder", 60_000, None);
    assert_eq!(st, 200, "{held}");
    server.stop(signal);

    let server = Server::start_with(dir.path(), port, extra);
    let listening = Instant::now();
    // Free locks are granted at once, without waiting: the released one-hour lease and a new name.
    let (st, g) = acquire(&server.base, "long", "c2", 1_000, None);
    assert_eq!(st, 200, "a released lock after a restart: {g}");
    assert!(g["fencing_token"].as_u64() > long["fencing_token"].as_u64());
    let (st, g) = acquire(&server.base, "fresh", "c3", 1_000, None);
    assert_eq!(st, 200, "{g}");
    assert!(listening.elapsed() < Duration::from_secs(1), "first grants took {:?}", listening.elapsed());
    // The held lease is still held: refused to others, renewable and releasable by its holder.
    let (st, refused) = acquire(&server.base, "held", "other", 1_000, None);
    assert_eq!((st, refused["reason"].as_str()), (409, Some("held")), "{refused}");
    let (_, status) = reqwest::blocking_get(&format!("{}/v1/locks/status?resource_id=held", server.base)).unwrap();
    assert_eq!((status["held"].as_bool(), &status["fencing_token"]), (Some(true), &held["fencing_token"]));
    let (st, renewed) = reqwest::post(&format!("{}/v1/locks/renew", server.base), lease_body("held", &held));
    assert_eq!((st, &renewed["fencing_token"]), (200, &held["fencing_token"]), "{renewed}");
    let (st, _) = reqwest::post(&format!("{}/v1/locks/release", server.base), lease_body("held", &held));
    assert_eq!(st, 200);
    let (st, next) = acquire(&server.base, "held", "other", 1_000, None);
    assert_eq!(st, 200, "{next}");
    assert!(next["fencing_token"].as_u64() > held["fencing_token"].as_u64());
}

#[test]
fn kill_9_restart_keeps_held_leases_and_frees_the_rest() {
    restart_keeps_leases(nix::sys::signal::Signal::SIGKILL, &[]);
}

#[test]
fn sigterm_restart_keeps_held_leases_and_frees_the_rest() {
    restart_keeps_leases(nix::sys::signal::Signal::SIGTERM, &[]);
}

#[test]
fn kill_9_restart_keeps_grants_synced_each() {
    restart_keeps_leases(nix::sys::signal::Signal::SIGKILL, &["--lease-sync", "each-grant"]);
}

#[test]
fn sigterm_restart_keeps_grants_synced_each() {
    restart_keeps_leases(nix::sys::signal::Signal::SIGTERM, &["--lease-sync", "each-grant"]);
}

#[test]
fn reentry_by_client_id_alone_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), free_port(), &["--reentrant"]);
    let (st, g) = acquire(&server.base, "r", "holder", 5_000, None);
    assert_eq!(st, 200);
    let (st, refused) = acquire(&server.base, "r", "holder", 60_000, None);
    assert_eq!(st, 409, "client id alone re-entered: {refused}");
    let body = serde_json::json!({"resource_id": "r", "client_id": "holder", "lease_duration_ms": 60_000,
        "lock_token": "0123456789abcdef0123456789abcdef"});
    assert_eq!(reqwest::post(&format!("{}/v1/locks/acquire", server.base), body).0, 409);
    let body = serde_json::json!({"resource_id": "r", "client_id": "holder", "lease_duration_ms": 60_000,
        "lock_token": g["lock_token"]});
    let (st, again) = reqwest::post(&format!("{}/v1/locks/acquire", server.base), body);
    assert_eq!((st, &again["fencing_token"], &again["lock_token"]), (200, &g["fencing_token"], &g["lock_token"]));
    let body = serde_json::json!({"resource_id": "r", "client_id": "holder", "lease_duration_ms": 60_000,
        "lock_token": "not-a-lease"});
    let (st, e) = reqwest::post(&format!("{}/v1/locks/acquire", server.base), body);
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("lock_token")));
}

#[test]
fn http_api_shapes_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), free_port());
    let base = &server.base;
    let (st, g) = acquire(base, "storage:orders", "c1", 10_000, None);
    assert_eq!(st, 200);
    let mut keys: Vec<_> = g.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["acquired_at", "fencing_token", "lease_duration_ms", "lock_acquired", "lock_token", "resource_id"]
    );
    assert_eq!(g["lock_acquired"], true);
    let at = g["acquired_at"].as_str().unwrap();
    assert!(humantime::parse_rfc3339(at).is_ok() && at.ends_with('Z'), "{at}");
    let (st, r) = acquire(base, "storage:orders", "c2", 10_000, None);
    assert_eq!(st, 409);
    assert_eq!(r["lock_acquired"], false);
    assert!(r["remaining_lease_ms"].as_u64().unwrap() > 9_000);
    // Bad input: 400 naming the field.
    let (st, e) = acquire(base, "x", "c", 999_999_999, None);
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("lease_duration_ms")));
    let (st, e) = reqwest::post(
        &format!("{base}/v1/locks/acquire"),
        serde_json::json!({"resource_id": "x", "client_id": 5, "lease_duration_ms": 100}),
    );
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("client_id")));
    let (st, e) = reqwest::blocking_get(&format!("{base}/v1/locks/status")).unwrap();
    assert_eq!((st, e["error"]["field"].as_str()), (400, Some("resource_id")));
    // Renew/release with a wrong lease id.
    let wrong = serde_json::json!({"resource_id": "storage:orders", "lock_token": "0123456789abcdef0123456789abcdef"});
    let (st, e) = reqwest::post(&format!("{base}/v1/locks/renew"), wrong.clone());
    assert_eq!((st, e["error"]["code"].as_str()), (409, Some("wrong_lease")));
    let (st, _) = reqwest::post(&format!("{base}/v1/locks/release"), wrong);
    assert_eq!(st, 409);
    // Status and metrics.
    let (st, s) = reqwest::blocking_get(&format!("{base}/v1/locks/status?resource_id=storage:orders")).unwrap();
    assert_eq!(st, 200);
    assert_eq!((s["held"].as_bool(), s["client_id"].as_str()), (Some(true), Some("c1")));
    assert_eq!(s["fencing_token"], g["fencing_token"]);
    let lease = serde_json::json!({"resource_id": "storage:orders", "lock_token": g["lock_token"]});
    assert_eq!(reqwest::post(&format!("{base}/v1/locks/renew"), lease.clone()).0, 200);
    assert_eq!(reqwest::post(&format!("{base}/v1/locks/release"), lease).0, 200);
    let (_, m) = reqwest::blocking_get(&format!("{base}/metrics")).unwrap();
    let m = m.as_str().unwrap().to_string();
    assert!(m.contains("fencing_locks_acquisitions_total 1"), "{m}");
    assert!(m.contains("fencing_locks_contention_total 1"), "{m}");
    assert!(m.contains("fencing_locks_renewals_total 1"), "{m}");
    assert!(m.contains("fencing_locks_current_token{lock=\"storage:orders\"} 1"), "{m}");
}

#[test]
fn lock_cli_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), free_port());
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["lock", "--server", &server.base])
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, out) = run(&["acquire", "cli-lock", "--client-id", "me", "--lease-ms", "5000"]);
    assert_eq!(code, Some(0), "{out}");
    let g: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(run(&["acquire", "cli-lock", "--client-id", "you"]).0, Some(1), "held");
    assert_eq!(run(&["acquire", "cli-lock", "--client-id", "me", "--lease-ms", "0"]).0, Some(2));
    assert_eq!(run(&["renew", "cli-lock", "not-a-lease"]).0, Some(2));
    let (code, out) = run(&["status", "cli-lock"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("\"me\""), "{out}");
    assert_eq!(run(&["release", "cli-lock", g["lock_token"].as_str().unwrap()]).0, Some(0));
    assert_eq!(run(&["release", "cli-lock", g["lock_token"].as_str().unwrap()]).0, Some(1));
}

#[test]
fn lease_sync_is_checked_before_the_server_starts() {
    let dir = tempfile::tempdir().unwrap();
    let serve = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["serve", "--role", "locks", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    for mode in ["background", "each-grant"] {
        let out = serve(&["--locks", "etcd", "--lease-sync", mode]);
        assert_eq!(out.status.code(), Some(2), "{mode}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--lease-sync"), "{out:?}");
    }
    let out = serve(&["--lease-sync", "sometimes"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("each-grant"), "{out:?}");
    // The chaos campaign passes it to its own lock service; the cluster's locks are etcd's.
    for mode in ["background", "each-grant"] {
        let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["chaos", "--topology", "cluster", "--lease-sync", mode, "--seconds", "1"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{mode}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--lease-sync is for the local topology"), "{stderr}");
    }
}

/// The issue's story end to end: a 10-minute lease is held, the journal is
/// emptied while the server is down; `fencing serve` refuses to start, exit
/// code 1, naming the exact recovery command instead of granting the lock
/// to a second client; after `fencing admin recover-leases` it starts and
/// grants nothing until the 10 minutes have passed, a restart included (the
/// tokens' side, with short leases: `locks_embedded::`).
#[test]
fn a_lost_journal_stops_the_server_until_it_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = Server::start(dir.path(), port);
    let (st, held) = acquire(&server.base, "k", "first", 600_000, None);
    assert_eq!(st, 200, "{held}");
    server.kill9();
    std::fs::write(dir.path().join("locks-leases"), b"").unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
        .args(["serve", "--role", "locks", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let command = format!("fencing admin recover-leases --data-dir {}", dir.path().display());
    assert!(stderr.contains("is empty") && stderr.contains(&command), "{stderr}");
    assert!(stderr.contains("leases of up to 600000 ms"), "{stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
        .args(["admin", "recover-leases", "--data-dir"])
        .arg(dir.path())
        .env_remove("FENCING_DATA_DIR")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["first_grant_waits_ms"], 600_000, "{report}");
    assert!(report["journal_kept_as"].as_str().is_some_and(|p| p.contains("locks-leases.unreadable-")), "{report}");

    let server = Server::start(dir.path(), port);
    let (st, refused) = acquire(&server.base, "k", "second", 1_000, None);
    assert_eq!((st, refused["reason"].as_str()), (409, Some("grace_period")), "{refused}");
    assert!(refused["remaining_lease_ms"].as_u64().unwrap() > 590_000, "{refused}");
    let (st, other) = acquire(&server.base, "other", "second", 1_000, None);
    assert_eq!((st, other["reason"].as_str()), (409, Some("grace_period")), "no lock is granted: {other}");
    // A second recovery is refused: the journal now reads back whole.
    drop(server);
    let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
        .args(["admin", "recover-leases", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // The wait outlives a restart: still no grant.
    let server = Server::start(dir.path(), port);
    let (st, refused) = acquire(&server.base, "k", "second", 1_000, None);
    assert_eq!((st, refused["reason"].as_str()), (409, Some("grace_period")), "{refused}");
}
