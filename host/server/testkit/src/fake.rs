//! Small stand-ins for the storage server and the lock service, speaking
//! their HTTP APIs, for testing the campaign machinery on its own: a fence
//! (optional), append/put/delete files, leases with increasing tokens, and
//! state saved to a data directory after every change so it survives SIGKILL.
//! It is deliberately simple; the real servers are what `fencing chaos` tests.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[derive(Default, Serialize, Deserialize)]
struct Resource {
    high_water: u64,
    sequence: Option<u64>,
    files: HashMap<String, Vec<u8>>,
}

#[derive(Default, Serialize, Deserialize)]
struct Lock {
    token: u64,
    holder: Option<(String, u64)>,
}

#[derive(Default, Serialize, Deserialize)]
struct Data {
    resources: HashMap<String, Resource>,
    locks: HashMap<String, Lock>,
}

pub struct Fake {
    fencing: bool,
    dir: Option<PathBuf>,
    data: Mutex<Data>,
}

impl Fake {
    fn save(&self, data: &Data) {
        if let Some(dir) = &self.dir {
            let tmp = dir.join("state.json.tmp");
            std::fs::write(&tmp, serde_json::to_vec(data).unwrap()).unwrap();
            std::fs::rename(tmp, dir.join("state.json")).unwrap();
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

type S = State<Arc<Fake>>;

async fn acquire(State(f): S, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    let id = b["resource_id"].as_str().unwrap().to_string();
    let lease = b["lease_duration_ms"].as_u64().unwrap();
    let mut data = f.data.lock().unwrap();
    let lock = data.locks.entry(id.clone()).or_default();
    if lock.holder.as_ref().is_some_and(|(_, until)| *until > now_ms()) {
        return (StatusCode::CONFLICT, Json(json!({"lock_acquired": false})));
    }
    lock.token += 1;
    let lease_id = format!("{:032x}", rand::random::<u128>());
    lock.holder = Some((lease_id.clone(), now_ms() + lease));
    let grant = json!({"resource_id": id, "lock_acquired": true, "lock_token": lease_id,
        "fencing_token": lock.token, "lease_duration_ms": lease, "acquired_at": "2026-01-01T00:00:00Z"});
    f.save(&data);
    (StatusCode::OK, Json(grant))
}

async fn release(State(f): S, Json(b): Json<Value>) -> StatusCode {
    let mut data = f.data.lock().unwrap();
    let lock = data.locks.entry(b["resource_id"].as_str().unwrap().to_string()).or_default();
    if lock.holder.as_ref().is_some_and(|(id, _)| id == b["lock_token"].as_str().unwrap()) {
        lock.holder = None;
        f.save(&data);
        return StatusCode::OK;
    }
    StatusCode::CONFLICT
}

async fn status() -> Json<Value> {
    Json(json!({"held": false}))
}

async fn write(State(f): S, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    let (token, seq) = (b["fencing_token"].as_u64().unwrap(), b["sequence"].as_u64());
    let mut data = f.data.lock().unwrap();
    let r = data.resources.entry(b["resource_id"].as_str().unwrap().to_string()).or_default();
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
    let bytes = base64::engine::general_purpose::STANDARD.decode(p["bytes"].as_str().unwrap_or("")).unwrap();
    match p["mutation_type"].as_str().unwrap() {
        "PUT" => drop(r.files.insert(path, bytes)),
        "APPEND" => r.files.entry(path).or_default().extend(bytes),
        _ => drop(r.files.remove(&path)),
    }
    let high_water = r.high_water;
    f.save(&data);
    (StatusCode::OK, Json(json!({"accepted": true, "high_water": high_water})))
}

async fn read(State(f): S, Query(q): Query<HashMap<String, String>>) -> (StatusCode, Json<Value>) {
    let data = f.data.lock().unwrap();
    let Some(r) = data.resources.get(&q["resource_id"]) else { return (StatusCode::NOT_FOUND, Json(json!({}))) };
    match r.files.get(&q["file_path"]) {
        None => (StatusCode::NOT_FOUND, Json(json!({}))),
        Some(b) => {
            let bytes = base64::engine::general_purpose::STANDARD.encode(b);
            (StatusCode::OK, Json(json!({"bytes": bytes, "fence": {"high_water": r.high_water}})))
        }
    }
}

async fn fence(State(f): S, Query(q): Query<HashMap<String, String>>) -> Json<Value> {
    let data = f.data.lock().unwrap();
    let hw = data.resources.get(&q["resource_id"]).map_or(0, |r| r.high_water);
    Json(json!({"resource_id": q["resource_id"], "high_water": hw}))
}

/// The fake's routes; state is loaded from and saved to `dir` if given.
pub fn router(fencing: bool, dir: Option<PathBuf>) -> Router {
    let data = dir
        .as_ref()
        .and_then(|d| std::fs::read(d.join("state.json")).ok())
        .map(|b| serde_json::from_slice(&b).unwrap())
        .unwrap_or_default();
    let fake = Arc::new(Fake { fencing, dir, data: Mutex::new(data) });
    Router::new()
        .route("/v1/locks/acquire", post(acquire))
        .route("/v1/locks/release", post(release))
        .route("/v1/locks/status", get(status))
        .route("/v1/storage/write", post(write))
        .route("/v1/storage/read", get(read))
        .route("/v1/storage/fence", get(fence))
        .with_state(fake)
}

/// Serves the fake on a free loopback port in this process (used by `chaos_pipeline` only).
#[allow(dead_code)]
pub async fn serve(fencing: bool) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router(fencing, None)).await.unwrap() });
    addr
}
