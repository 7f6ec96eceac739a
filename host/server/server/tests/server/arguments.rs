//! The shared argument vectors (`tests/vectors/arguments/arguments.json`)
//! through the HTTP API, as a client sends them: every `name` case as each
//! JSON field and query parameter that takes a name, every `proof` case as a
//! write's `fencing_proof`. A refused case is a 400 naming the field, its
//! message carrying the refusal's code; an accepted one is never a 400.
//!
//! The other kinds have no HTTP entry point: a policy is the server's
//! `--policy`, chosen at start and never sent by a client; tokens and
//! sequences travel as JSON numbers, never as decimal text; and the API
//! carries unsigned 64-bit integers, so no signed 64-bit value crosses it
//! either way. Cases given as bytes (`bytes_hex`) are for hosts that take
//! bytes: a JSON string is Unicode text, so they have none here either.

use fencing_runtime::{Guard, NativeGuard, Policy};
use fencing_server::locks::{EmbeddedConfig, EmbeddedLocks, LockMetrics, LockService};
use fencing_server::storage::{FlapConfig, RedbEngine, StorageMetrics, StorageService};
use fencing_server::telemetry::Metrics;
use serde_json::{Value, json};
use std::sync::Arc;

/// Kinds this host takes, and those it has no entry point for (module docs).
const RUN: [&str; 2] = ["name", "proof"];
const NO_ENTRY_POINT: [&str; 4] = ["policy", "number", "from_signed", "to_signed"];

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../tests/vectors/arguments/arguments.json");
    let file: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("the argument vectors")).unwrap();
    file["cases"].as_array().expect("cases").clone()
}

/// The case's text (`text` repeated `repeat` times), or `None` for a bytes-only case.
fn text(case: &Value) -> Option<String> {
    let text = case["text"].as_str()?;
    Some(text.repeat(case["repeat"].as_u64().unwrap_or(1) as usize))
}

async fn start() -> (String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let guard: Arc<dyn Guard> = Arc::new(NativeGuard);
    let engine = Arc::new(RedbEngine::open(&dir.path().join("storage"), guard, Policy::NonDecreasing).unwrap());
    let metrics = Metrics::new();
    let storage = StorageService::new(engine, Arc::new(StorageMetrics::new(&metrics, FlapConfig::default())));
    let locks: Arc<dyn LockService> =
        Arc::new(EmbeddedLocks::open(EmbeddedConfig::default(), LockMetrics::register(&metrics)).unwrap());
    let app = fencing_server::http::storage::router(storage).merge(fencing_server::http::locks::router(locks));
    let app = fencing_server::http::with_fallbacks(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fencing_server::http::serve(listener, app));
    (base, dir)
}

/// Checks one answer against the case: a refusal is 400 naming `field` and the code.
async fn verdict(case: &Value, field: &str, resp: reqwest::Response) -> Result<(), String> {
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    let expect = case["expect"].as_str().unwrap();
    let name = case["name"].as_str().unwrap();
    match (expect, status) {
        ("ok", 400) => Err(format!("{name} as {field}: refused, expected accepted: {body}")),
        ("ok", _) => Ok(()),
        (code, 400)
            if body["error"]["field"] == field
                && body["error"]["message"].as_str().is_some_and(|m| m.contains(code)) =>
        {
            Ok(())
        }
        (code, _) => Err(format!("{name} as {field}: expected 400 naming {field} with {code}, got {status} {body}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_name_and_proof_case_gets_its_verdict_through_the_http_api() {
    let cases = cases();
    for case in &cases {
        let kind = case["kind"].as_str().unwrap();
        assert!(RUN.contains(&kind) || NO_ENTRY_POINT.contains(&kind), "a kind this test does not place: {kind}");
    }
    let (base, _dir) = start().await;
    let http = reqwest::Client::new();
    let (mut failures, mut checked, mut skipped) = (Vec::new(), 0, 0);
    for (i, case) in cases.iter().enumerate() {
        let kind = case["kind"].as_str().unwrap();
        if !RUN.contains(&kind) {
            continue;
        }
        let Some(text) = text(case) else {
            skipped += 1;
            continue;
        };
        let unique = format!("vector-{i}");
        let write = |body: Value| http.post(format!("{base}/v1/storage/write")).json(&body).send();
        let payload = json!({"file_path": "/v", "mutation_type": "PUT", "bytes": "dg=="});
        let mut answers = Vec::new();
        if kind == "name" {
            let acquire = |resource: &str, client: &str| {
                let body = json!({"resource_id": resource, "client_id": client, "lease_duration_ms": 1000});
                http.post(format!("{base}/v1/locks/acquire")).json(&body).send()
            };
            answers.push(("resource_id", acquire(&text, "c").await.unwrap()));
            answers.push(("client_id", acquire(&unique, &text).await.unwrap()));
            let body = json!({"resource_id": text, "fencing_token": 1, "write_payload": payload});
            answers.push(("resource_id", write(body).await.unwrap()));
            let body = json!({"resource_id": unique, "lock_id": text, "fencing_token": 1, "write_payload": payload});
            answers.push(("lock_id", write(body).await.unwrap()));
            let fence = http.get(format!("{base}/v1/storage/fence")).query(&[("resource_id", &text)]).send();
            answers.push(("resource_id", fence.await.unwrap()));
        } else {
            let body =
                json!({"resource_id": unique, "fencing_token": 1, "write_payload": payload, "fencing_proof": text});
            answers.push(("fencing_proof", write(body).await.unwrap()));
        }
        for (field, resp) in answers {
            checked += 1;
            if let Err(e) = verdict(case, field, resp).await {
                failures.push(e);
            }
        }
    }
    println!("{checked} answers checked, {skipped} bytes-only cases have no HTTP form, {} failed", failures.len());
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(checked >= 100, "only {checked} answers checked");
}
