//! Engine conformance for the redb backend (Wasm and native guards), plus reopen durability.

use fencing_runtime::{Guard, NativeGuard, Policy, WasmGuard};
use fencing_store::{Engine, Mutation, RedbEngine, WriteOutcome};
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_wasm_guard() {
    let dir = tempfile::tempdir().unwrap();
    let guard: Arc<dyn Guard> = Arc::new(WasmGuard::embedded(None).unwrap());
    let engine: Arc<dyn Engine> = Arc::new(RedbEngine::open(dir.path(), guard, Policy::NonDecreasing).unwrap());
    fencing_testkit::storage::run_all(engine, "wasm-").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_native_guard() {
    let dir = tempfile::tempdir().unwrap();
    let engine: Arc<dyn Engine> =
        Arc::new(RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap());
    fencing_testkit::storage::run_all(engine, "native-").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_policy_rejects_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::StrictlyIncreasing).unwrap();
    let w = |t| fencing_testkit::storage::req("r", t, "/f", Mutation::Put, b"x");
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
        engine.write(fencing_testkit::storage::req("r", 9, "/f", Mutation::Put, b"kept")).await.unwrap();
    }
    let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
    let read = engine.read("r", "/f").await.unwrap();
    assert_eq!(read.bytes.as_deref(), Some(&b"kept"[..]));
    assert_eq!(read.fence.unwrap().high_water, 9);
    let stale = engine.write(fencing_testkit::storage::req("r", 8, "/f", Mutation::Put, b"old")).await.unwrap();
    assert!(matches!(stale, WriteOutcome::Rejected { .. }));
}

