//! The campaign's client, proxy, read-back and checker, end to end over HTTP,
//! against small in-test servers that speak the storage and lock APIs: with a
//! fence the history checks clean; with the fence removed (any token accepted),
//! the checker finds the stale writes that slow clients make after their lease
//! ran out. The real servers are exercised by `fencing chaos` itself.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use fencing_host::chaos::campaign::read_all;
use fencing_host::chaos::check::{Report, check};
use fencing_host::chaos::client::{self, ClientConfig};
use fencing_host::chaos::history::{Header, HistoryWriter, Phase, Record, now_us, read_history};
use fencing_host::chaos::proxy::{Fault, Proxy};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Resource {
    high_water: u64,
    sequence: Option<u64>,
    files: HashMap<String, Vec<u8>>,
}

#[derive(Default)]
struct Lock {
    token: u64,
    holder: Option<(String, Instant)>,
}

struct Fake {
    fencing: bool,
    resources: Mutex<HashMap<String, Resource>>,
    locks: Mutex<HashMap<String, Lock>>,
}

type S = State<Arc<Fake>>;

async fn acquire(State(f): S, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = b["resource_id"].as_str().unwrap().to_string();
    let lease = b["lease_duration_ms"].as_u64().unwrap();
    let mut locks = f.locks.lock().unwrap();
    let lock = locks.entry(id.clone()).or_default();
    if lock.holder.as_ref().is_some_and(|(_, until)| *until > Instant::now()) {
        return (StatusCode::CONFLICT, Json(json!({"lock_acquired": false})));
    }
    lock.token += 1;
    let lease_id = format!("{:032x}", rand::random::<u128>());
    lock.holder = Some((lease_id.clone(), Instant::now() + Duration::from_millis(lease)));
    let grant = json!({"resource_id": id, "lock_acquired": true, "lock_token": lease_id,
        "fencing_token": lock.token, "lease_duration_ms": lease, "acquired_at": "2026-01-01T00:00:00Z"});
    (StatusCode::OK, Json(grant))
}

async fn release(State(f): S, Json(b): Json<Value>) -> StatusCode {
    let mut locks = f.locks.lock().unwrap();
    let lock = locks.entry(b["resource_id"].as_str().unwrap().to_string()).or_default();
    if lock.holder.as_ref().is_some_and(|(id, _)| id == b["lock_token"].as_str().unwrap()) {
        lock.holder = None;
        return StatusCode::OK;
    }
    StatusCode::CONFLICT
}

async fn write(State(f): S, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    let (token, seq) = (b["fencing_token"].as_u64().unwrap(), b["sequence"].as_u64());
    let mut resources = f.resources.lock().unwrap();
    let r = resources.entry(b["resource_id"].as_str().unwrap().to_string()).or_default();
    let stale = token < r.high_water;
    let regressed = token == r.high_water && seq.is_some_and(|s| r.sequence.is_some_and(|l| s <= l));
    if f.fencing && (stale || regressed) {
        let reason = if stale { "stale_token" } else { "sequence_regressed" };
        let body = json!({"accepted": false, "reason": reason, "presented": token, "high_water": r.high_water});
        return (StatusCode::CONFLICT, Json(body));
    }
    (r.high_water, r.sequence) = (token.max(r.high_water), seq);
    let p = &b["write_payload"];
    let path = p["file_path"].as_str().unwrap().to_string();
    let bytes = base64::engine::general_purpose::STANDARD.decode(p["bytes"].as_str().unwrap()).unwrap();
    match p["mutation_type"].as_str().unwrap() {
        "PUT" => drop(r.files.insert(path, bytes)),
        "APPEND" => r.files.entry(path).or_default().extend(bytes),
        _ => drop(r.files.remove(&path)),
    }
    (StatusCode::OK, Json(json!({"accepted": true, "high_water": r.high_water})))
}

async fn read(State(f): S, Query(q): Query<HashMap<String, String>>) -> (StatusCode, Json<Value>) {
    let resources = f.resources.lock().unwrap();
    let Some(r) = resources.get(&q["resource_id"]) else { return (StatusCode::NOT_FOUND, Json(json!({}))) };
    match r.files.get(&q["file_path"]) {
        None => (StatusCode::NOT_FOUND, Json(json!({}))),
        Some(b) => {
            let bytes = base64::engine::general_purpose::STANDARD.encode(b);
            (StatusCode::OK, Json(json!({"bytes": bytes, "fence": {"high_water": r.high_water}})))
        }
    }
}

async fn serve(fencing: bool) -> std::net::SocketAddr {
    let fake = Arc::new(Fake { fencing, resources: Mutex::default(), locks: Mutex::default() });
    let app = Router::new()
        .route("/v1/locks/acquire", post(acquire))
        .route("/v1/locks/release", post(release))
        .route("/v1/storage/write", post(write))
        .route("/v1/storage/read", get(read))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn campaign(fencing: bool) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(fencing).await;
    let proxy = Proxy::start(server, 1).await.unwrap();
    let url = format!("http://{}", proxy.addr);
    let resources = vec!["storage:pipeline".to_string()];
    let until_us = now_us() + 4_000_000;
    let mut tasks = vec![];
    for i in 0..4 {
        let cfg = ClientConfig {
            id: format!("c{i}"),
            locks_url: url.clone(),
            storage_url: url.clone(),
            resources: resources.clone(),
            seed: 100 + i,
            lease_ms: (30, 120),
            until_us,
            history: dir.path().join(format!("c{i}.jsonl")),
        };
        tasks.push(tokio::spawn(client::run(cfg)));
    }
    let own = HistoryWriter::create(&dir.path().join("campaign.jsonl")).unwrap();
    own.write(&Record::Header(Header { seed: 1, fencing, policy: "non_decreasing".into(), started_us: now_us() }))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    proxy.set(Fault::Delay(150));
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(Fault::Drop(0.3));
    tokio::time::sleep(Duration::from_millis(800)).await;
    proxy.set(Fault::None);
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    read_all(&format!("http://{server}"), &resources, Phase::Final, &own).await.unwrap();
    let mut records = read_history(&dir.path().join("campaign.jsonl")).unwrap();
    for i in 0..4 {
        records.extend(read_history(&dir.path().join(format!("c{i}.jsonl"))).unwrap());
    }
    check(&records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_run_checks_clean_and_an_unfenced_one_shows_violations() {
    let fenced = campaign(true).await;
    assert!(fenced.is_valid(), "{:?}", fenced.violations);
    assert!(fenced.summary.admitted > 20, "{:?}", fenced.summary);
    assert!(fenced.summary.rejected.values().sum::<u64>() > 0, "slow holders were fenced off: {:?}", fenced.summary);
    assert!(fenced.summary.reads_checked >= 2);

    eprintln!("fenced: {}", serde_json::to_string(&fenced.summary).unwrap());
    let unfenced = campaign(false).await;
    eprintln!("unfenced: {}", serde_json::to_string(&unfenced.summary).unwrap());
    assert!(!unfenced.is_valid(), "stale writes went unnoticed: {:?}", unfenced.summary);
    assert!(unfenced.summary.violation_kinds.contains_key("stale_admitted"), "{:?}", unfenced.summary);
}
