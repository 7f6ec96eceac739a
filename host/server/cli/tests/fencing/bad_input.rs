//! The bad-request suite: every kind of malformed or hostile request to the
//! storage and lock APIs gets a clear 4xx JSON answer naming the field, and
//! afterwards the stored data, the fence and the lock are exactly as before.
//! Thousands of idle connections held open do not stop the server from
//! serving others.
//!
//! It runs one `fencing serve` (storage and locks) on a free loopback port with
//! a temporary data directory, and stops it at the end.

use base64::Engine;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::time::Duration;

const RESOURCE: &str = "storage:bad-input-bucket";
const FILE: &str = "/orders/2026-05.csv";
const GOOD: &[u8] = b"id,total\n1,10\n";

/// `fencing serve` (storage and locks) in a fresh temporary directory.
async fn start() -> (ServeProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("all", dir.path(), &[]);
    server.ready().await;
    (server, dir)
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

async fn post_raw(http: &reqwest::Client, url: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let resp = http.post(url).header("content-type", "application/json").body(body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Asserts a 4xx JSON error that names `field` (in `error.field`, or in the message for a missing field).
fn assert_names(case: &str, status: u16, body: &Value, field: Option<&str>) {
    assert!((400..500).contains(&status), "{case}: status {status}, body {body}");
    let error = body.get("error").unwrap_or_else(|| panic!("{case}: no error object in {body}"));
    assert!(error["code"].is_string() && error["message"].is_string(), "{case}: {body}");
    if let Some(field) = field {
        let named = error["field"].as_str().is_some_and(|f| f == field || f.ends_with(field))
            || error["message"].as_str().is_some_and(|m| m.contains(field.rsplit('.').next().unwrap()));
        assert!(named, "{case}: error does not name {field}: {body}");
    }
}

fn write_body(token: Value, payload: Value) -> Value {
    json!({"resource_id": RESOURCE, "fencing_token": token, "write_payload": payload, "sequence": 2})
}

fn payload(path: &str, mutation: &str, bytes: &str) -> Value {
    json!({"file_path": path, "mutation_type": mutation, "bytes": bytes})
}

async fn snapshot(http: &reqwest::Client, base: &str) -> (Value, Value, Value) {
    let fence = http.get(format!("{base}/v1/storage/fence")).query(&[("resource_id", RESOURCE)]).send().await.unwrap();
    let read = http.get(format!("{base}/v1/storage/read")).query(&[("resource_id", RESOURCE), ("file_path", FILE)]);
    let read = read.send().await.unwrap();
    let status = http.get(format!("{base}/v1/locks/status")).query(&[("resource_id", RESOURCE)]).send().await.unwrap();
    let mut status: Value = status.json().await.unwrap();
    status.as_object_mut().unwrap().remove("remaining_ms");
    (fence.json().await.unwrap(), read.json().await.unwrap(), status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_4xx_naming_the_field_and_change_nothing() {
    let (server, _dir) = start().await;
    let http = reqwest::Client::new();
    let base = server.base.as_str();
    let (write, acquire) = (format!("{base}/v1/storage/write"), format!("{base}/v1/locks/acquire"));

    // A holder with a long lease and one good write.
    let body = json!({"resource_id": RESOURCE, "client_id": "holder", "lease_duration_ms": 600_000});
    let grant: Value = http.post(&acquire).json(&body).send().await.unwrap().json().await.unwrap();
    let token = grant["fencing_token"].as_u64().expect("granted");
    let lease = grant["lock_token"].as_str().unwrap().to_string();
    let good = json!({"resource_id": RESOURCE, "fencing_token": token, "sequence": 1,
        "write_payload": payload(FILE, "PUT", &b64(GOOD))});
    assert_eq!(http.post(&write).json(&good).send().await.unwrap().status(), 200);
    let before = snapshot(&http, base).await;
    assert_eq!(before.1["bytes"], json!(b64(GOOD)));

    let ok_payload = payload(FILE, "PUT", &b64(b"corrupt"));
    let over_u64 = r#"{"resource_id":"storage:bad-input-bucket","fencing_token":18446744073709551616,"write_payload":{"file_path":"/x","mutation_type":"PUT","bytes":""}}"#;
    let cases: Vec<(&str, String, Option<&str>)> = vec![
        ("malformed json", r#"{"resource_id": "#.into(), None),
        ("not an object", "[1,2,3]".into(), None),
        ("token as string", write_body(json!("12"), ok_payload.clone()).to_string(), Some("fencing_token")),
        ("negative token", write_body(json!(-1), ok_payload.clone()).to_string(), Some("fencing_token")),
        ("fractional token", write_body(json!(1.5), ok_payload.clone()).to_string(), Some("fencing_token")),
        ("token over u64", over_u64.into(), Some("fencing_token")),
        (
            "negative sequence",
            {
                let mut b = write_body(json!(token), ok_payload.clone());
                b["sequence"] = json!(-3);
                b.to_string()
            },
            Some("sequence"),
        ),
        (
            "resource id as number",
            json!({"resource_id": 5, "fencing_token": token, "write_payload": ok_payload}).to_string(),
            Some("resource_id"),
        ),
        (
            "missing token",
            json!({"resource_id": RESOURCE, "write_payload": ok_payload}).to_string(),
            Some("fencing_token"),
        ),
        (
            "missing payload",
            json!({"resource_id": RESOURCE, "fencing_token": token}).to_string(),
            Some("write_payload"),
        ),
        (
            "missing bytes",
            write_body(json!(token), json!({"file_path": FILE, "mutation_type": "PUT"})).to_string(),
            Some("write_payload.bytes"),
        ),
        ("payload as string", write_body(json!(token), json!("PUT it")).to_string(), Some("write_payload")),
        (
            "invalid base64",
            write_body(json!(token), payload(FILE, "PUT", "!!not base64!!")).to_string(),
            Some("write_payload.bytes"),
        ),
        (
            "unknown mutation",
            write_body(json!(token), payload(FILE, "PATCH", "")).to_string(),
            Some("write_payload.mutation_type"),
        ),
        (
            "empty resource id",
            json!({"resource_id": "", "fencing_token": token, "write_payload": ok_payload}).to_string(),
            Some("resource_id"),
        ),
        (
            "oversized resource id",
            json!({"resource_id": "r".repeat(4096), "fencing_token": token, "write_payload": ok_payload}).to_string(),
            Some("resource_id"),
        ),
        ("empty path", write_body(json!(token), payload("", "PUT", "")).to_string(), Some("write_payload.file_path")),
        (
            "oversized path",
            write_body(json!(token), payload(&"p".repeat(8192), "PUT", "")).to_string(),
            Some("write_payload.file_path"),
        ),
        (
            "path traversal",
            write_body(json!(token), payload("../../etc/passwd", "PUT", "")).to_string(),
            Some("write_payload.file_path"),
        ),
        (
            "path traversal inside",
            write_body(json!(token), payload("/orders/../../x", "PUT", "")).to_string(),
            Some("write_payload.file_path"),
        ),
        (
            "nul in path",
            write_body(json!(token), payload("/a\u{0}b", "PUT", "")).to_string(),
            Some("write_payload.file_path"),
        ),
    ];
    // Every bad request sent below is counted; the total is printed for the README's reliability table.
    let mut tried = 0usize;
    for (case, body, field) in cases {
        tried += 1;
        let (status, answer) = post_raw(&http, &write, body).await;
        assert_names(case, status, &answer, field);
    }

    // Token 0 is never valid: a 400 naming the token, or the fence's 409 `invalid_token`.
    let (status, answer) = post_raw(&http, &write, write_body(json!(0), ok_payload.clone()).to_string()).await;
    tried += 1;
    if status == 409 {
        assert_eq!(answer["reason"], "invalid_token", "{answer}");
        assert_eq!(answer["accepted"], false);
    } else {
        assert_names("token 0", status, &answer, Some("fencing_token"));
    }

    // A body over the limit.
    let huge = format!(
        r#"{{"resource_id":"{RESOURCE}","fencing_token":{token},"write_payload":{{"file_path":"/big","mutation_type":"PUT","bytes":"{}"}}}}"#,
        "A".repeat(9 << 20)
    );
    let resp = http.post(&write).header("content-type", "application/json").body(huge).send().await.unwrap();
    tried += 1;
    assert_eq!(resp.status().as_u16(), 413, "oversized body");
    // The unread rest of the body makes the connection unusable: the server says so.
    assert_eq!(resp.headers().get("connection").map(|v| v.as_bytes()), Some(&b"close"[..]), "oversized body");

    // Bad acquisitions.
    for (case, body, field) in [
        (
            "lease as string",
            json!({"resource_id": RESOURCE, "client_id": "x", "lease_duration_ms": "1s"}),
            "lease_duration_ms",
        ),
        (
            "negative lease",
            json!({"resource_id": RESOURCE, "client_id": "x", "lease_duration_ms": -5}),
            "lease_duration_ms",
        ),
        ("missing client", json!({"resource_id": RESOURCE, "lease_duration_ms": 1000}), "client_id"),
        ("empty resource", json!({"resource_id": "", "client_id": "x", "lease_duration_ms": 1000}), "resource_id"),
    ] {
        let (status, answer) = post_raw(&http, &acquire, body.to_string()).await;
        tried += 1;
        assert_names(case, status, &answer, Some(field));
    }

    // Wrong and foreign lease ids on renew and release.
    let other = json!({"resource_id": "storage:another-bucket", "client_id": "other", "lease_duration_ms": 600_000});
    let other: Value = http.post(&acquire).json(&other).send().await.unwrap().json().await.unwrap();
    let foreign = other["lock_token"].as_str().expect("granted").to_string();
    let wrong = format!("{:032x}", u128::MAX - 7);
    for endpoint in ["renew", "release"] {
        for (case, lock_token) in
            [("wrong lease", wrong.as_str()), ("foreign lease", foreign.as_str()), ("garbage lease", "not-a-lease")]
        {
            let body = json!({"resource_id": RESOURCE, "lock_token": lock_token}).to_string();
            let (status, answer) = post_raw(&http, &format!("{base}/v1/locks/{endpoint}"), body).await;
            tried += 1;
            assert_names(&format!("{endpoint}: {case}"), status, &answer, Some("lock_token"));
        }
    }
    println!("bad requests tried: {tried}");

    let after = snapshot(&http, base).await;
    assert_eq!(before, after, "bad input changed stored data, the fence or the lock");
    // The real holder still holds: its lease id is valid.
    let renew = json!({"resource_id": RESOURCE, "lock_token": lease});
    assert_eq!(http.post(format!("{base}/v1/locks/renew")).json(&renew).send().await.unwrap().status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_idle_connections_do_not_stop_service() {
    let (server, _dir) = start().await;
    let addr = server.base.trim_start_matches("http://").to_string();
    let mut idle = Vec::with_capacity(3000);
    for _ in 0..3000 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // Half of them start a request and never finish it.
    for conn in idle.iter_mut().step_by(2) {
        use tokio::io::AsyncWriteExt;
        let _ = conn.write_all(b"POST /v1/storage/write HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{").await;
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let body = json!({"resource_id": "storage:busy", "client_id": "c", "lease_duration_ms": 60_000});
    let grant: Value =
        http.post(format!("{}/v1/locks/acquire", server.base)).json(&body).send().await.unwrap().json().await.unwrap();
    let token = grant["fencing_token"].as_u64().expect("acquire served while connections are held");
    for seq in 1..=20u64 {
        let w = json!({"resource_id": "storage:busy", "fencing_token": token, "sequence": seq,
            "write_payload": payload("/f", "APPEND", &b64(b"x"))});
        let resp = http.post(format!("{}/v1/storage/write", server.base)).json(&w).send().await.unwrap();
        assert_eq!(resp.status(), 200, "write {seq} served while connections are held");
    }
    let read = http
        .get(format!("{}/v1/storage/read", server.base))
        .query(&[("resource_id", "storage:busy"), ("file_path", "/f")]);
    let read: Value = read.send().await.unwrap().json().await.unwrap();
    assert_eq!(read["bytes"], json!(b64(&[b'x'; 20])));
    drop(idle);
}
