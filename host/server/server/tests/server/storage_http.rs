//! The storage HTTP API in-process: the GC-pause story, racing writers,
//! malformed input, reads, fences and metrics.

use fencing_api::client::storage::{StorageClient, Write};
use fencing_runtime::{Guard, Policy, WasmGuard};
use fencing_server::storage::{FlapConfig, Mutation, RedbEngine, StorageMetrics, StorageService};
use fencing_server::telemetry::Metrics;
use serde_json::json;
use std::sync::Arc;

struct Server {
    base: String,
    _dir: tempfile::TempDir,
}

async fn start(flap: FlapConfig) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let guard: Arc<dyn Guard> = Arc::new(WasmGuard::embedded(None).unwrap());
    let engine = Arc::new(RedbEngine::open(dir.path(), guard, Policy::NonDecreasing).unwrap());
    let metrics = Metrics::new();
    let service = StorageService::new(engine, Arc::new(StorageMetrics::new(&metrics, flap)));
    let m = metrics.clone();
    let app = fencing_server::http::storage::router(service)
        .route("/metrics", axum::routing::get(move || std::future::ready(m.handler())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(fencing_server::http::serve(listener, app));
    Server { base, _dir: dir }
}

fn w<'a>(resource: &'a str, token: u64, path: &'a str, mutation: Mutation, bytes: &'a [u8]) -> Write<'a> {
    Write { resource_id: resource, token, file_path: path, mutation, bytes, lock_id: None, sequence: None, proof: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gc_pause_story_over_http() {
    let s = start(FlapConfig::default()).await;
    let c = StorageClient::new(&s.base);
    let r = "storage:customer-orders-bucket";
    let path = "/uploads/orders-2026-05.csv";
    // Writer A acquires 33 and writes once, then pauses.
    assert_eq!(c.write(&w(r, 33, path, Mutation::Put, b"A")).await.unwrap().status, 200);
    // Writer B acquires 34 after A's lease expired, and writes.
    let b = c.write(&w(r, 34, path, Mutation::Put, b"ORDER_ID,AMOUNT\nB")).await.unwrap();
    assert_eq!(b.status, 200, "{:?}", b.body);
    assert_eq!(b.body["accepted"], true);
    assert_eq!(b.body["high_water"], 34);
    // A resumes and writes with its stale token.
    let a = c.write(&w(r, 33, path, Mutation::Put, b"A-late")).await.unwrap();
    assert_eq!(a.status, 409);
    assert_eq!(a.body["accepted"], false);
    assert_eq!(a.body["reason"], "stale_token");
    assert_eq!(a.body["presented"], 33);
    assert_eq!(a.body["high_water"], 34);
    let read = c.read(r, path).await.unwrap();
    assert_eq!(read.status, 200);
    assert_eq!(read.bytes().unwrap(), b"ORDER_ID,AMOUNT\nB");
    assert_eq!(read.body["fence"]["high_water"], 34);
    let fence = c.fence(r).await.unwrap();
    assert_eq!(fence.body["high_water"], 34);
    assert_eq!(fence.body["fence"]["lock_id"], r);

    let metrics = reqwest::get(format!("{}/metrics", s.base)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("fencing_storage_writes_rejected_total{reason=\"stale_token\"} 1"), "{metrics}");
    assert!(metrics.contains("fencing_storage_writes_admitted_total 2"), "{metrics}");
    assert!(metrics.contains("fencing_storage_term_changes_total 2"), "{metrics}");
    assert!(
        metrics.contains("fencing_storage_high_water{resource=\"storage:customer-orders-bucket\"} 34"),
        "{metrics}"
    );
    assert!(metrics.contains("fencing_storage_write_latency_seconds_count 3"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn write_api_payload_is_accepted_verbatim() {
    let s = start(FlapConfig::default()).await;
    let c = StorageClient::new(&s.base);
    let body = json!({
        "resource_id": "storage:customer-orders-bucket",
        "fencing_token": 34,
        "write_payload": {"file_path": "/uploads/orders-2026-05.csv", "mutation_type": "APPEND", "bytes": "T1JERVJfSUQsQU1PVU5U\n"}
    });
    let a = c.write_raw(&body).await.unwrap();
    assert_eq!(a.status, 200, "{:?}", a.body);
    let read = c.read("storage:customer-orders-bucket", "/uploads/orders-2026-05.csv").await.unwrap();
    assert_eq!(read.bytes().unwrap(), b"ORDER_ID,AMOUNT");
}

/// Writers with tokens N and N+1 race on one resource, 150 rounds. N+1 is
/// always admitted; N only if it landed first; the admitted log never goes backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writers_n_and_n_plus_1() {
    let s = start(FlapConfig::default()).await;
    let c = StorageClient::new(&s.base);
    let r = "race";
    let mut admitted = Vec::new();
    let mut late_refusals = 0;
    for round in 0..150u64 {
        let n = 10 * round + 1;
        let (ca, cb) = (c.clone(), c.clone());
        let a =
            tokio::spawn(async move { ca.write(&w(r, n, "/log", Mutation::Append, &n.to_be_bytes())).await.unwrap() });
        let b = tokio::spawn(async move {
            cb.write(&w(r, n + 1, "/log", Mutation::Append, &(n + 1).to_be_bytes())).await.unwrap()
        });
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!(b.status, 200, "N+1 must always be admitted: {:?}", b.body);
        match a.status {
            200 => admitted.push(n),
            409 => {
                assert_eq!(a.body["reason"], "stale_token");
                assert_eq!(a.body["high_water"].as_u64().unwrap(), n + 1);
                late_refusals += 1;
            }
            other => panic!("unexpected status {other}: {:?}", a.body),
        }
        admitted.push(n + 1);
    }
    let log = c.read(r, "/log").await.unwrap().bytes().unwrap();
    let tokens: Vec<u64> = log.chunks_exact(8).map(|b| u64::from_be_bytes(b.try_into().unwrap())).collect();
    assert!(tokens.windows(2).all(|p| p[0] < p[1]), "an admitted token fell below an earlier one: {tokens:?}");
    admitted.sort_unstable();
    assert_eq!(tokens, admitted);
    eprintln!("N refused after N+1 in {late_refusals} of 150 rounds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_name_the_field_and_change_nothing() {
    let s = start(FlapConfig::default()).await;
    let c = StorageClient::new(&s.base);
    let ok = |t: u64, path: &str, bytes: &str| {
        json!({"resource_id": "m", "fencing_token": t,
               "write_payload": {"file_path": path, "mutation_type": "PUT", "bytes": bytes}})
    };
    assert_eq!(c.write_raw(&ok(5, "/f", "aGk=")).await.unwrap().status, 200);
    let cases = [
        (json!({"resource_id": "m", "fencing_token": 6}), "write_payload"),
        (json!({"resource_id": "m", "fencing_token": -1, "write_payload": {}}), "fencing_token"),
        (json!({"resource_id": "m", "fencing_token": "7", "write_payload": {}}), "fencing_token"),
        (ok(7, "/f", "not base64!"), "write_payload.bytes"),
        (ok(7, "../../etc/passwd", "aGk="), "write_payload.file_path"),
        (ok(7, "/a\u{0}b", "aGk="), "write_payload.file_path"),
        (
            json!({"resource_id": "", "fencing_token": 7,
                "write_payload": {"file_path": "/f", "mutation_type": "PUT", "bytes": ""}}),
            "resource_id",
        ),
        (
            json!({"resource_id": "m", "fencing_token": 7,
                "write_payload": {"file_path": "/f", "mutation_type": "TRUNCATE", "bytes": ""}}),
            "write_payload.mutation_type",
        ),
    ];
    for (body, field) in cases {
        let a = c.write_raw(&body).await.unwrap();
        assert_eq!(a.status, 400, "{body}: {:?}", a.body);
        assert_eq!(a.body["error"]["field"], field, "{body}: {:?}", a.body);
    }
    let huge = "A".repeat(fencing_server::http::body::MAX_BODY_BYTES + 16);
    assert_eq!(c.write_raw(&ok(8, "/f", &huge)).await.unwrap().status, 413);
    let fence = c.fence("m").await.unwrap();
    assert_eq!(fence.body["high_water"], 5, "refused requests must not move the fence");
    assert_eq!(c.read("m", "/f").await.unwrap().bytes().unwrap(), b"hi");
    assert_eq!(c.read("m", "/missing").await.unwrap().status, 404);
    let a = c.read("m", "../x").await.unwrap();
    assert_eq!((a.status, a.body["error"]["field"].as_str()), (400, Some("file_path")));
    let resp = reqwest::get(format!("{}/v1/storage/fence", s.base)).await.unwrap();
    assert_eq!(resp.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flapping_is_exposed() {
    let flap = FlapConfig { max_term_changes: 3, window: std::time::Duration::from_secs(60), max_tracked: 10 };
    let s = start(flap).await;
    let c = StorageClient::new(&s.base);
    for t in 1..=3 {
        let a = c.write(&w("flappy", t, "/f", Mutation::Put, b"x")).await.unwrap();
        assert_eq!(a.body["flapping"], false);
    }
    let a = c.write(&w("flappy", 4, "/f", Mutation::Put, b"x")).await.unwrap();
    assert_eq!(a.body["flapping"], true);
    assert_eq!(c.fence("flappy").await.unwrap().body["flapping"], true);
    let metrics = reqwest::get(format!("{}/metrics", s.base)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("fencing_storage_flapping{resource=\"flappy\"} 1"), "{metrics}");
}
