//! `fencing bench writes`: durable fenced writes per second and latency.
//!
//! For each writer count, W concurrent writers (tokio tasks) each write to
//! their own resource with increasing tokens (PUT of `--payload` bytes),
//! one outstanding write per writer, for `--seconds`. The engine runs
//! in-process (redb, group commit, `Durability::Immediate`) with the guard
//! the flags choose; then the same workload runs as a conditional `UPDATE`
//! on SQLite. Latency is measured per write from submission to durable ack.
//! The guard is wrapped in a timer to report its share of write latency:
//! total guard time / total write latency across all writes of the run.
//! With `--signed ALGORITHM` every write carries a proof for its lock and
//! token (made before the write's clock starts) that the store verifies
//! before the fence: with one write in flight every write is a new token, so
//! every write pays a full verification; with more, a writer's writes share
//! a token and all but the first are checked by comparing bytes.
//! With `--readers R`, R more tasks read the writers' objects in a loop
//! beside them (one outstanding read each), and the run reports their
//! reads per second and latency too: the store commits each batch before
//! answering once reads have begun, so this is the mixed workload's rate.

pub use super::write_results::{RunResult, table};
use anyhow::Context;
use fencing_runtime::proof::{Algorithm, Signer};
use fencing_runtime::{BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, GuardKind, NativeGuard, Policy};
use fencing_runtime::{Sequencer, SignedDecision, StreamOutcome, Verifier, WasmGuard};
use fencing_server::storage::{Engine, Mutation, RedbEngine, StoreOptions, WriteOutcome, WriteRequest};
use hdrhistogram::Histogram;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What one `bench writes` measures (the CLI's flags, checked there).
#[derive(Debug, Clone)]
pub struct WritesConfig {
    /// Writer counts to run, each a separate run; all at least 1.
    pub writers: Vec<usize>,
    /// Length of each run.
    pub duration: Duration,
    /// Bytes per write.
    pub payload: usize,
    /// Who decides writes.
    pub guard: GuardKind,
    /// Directory for the stores (on the disk to measure); a fresh temporary directory when `None`.
    pub data_dir: Option<PathBuf>,
    /// Writes each writer keeps in flight (pipelined under one token), at least 1.
    pub inflight: usize,
    /// Whether to run the SQLite comparison after each run.
    pub sqlite: bool,
    /// Tasks reading the writers' objects beside them (fencing store only).
    pub readers: usize,
    /// Signed writes: each carries the proof for its token, which the store
    /// checks with this algorithm's key before the fence (`None`: unsigned).
    pub signed: Option<Algorithm>,
}

/// Times every call into the wrapped guard.
struct TimedGuard {
    inner: Arc<dyn Guard>,
    nanos: AtomicU64,
    calls: AtomicU64,
}

impl TimedGuard {
    fn timed<R>(&self, f: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let r = f();
        self.nanos.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        r
    }
}

impl Guard for TimedGuard {
    fn kind(&self) -> GuardKind {
        self.inner.kind()
    }
    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure> {
        self.timed(|| self.inner.admit(current, presented, policy))
    }
    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure> {
        self.timed(|| self.inner.admit_batch(current, lock, writes, policy))
    }
    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure> {
        self.timed(|| self.inner.admit_stream(high_water, tokens, policy))
    }
    fn admit_signed(
        &self,
        verifier: &Verifier,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure> {
        self.timed(|| self.inner.admit_signed(verifier, current, presented, proof, policy))
    }
}

/// One run's shape.
#[derive(Clone, Copy)]
struct Run {
    kind: GuardKind,
    writers: usize,
    inflight: usize,
    readers: usize,
    duration: Duration,
    payload: usize,
    signed: Option<Algorithm>,
}

/// Reads `bench-{r mod writers}` until `stop`; a read before the object's first write finds nothing and counts too.
fn spawn_reader(
    engine: Arc<RedbEngine>,
    stop: Arc<AtomicBool>,
    resource: String,
) -> tokio::task::JoinHandle<anyhow::Result<Histogram<u64>>> {
    tokio::spawn(async move {
        let mut hist = Histogram::<u64>::new(3)?;
        while !stop.load(Ordering::Relaxed) {
            let t0 = Instant::now();
            engine.read(&resource, "/obj").await.with_context(|| format!("read {resource}"))?;
            hist.record(t0.elapsed().as_micros() as u64)?;
        }
        anyhow::Ok(hist)
    })
}

async fn run_engine(dir: &std::path::Path, run: Run) -> anyhow::Result<RunResult> {
    let Run { kind, writers, inflight, readers, duration, payload, signed } = run;
    let signer = signed.map(|a| Arc::new(Signer::new(1, a, &rand::random::<[u8; 32]>()).expect("a 32-byte secret")));
    let verifier = signer.as_ref().map(|s| Arc::new(Verifier::new(vec![s.verifier_key()]).expect("one key")));
    let inner: Arc<dyn Guard> = match kind {
        GuardKind::Wasm => Arc::new(WasmGuard::embedded(None).context("load embedded guard")?),
        GuardKind::Native => Arc::new(NativeGuard),
    };
    let guard = Arc::new(TimedGuard { inner, nanos: AtomicU64::new(0), calls: AtomicU64::new(0) });
    let store_dir = dir.join(format!("redb-{writers}"));
    let _ = std::fs::remove_dir_all(&store_dir);
    let options = StoreOptions { verifier, ..StoreOptions::default() };
    let engine = Arc::new(RedbEngine::open_with(&store_dir, guard.clone(), Policy::NonDecreasing, options)?);
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    // With several writes in flight per writer, they share the writer's token
    // (admitted under the non-decreasing policy); otherwise each write takes a new token.
    let tasks: Vec<_> = (0..writers * inflight)
        .map(|i| {
            let w = i % writers;
            let (engine, stop, signer) = (engine.clone(), stop.clone(), signer.clone());
            tokio::spawn(async move {
                let mut hist = Histogram::<u64>::new(3)?;
                let data = vec![0x5a_u8; payload];
                let mut token = 0;
                while !stop.load(Ordering::Relaxed) {
                    token = if inflight == 1 { token + 1 } else { 1 };
                    let proof = signer.as_ref().map(|s| s.prove(&format!("bench-{w}"), token));
                    let req = WriteRequest {
                        resource_id: format!("bench-{w}"),
                        lock_id: format!("bench-{w}"),
                        token,
                        sequence: None,
                        file_path: "/obj".into(),
                        mutation: Mutation::Put,
                        bytes: data.clone(),
                        proof,
                    }
                    .validate()?;
                    let t0 = Instant::now();
                    let out = engine.write(req).await?;
                    anyhow::ensure!(matches!(out, WriteOutcome::Admitted { .. }), "increasing token refused: {out:?}");
                    hist.record(t0.elapsed().as_micros() as u64)?;
                }
                anyhow::Ok(hist)
            })
        })
        .collect();
    let reader_tasks: Vec<_> =
        (0..readers).map(|r| spawn_reader(engine.clone(), stop.clone(), format!("bench-{}", r % writers))).collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut hist = Histogram::<u64>::new(3)?;
    for t in tasks {
        hist.add(t.await??)?;
    }
    let mut read_hist = Histogram::<u64>::new(3)?;
    for t in reader_tasks {
        read_hist.add(t.await??)?;
    }
    let elapsed = start.elapsed();
    let total_latency_us: f64 =
        hist.iter_recorded().map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64).sum();
    let guard_us = guard.nanos.load(Ordering::Relaxed) as f64 / 1000.0;
    let store = match (kind, signed) {
        (GuardKind::Wasm, None) => "fencing redb (wasm guard)",
        (GuardKind::Native, None) => "fencing redb (native guard)",
        (GuardKind::Wasm, Some(Algorithm::Ed25519)) => "fencing redb (wasm guard, signed ed25519)",
        (GuardKind::Native, Some(Algorithm::Ed25519)) => "fencing redb (native guard, signed ed25519)",
        (GuardKind::Wasm, Some(Algorithm::HmacSha256)) => "fencing redb (wasm guard, signed hmac-sha256)",
        (GuardKind::Native, Some(Algorithm::HmacSha256)) => "fencing redb (native guard, signed hmac-sha256)",
    };
    drop(engine);
    let _ = std::fs::remove_dir_all(&store_dir);
    let reads = (readers > 0).then_some((readers, read_hist));
    Ok(RunResult { store, writers, inflight, elapsed, hist, guard_share: Some(guard_us / total_latency_us), reads })
}

/// Runs every configured writer count (and its SQLite comparison), reporting
/// progress on stderr; the results in run order, for [`table`].
pub fn run(cfg: &WritesConfig) -> anyhow::Result<Vec<RunResult>> {
    let (dir, temp) = match &cfg.data_dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("fencing-bench-{:x}", rand::random::<u64>())), true),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let rt = tokio::runtime::Runtime::new().context("start tokio runtime")?;
    let mut results = Vec::new();
    for &w in &cfg.writers {
        let run = Run {
            kind: cfg.guard,
            writers: w,
            inflight: cfg.inflight,
            readers: cfg.readers,
            duration: cfg.duration,
            payload: cfg.payload,
            signed: cfg.signed,
        };
        let r = rt.block_on(run_engine(&dir, run))?;
        eprintln!("{} x{w} (x{} in flight): {:.0} writes/s", r.store, cfg.inflight, r.per_second());
        if let Some(reads) = r.reads_per_second() {
            eprintln!("{} x{w}, {} readers beside: {reads:.0} reads/s", r.store, cfg.readers);
        }
        results.push(r);
        if cfg.sqlite {
            let r = super::sqlite::run(&dir, w, cfg.duration, cfg.payload)?;
            eprintln!("{} x{w}: {:.0} writes/s", r.store, r.per_second());
            results.push(r);
        }
    }
    if temp {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(results)
}
