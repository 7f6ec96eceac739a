//! Engine conformance for the redb backend (Wasm and native guards), plus reopen durability.

mod storage_support;

use fencing_host::storage::{Engine, Mutation, RedbEngine, WriteOutcome};
use fencing_runtime::{Guard, NativeGuard, Policy, WasmGuard};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_wasm_guard() {
    let dir = tempfile::tempdir().unwrap();
    let guard: Arc<dyn Guard> = Arc::new(WasmGuard::embedded(None).unwrap());
    let engine: Arc<dyn Engine> = Arc::new(RedbEngine::open(dir.path(), guard, Policy::NonDecreasing).unwrap());
    storage_support::run_all(engine, "wasm-").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_native_guard() {
    let dir = tempfile::tempdir().unwrap();
    let engine: Arc<dyn Engine> =
        Arc::new(RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap());
    storage_support::run_all(engine, "native-").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_policy_rejects_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::StrictlyIncreasing).unwrap();
    let w = |t| storage_support::req("r", t, "/f", Mutation::Put, b"x");
    assert!(matches!(engine.write(w(4)).await.unwrap(), WriteOutcome::Admitted { .. }));
    let out = engine.write(w(4)).await.unwrap();
    assert!(
        matches!(&out, WriteOutcome::Rejected { rejection, .. } if rejection.reason() == "token_reused"),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_keeps_data_and_fence() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
        engine.write(storage_support::req("r", 9, "/f", Mutation::Put, b"kept")).await.unwrap();
    }
    let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
    let read = engine.read("r", "/f").await.unwrap();
    assert_eq!(read.bytes.as_deref(), Some(&b"kept"[..]));
    assert_eq!(read.fence.unwrap().high_water, 9);
    let stale = engine.write(storage_support::req("r", 8, "/f", Mutation::Put, b"old")).await.unwrap();
    assert!(matches!(stale, WriteOutcome::Rejected { .. }));
}