/// Captures what `tracing` writes, for the reset's log line.
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_reset_is_logged_with_its_reason_and_both_fences() {
    use fencing_store::{FlapConfig, StorageMetrics, StorageService};
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap());
    let metrics = Arc::new(StorageMetrics::new(&fencing_base::telemetry::Metrics::new(), FlapConfig::default()));
    let service = StorageService::new(engine, metrics);
    service.write(fencing_testkit::storage::req("logged", 42, "/f", Mutation::Put, b"x")).await.unwrap();
    let before = service.reset_fence("logged", None, "ticket 123: runaway client").await.unwrap();
    assert_eq!(before.map(|f| f.high_water), Some(42));
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let line = log.lines().find(|l| l.contains("fence reset by an operator")).unwrap_or_else(|| panic!("{log}"));
    for part in
        ["WARN", "resource=\"logged\"", "ticket 123: runaway client", "old_high_water=42", "old_lock=\"logged\""]
    {
        assert!(line.contains(part), "{part} missing from {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_appends_survive_reopens_between_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for round in 0..5u64 {
        let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
        for i in 0..20u64 {
            let token = round * 100 + i + 1;
            let w = fencing_testkit::storage::req("wal", token, "/log", Mutation::Append, &token.to_be_bytes());
            assert!(matches!(engine.write(w).await.unwrap(), WriteOutcome::Admitted { .. }));
            expected.extend_from_slice(&token.to_be_bytes());
        }
        // Everything acknowledged is read back, once per reopen: nothing lost, nothing applied twice.
        let read = engine.read("wal", "/log").await.unwrap();
        assert_eq!(read.bytes.as_deref(), Some(expected.as_slice()), "round {round}");
        assert_eq!(read.fence.unwrap().high_water, round * 100 + 20);
        drop(engine);
    }
    assert!(dir.path().join("fencing.wal").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quota_refuses_growth_past_it_and_keeps_its_count_across_reopens() {
    use fencing_store::{StorageError, StoreOptions};
    // The measure: an object row is its resource id, path and bytes plus 32
    // (`q`, `/a`, n bytes: n + 35); a fence row its resource id and lock plus
    // 17 and 32 (`q` under lock `q`: 51).
    let dir = tempfile::tempdir().unwrap();
    let options = StoreOptions { max_bytes: Some(1100), ..StoreOptions::default() };
    let open =
        || RedbEngine::open_with(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing, options.clone()).unwrap();
    let w = |path: &str, mutation, bytes: &[u8]| fencing_testkit::storage::req("q", 1, path, mutation, bytes);
    {
        let engine = open();
        assert!(matches!(engine.write(w("/a", Mutation::Put, &[1; 600])).await, Ok(WriteOutcome::Admitted { .. })));
        assert_eq!(engine.stored_bytes(), Some(635 + 51), "the object, its name and path, and the fence");
        let over = engine.write(w("/a", Mutation::Append, &[1; 500])).await;
        assert_eq!(over, Err(StorageError::QuotaExceeded { used: 686, quota: 1100 }));
        assert_eq!(engine.read("q", "/a").await.unwrap().bytes.map(|b| b.len()), Some(600), "nothing applied");
        // Replacing counts only the growth; another object counts in full, path included.
        assert!(matches!(engine.write(w("/a", Mutation::Put, &[2; 900])).await, Ok(WriteOutcome::Admitted { .. })));
        assert!(matches!(
            engine.write(w("/b", Mutation::Put, &[3; 200])).await,
            Err(StorageError::QuotaExceeded { .. })
        ));
        assert!(matches!(engine.write(w("/b", Mutation::Put, &[3; 79])).await, Ok(WriteOutcome::Admitted { .. })));
        assert_eq!(engine.stored_bytes(), Some(1100));
    }
    // The count survives a reopen (from the log or the checkpoint), and deletes always pass.
    let engine = open();
    assert_eq!(engine.stored_bytes(), Some(1100));
    assert!(matches!(engine.write(w("/a", Mutation::Delete, b"")).await, Ok(WriteOutcome::Admitted { .. })));
    assert_eq!(engine.stored_bytes(), Some(51 + 114));
    assert!(matches!(engine.write(w("/c", Mutation::Put, &[4; 900])).await, Ok(WriteOutcome::Admitted { .. })));
}

/// The native guard, except that a write presenting [`PANICS_AT`] unwinds
/// the committer in the middle of its batch.
struct PanicsAt;

const PANICS_AT: u64 = 666;

impl Guard for PanicsAt {
    fn kind(&self) -> fencing_runtime::GuardKind {
        NativeGuard.kind()
    }
    fn admit(
        &self,
        current: Option<&fencing_runtime::Fence>,
        presented: &fencing_runtime::Sequencer,
        policy: Policy,
    ) -> Result<fencing_runtime::Decision, fencing_runtime::GuardFailure> {
        assert_ne!(presented.token, PANICS_AT, "the committer unwinds mid-batch");
        NativeGuard.admit(current, presented, policy)
    }
    fn admit_batch(
        &self,
        current: Option<&fencing_runtime::Fence>,
        lock: &str,
        writes: &[fencing_runtime::BatchWrite],
        policy: Policy,
    ) -> Result<fencing_runtime::BatchOutcome, fencing_runtime::GuardFailure> {
        NativeGuard.admit_batch(current, lock, writes, policy)
    }
    fn admit_stream(
        &self,
        high_water: u64,
        tokens: &[u64],
        policy: Policy,
    ) -> Result<fencing_runtime::StreamOutcome, fencing_runtime::GuardFailure> {
        NativeGuard.admit_stream(high_water, tokens, policy)
    }
    fn admit_signed(
        &self,
        verifier: &fencing_runtime::Verifier,
        current: Option<&fencing_runtime::Fence>,
        presented: &fencing_runtime::Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<fencing_runtime::SignedDecision, fencing_runtime::GuardFailure> {
        NativeGuard.admit_signed(verifier, current, presented, proof, policy)
    }
}

/// Answered writes wait in the committer's open transaction until a reader
/// needs them; a commit that unwinds there loses that transaction, and the
/// store must bring them back (from its log) before anyone reads or writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answered_writes_survive_a_commit_that_unwinds_in_their_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(RedbEngine::open(dir.path(), Arc::new(PanicsAt), Policy::NonDecreasing).unwrap());
    let put = |resource: &str, token| {
        fencing_testkit::storage::req(resource, token, "/f", Mutation::Put, resource.as_bytes())
    };
    for (i, resource) in ["a", "b", "c"].into_iter().enumerate() {
        let out = engine.write(put(resource, 10 + i as u64)).await.unwrap();
        assert!(matches!(out, WriteOutcome::Admitted { .. }), "{out:?}");
    }
    let unwinding = engine.clone();
    let crashed = tokio::spawn(async move { unwinding.write(put("d", PANICS_AT)).await }).await;
    assert!(crashed.is_err() || crashed.unwrap().is_err(), "the unwound write is not answered as admitted");

    // The fence first (its own read path), then the objects; 503 while the store reopens.
    let fence = retry(|| engine.fence("a")).await.expect("the answered write's fence is kept");
    assert_eq!(fence.high_water, 10);
    for (i, resource) in ["a", "b", "c"].into_iter().enumerate() {
        let read = retry(|| engine.read(resource, "/f")).await;
        assert_eq!(read.bytes.as_deref(), Some(resource.as_bytes()), "{resource} was answered as admitted");
        assert_eq!(read.fence.unwrap().high_water, 10 + i as u64);
    }
    assert!(engine.read("d", "/f").await.unwrap().bytes.is_none(), "the unwound write is applied nowhere");
    let stale = engine.write(put("b", 5)).await.unwrap();
    assert!(matches!(stale, WriteOutcome::Rejected { .. }), "the fences are back: {stale:?}");
    let next = engine.write(put("d", 1)).await.unwrap();
    assert!(matches!(next, WriteOutcome::Admitted { .. }), "the store takes writes again: {next:?}");
}

/// `op` until it is not refused as unavailable (the store reopening), for at most 10 s.
async fn retry<'a, T, F>(op: impl Fn() -> F) -> T
where
    F: std::future::Future<Output = Result<T, fencing_store::StorageError>> + 'a,
{
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match op().await {
            Err(fencing_store::StorageError::Unavailable(_)) if std::time::Instant::now() < give_up => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => return other.unwrap(),
        }
    }
}
