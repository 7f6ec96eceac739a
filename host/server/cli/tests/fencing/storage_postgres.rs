//! Engine conformance for the PostgreSQL backend against a real PostgreSQL 15
//! started on 127.0.0.1 for the test, and `fencing serve --store postgres` end to end.

use fencing_api::client::storage::{StorageClient, Write};
use fencing_runtime::{Guard, Policy, WasmGuard};
use fencing_server::storage::{Engine, Mutation, PgGuard, PostgresEngine, WriteOutcome};
use fencing_testkit::postgres::Postgres;
use fencing_testkit::server::ServeProcess;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_conformance_and_serve() {
    let pg = Postgres::start().await;
    let guard: Arc<dyn Guard> = Arc::new(WasmGuard::embedded(None).unwrap());
    let engine: Arc<dyn Engine> =
        Arc::new(PostgresEngine::connect(&pg.url, PgGuard::Host(guard), Policy::NonDecreasing).await.unwrap());
    fencing_testkit::storage::run_all(engine.clone(), "pg-").await;

    // Tokens above i64::MAX round-trip (stored bit-for-bit, compared by the guard).
    let big = u64::MAX - 1;
    let out = engine.write(fencing_testkit::storage::req("pg-big", big, "/f", Mutation::Put, b"x")).await.unwrap();
    assert!(matches!(out, fencing_server::storage::WriteOutcome::Admitted { high_water, .. } if high_water == big));
    assert_eq!(engine.fence("pg-big").await.unwrap().unwrap().high_water, big);
    let stale =
        engine.write(fencing_testkit::storage::req("pg-big", big - 1, "/f", Mutation::Put, b"y")).await.unwrap();
    assert!(matches!(stale, fencing_server::storage::WriteOutcome::Rejected { .. }), "{stale:?}");

    // The server on the same database sees the engine's data and fences.
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start(dir.path(), &["--store", "postgres", "--postgres-url", &pg.url]);
    server.ready().await;
    let c = StorageClient::new(&server.base);
    assert_eq!(c.fence("pg-gc").await.unwrap().high_water(), Some(34));
    let w = |t| Write {
        resource_id: "pg-gc",
        token: t,
        file_path: "/uploads/orders-2026-05.csv",
        mutation: Mutation::Put,
        bytes: b"late",
        lock_id: None,
        sequence: None,
        proof: None,
    };
    let a = c.write(&w(33)).await.unwrap();
    assert_eq!((a.status, a.body["reason"].as_str()), (409, Some("stale_token")));
    assert_eq!(c.write(&w(35)).await.unwrap().status, 200);
    assert_eq!(engine.read("pg-gc", "/uploads/orders-2026-05.csv").await.unwrap().bytes.as_deref(), Some(&b"late"[..]));
}

/// A database crash and restart costs the requests in flight, not the engine:
/// its pooled connections are reopened, and every committed write and fence survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_survives_a_database_restart() {
    let mut pg = Postgres::start().await;
    let guard: Arc<dyn Guard> = Arc::new(WasmGuard::embedded(None).unwrap());
    let engine = PostgresEngine::connect(&pg.url, PgGuard::Host(guard), Policy::NonDecreasing).await.unwrap();
    let put =
        |token, bytes: &'static [u8]| fencing_testkit::storage::req("pg-restart", token, "/f", Mutation::Put, bytes);
    assert!(matches!(engine.write(put(7, b"before")).await.unwrap(), WriteOutcome::Admitted { .. }));
    pg.crash_and_restart().await;
    // Every pooled connection is tried at least once: each is reopened, none is lost.
    for _ in 0..fencing_server::storage::POSTGRES_POOL_SIZE {
        assert_eq!(engine.read("pg-restart", "/f").await.unwrap().bytes.as_deref(), Some(&b"before"[..]));
    }
    assert!(matches!(engine.write(put(6, b"stale")).await.unwrap(), WriteOutcome::Rejected { .. }));
    assert!(matches!(engine.write(put(8, b"after")).await.unwrap(), WriteOutcome::Admitted { .. }));
    assert_eq!(engine.fence("pg-restart").await.unwrap().unwrap().high_water, 8);
}
