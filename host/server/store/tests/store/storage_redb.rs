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

/// Retired fences leave floors; those below a token fold into one store
/// floor, the highest of them, which a write to a resource with no fence
/// (under a lock without a floor of its own) must reach; floors at or above
/// it stay as they were, and the quota's measure follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floors_below_a_token_fold_into_the_store_floor() {
    use fencing_store::{drop_floors_below, retire_empty_fences};
    let dir = tempfile::tempdir().unwrap();
    let open = || RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
    let w = |resource: &str, token, mutation| fencing_testkit::storage::req(resource, token, "/o", mutation, b"x");
    {
        let engine = open();
        // Each resource is its own lock (the default lock_id); "kept" keeps an object.
        for (resource, token) in [("old-a", 5), ("old-b", 9), ("recent", 200)] {
            assert!(matches!(
                engine.write(w(resource, token, Mutation::Put)).await.unwrap(),
                WriteOutcome::Admitted { .. }
            ));
            assert!(matches!(
                engine.write(w(resource, token, Mutation::Delete)).await.unwrap(),
                WriteOutcome::Admitted { .. }
            ));
        }
        engine.write(w("kept", 3, Mutation::Put)).await.unwrap();
    }
    let retired = retire_empty_fences(dir.path()).unwrap();
    assert_eq!((retired.fences, retired.floors), (3, 3));
    let dropped = drop_floors_below(dir.path(), 100).unwrap();
    assert_eq!((dropped.floors_before, dropped.floors_dropped, dropped.floors_after), (3, 2, 2), "{dropped:?}");
    assert_eq!(dropped.store_floor, Some((9, None)));
    assert!(dropped.stored_bytes_after < dropped.stored_bytes_before);
    assert_eq!(
        dropped.stored_bytes_before - dropped.stored_bytes_after,
        dropped.floor_bytes_before - dropped.floor_bytes_after
    );
    let engine = open();
    assert_eq!(engine.stored_bytes(), Some(dropped.stored_bytes_after), "the measure is the store's");
    let refused = |out: WriteOutcome| matches!(out, WriteOutcome::Rejected { rejection, .. } if rejection.reason() == "stale_token");
    // What the dropped floors kept out stays out, on their resources and on new ones.
    assert!(refused(engine.write(w("old-a", 4, Mutation::Put)).await.unwrap()));
    assert!(refused(engine.write(w("old-a", 8, Mutation::Put)).await.unwrap()), "below the store floor");
    assert!(refused(engine.write(w("brand-new", 2, Mutation::Put)).await.unwrap()));
    // The kept floor is its lock's own, and tokens above every floor get in.
    assert!(refused(engine.write(w("recent", 150, Mutation::Put)).await.unwrap()), "its own floor, 200");
    assert!(matches!(engine.write(w("recent", 200, Mutation::Put)).await.unwrap(), WriteOutcome::Admitted { .. }));
    assert!(matches!(engine.write(w("old-b", 101, Mutation::Put)).await.unwrap(), WriteOutcome::Admitted { .. }));
    // A resource with a fence of its own is untouched.
    assert!(matches!(engine.write(w("kept", 3, Mutation::Put)).await.unwrap(), WriteOutcome::Admitted { .. }));
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
