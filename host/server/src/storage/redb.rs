//! The embedded engine: redb behind a write-ahead log, with group commit.
//!
//! Writers hand their [`ValidWrite`] to whoever commits (`group.rs`: a lone
//! writer on its own thread, otherwise the background committer thread,
//! which takes what is queued, up to [`MAX_BATCH`]). The committer opens one
//! redb write transaction, decides each write in arrival order against the
//! fence as left by the earlier writes of the same batch, applies the
//! admitted ones, appends them to the log (`wal.rs`: one `O_DIRECT |
//! O_DSYNC` write for the batch, or a write and an `fdatasync` where the
//! file system has no direct I/O), and then answers every writer. While
//! nobody reads, the transaction stays open for the next batches
//! ([`Rolling`]) and is committed, without a sync, when a reader needs it,
//! after [`ROLLING_BATCHES`] batches, or before any other transaction;
//! once reads begin, each batch is committed before it is answered. A
//! checkpoint (a durable redb commit, then the log rewound) follows every
//! `CHECKPOINT_BYTES` of log (or half the space reserve, if smaller: see
//! `redb_open.rs`) or every second with writes in it; opening the store
//! applies the log's records beyond the last checkpoint first.
//!
//! Invariants:
//! - the fence check and the write of one request happen inside the single
//!   write transaction, so nothing interleaves between them (no TOCTOU);
//! - a write that is rejected, fails the guard or exceeds a limit touches no
//!   table; a failed commit answers every writer of the batch with an error,
//!   so no unacknowledged write is reported as admitted;
//! - a reply is sent only after the batch's log records are synced, so every
//!   acknowledged write is on disk (in the log, or in redb since a
//!   checkpoint);
//! - every read begins after the open transaction holding acknowledged
//!   writes is committed ([`Slot::uncommitted`] is set before the writers are
//!   answered, and a reader that sees it commits first), so a read that
//!   starts after a write's answer sees it;
//! - the open transaction holds only batches whose log records are synced:
//!   when it is dropped uncommitted (a failed batch, a failed commit) the
//!   store reopens, which applies them again from the log;
//! - a batch whose log write fails is not answered as admitted and, being
//!   cleared from the log, is never applied by that reopen.

use super::group::{Group, Work};
use super::read_cache::{Lookup, ReadCache};
use super::redb_open::{DEFAULT_SPACE_RESERVE, Log, RETRY_EVERY, Slot, Store, db_err};
use super::wal::RecordRef;
use super::{Engine, MAX_OBJECT_BYTES, Mutation, ReadResult, StorageError, ValidWrite, WriteOutcome};
use ::redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use fencing_runtime::{Fence, Guard, Policy};
use futures::future::BoxFuture;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// resource id -> (lock, high-water, last sequence).
pub(super) const FENCES: TableDefinition<&str, (&str, u64, Option<u64>)> = TableDefinition::new("fences");
/// (resource id, file path) -> object bytes.
pub(super) const OBJECTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("objects");
/// `wal_applied` -> the LSN of the last log record applied, written in the transaction that applied it.
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const WAL_APPLIED: &str = "wal_applied";
/// `object_bytes` -> the bytes of every object, kept with the writes that change it (the quota's measure).
pub(super) const OBJECT_BYTES: &str = "object_bytes";
/// Longest a log record waits for its checkpoint while writes keep coming.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Most writes decided in one batch.
pub const MAX_BATCH: usize = 4096;

/// Most batches the committer's open transaction takes before it is committed.
const ROLLING_BATCHES: usize = 64;
/// Most bytes of writes it takes (redb holds them in memory until the commit).
const ROLLING_BYTES: u64 = 8 << 20;

type Reply = oneshot::Sender<Result<WriteOutcome, StorageError>>;

struct Job {
    req: ValidWrite,
    reply: Reply,
}

/// What the committer is handed: writes, batched, or an operator's reset, alone.
enum Task {
    Write(Job),
    Reset { resource_id: String, to: Option<Fence>, reply: oneshot::Sender<Result<Option<Fence>, StorageError>> },
}

/// How the embedded store uses its disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// Bytes kept allocated beside the store and given back on a full disk (0: none; see `redb_open.rs`).
    pub space_reserve: u64,
    /// Most bytes of objects in all (`--max-store-bytes`): a write that would
    /// grow past it gets 507 `quota_exceeded`; DELETEs are always decided.
    pub max_bytes: Option<u64>,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions { space_reserve: DEFAULT_SPACE_RESERVE, max_bytes: None }
    }
}

/// A redb file holding every resource, committed by one leader at a time (`group.rs`).
pub struct RedbEngine {
    slot: Arc<Slot>,
    /// Objects being read, shared by their readers; the committer invalidates.
    cache: Arc<ReadCache>,
    group: Arc<Group<Committer>>,
    background: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// `--max-token-advance`, shared with the committer (`u64::MAX`: none).
    max_advance: Arc<AtomicU64>,
}

impl RedbEngine {
    /// Opens (or creates) `dir/fencing.redb`, applies the log, and starts
    /// the committer, with the default options.
    pub fn open(dir: &Path, guard: Arc<dyn Guard>, policy: Policy) -> Result<RedbEngine, StorageError> {
        RedbEngine::open_with(dir, guard, policy, StoreOptions::default())
    }

    /// Likewise with `options`.
    pub fn open_with(
        dir: &Path,
        guard: Arc<dyn Guard>,
        policy: Policy,
        options: StoreOptions,
    ) -> Result<RedbEngine, StorageError> {
        let (store, slot) = Store::open(dir, options.space_reserve)?;
        let max_advance = Arc::new(AtomicU64::new(u64::MAX));
        let cache = Arc::new(ReadCache::default());
        let rules =
            Rules { guard, policy, max_advance: max_advance.clone(), quota: options.max_bytes, cache: cache.clone() };
        let (group, background) = Group::start("fencing-redb-commit", Committer { rolling: None, store, rules })
            .map_err(StorageError::backend)?;
        Ok(RedbEngine { slot, cache, group, background: Mutex::new(Some(background)), max_advance })
    }

    /// Bounds how far one write may raise a resource's high-water mark (`None`: no bound).
    pub fn set_max_token_advance(&self, max: Option<u64>) {
        self.max_advance.store(max.unwrap_or(u64::MAX), Ordering::Release);
    }

    fn submit(&self, task: Task) -> Result<(), StorageError> {
        self.group.submit(task).map_err(|_| StorageError::Closed)
    }

    /// Commits the answered writes a read must see, if any wait in the
    /// committer's open transaction ([`Rolling`]). Blocks: call it before
    /// taking the database from the slot (a reopen waits for readers of it).
    fn settle_for_read(slot: &Slot, group: &Group<Committer>) -> Result<(), StorageError> {
        if slot.uncommitted() { group.between_units(Committer::settle) } else { Ok(()) }
    }

    fn read_fence(slot: &Slot, resource_id: &str) -> Result<Option<Fence>, StorageError> {
        let db = slot.get()?;
        let txn = db.begin_read().map_err(db_err)?;
        let table = txn.open_table(FENCES).map_err(db_err)?;
        Ok(table.get(resource_id).map_err(db_err)?.map(|v| decode_fence(v.value())))
    }
}

impl Drop for RedbEngine {
    fn drop(&mut self) {
        // The background thread commits what is queued, then exits.
        self.group.close();
        if let Some(handle) = self.background.lock().expect("committer lock").take() {
            let _ = handle.join();
        }
    }
}

fn decode_fence((lock, high_water, sequence): (&str, u64, Option<u64>)) -> Fence {
    Fence { lock: lock.to_owned(), high_water, sequence }
}

/// What decides a write: the guard, its policy, the advance bound and the quota.
struct Rules {
    guard: Arc<dyn Guard>,
    policy: Policy,
    max_advance: Arc<AtomicU64>,
    /// Most bytes of objects in all (`--max-store-bytes`).
    quota: Option<u64>,
    cache: Arc<ReadCache>,
}

/// The store and the rules, committed by whoever leads (`group.rs`).
struct Committer {
    /// The open transaction, with the batches applied in it since its last
    /// commit. Invariant: [`Slot::uncommitted`] is set only while this is
    /// `Some`, except after a commit unwound mid-batch (see `recover`).
    /// Declared first, so it is dropped before the database it belongs to
    /// (uncommitted at a close: its batches are in the log).
    rolling: Option<Rolling>,
    store: Store,
    rules: Rules,
}

/// redb's write transaction, kept open across batches while nobody reads.
/// Each batch is decided and applied in it and answered once its log
/// records are synced; committing it (without a sync: the log is what is
/// durable) is redb's largest cost in a lone write, so it is paid once for
/// many batches: when a reader needs their writes ([`Slot::uncommitted`]),
/// after [`ROLLING_BATCHES`] batches or [`ROLLING_BYTES`] bytes of writes,
/// or before a reset, a checkpoint or a compaction begins their own
/// transaction. Once reads have begun since the last batch, each batch is
/// committed before it is answered instead, so that readers do not wait for
/// the committer.
struct Rolling {
    txn: WriteTransaction,
    batches: usize,
    /// Bytes of the writes in those batches.
    bytes: u64,
}

impl Work for Committer {
    type Task = Task;

    /// A reset alone, or the writes up to the next reset (at most [`MAX_BATCH`]).
    fn take(queue: &mut VecDeque<Task>) -> Vec<Task> {
        if matches!(queue.front(), Some(Task::Reset { .. })) {
            return queue.pop_front().into_iter().collect();
        }
        let writes = queue.iter().take(MAX_BATCH).take_while(|t| matches!(t, Task::Write(_))).count();
        queue.drain(..writes).collect()
    }

    fn commit(&mut self, unit: Vec<Task>) {
        self.recover();
        let mut jobs = Vec::with_capacity(unit.len());
        for task in unit {
            match task {
                Task::Write(job) => jobs.push(job),
                Task::Reset { resource_id, to, reply } => {
                    let result = self.settle().and_then(|()| {
                        let result = self.store.ready().and_then(|(db, _)| reset(db, &resource_id, to));
                        self.store.after(&result);
                        result
                    });
                    self.rules.cache.committed([resource_id.as_str()]);
                    let _ = reply.send(result);
                }
            }
        }
        if !jobs.is_empty() {
            self.commit_jobs(jobs);
        }
    }

    fn chores_due(&self) -> bool {
        self.lost() || !self.store.is_open() || self.store.log().is_some_and(|log| self.checkpoint_due(log))
    }

    fn chores(&mut self) -> Option<Duration> {
        self.recover();
        if !self.store.is_open() {
            self.store.retry_open();
            return Some(RETRY_EVERY);
        }
        let due = self.store.log().is_some_and(|log| self.checkpoint_due(log));
        // The checkpoint rewinds the log: every batch in it must be in redb first.
        if due
            && self.settle().is_ok()
            && let Ok((db, log)) = self.store.ready()
        {
            let result = checkpoint(db);
            match &result {
                Ok(()) => {
                    log.wal.rewind();
                    log.checkpointed = Instant::now();
                }
                Err(e) => tracing::error!(error = %e, "storage checkpoint failed; the log keeps its records"),
            }
            self.store.after(&result);
        }
        // Records left in the log are checkpointed once they are old enough, writes or not.
        let pending = self.store.log().is_some_and(|log| log.wal.len() > 0);
        pending.then_some(CHECKPOINT_EVERY)
    }
}

impl Committer {
    /// Past the log's size bound, or holding records for [`CHECKPOINT_EVERY`].
    fn checkpoint_due(&self, log: &Log) -> bool {
        log.wal.len() >= self.store.checkpoint_bytes()
            || (log.wal.len() > 0 && log.checkpointed.elapsed() >= CHECKPOINT_EVERY)
    }

    /// Commits the open transaction, if any. If that fails, the store
    /// reopens, applying its batches again from the log.
    fn settle(&mut self) -> Result<(), StorageError> {
        self.recover();
        let Some(rolling) = self.rolling.take() else { return Ok(()) };
        let result = rolling.txn.commit().map_err(db_err);
        // Cleared only once readers can no longer reach a database without
        // the answered writes: committed, or closed and reopened from the log.
        self.store.after(&result);
        self.store.slot().set_uncommitted(false);
        result
    }

    /// Whether answered batches were lost with a transaction: a commit
    /// unwound while their transaction was out of `rolling`, rolling it back.
    fn lost(&self) -> bool {
        self.rolling.is_none() && self.store.slot().uncommitted()
    }

    /// After [`lost`](Self::lost): reopen, which applies those batches again from the log.
    fn recover(&mut self) {
        if self.lost() {
            self.store.after(&Err::<(), _>(StorageError::Unavailable("a commit unwound".into())));
            self.store.slot().set_uncommitted(false);
        }
    }

    fn commit_jobs(&mut self, batch: Vec<Job>) {
        if !self.store.reserve_held() {
            // Giving space back may compact the database, which needs no transaction open.
            let _ = self.settle();
        }
        let growth = self.store.growth();
        // Whether the transaction the batch failed in held answered batches.
        let mut held = false;
        let result = self.store.ready().and_then(|(db, log)| {
            let mut rolling = match self.rolling.take() {
                Some(rolling) => rolling,
                None => Rolling { txn: begin(db)?, batches: 0, bytes: 0 },
            };
            // Out of `self` while the batch is applied: should it unwind, the
            // transaction rolls back and `recover` reopens the store.
            match commit_batch(&mut rolling.txn, &self.rules, log, &growth, &batch) {
                Ok(outcomes) => {
                    rolling.batches += 1;
                    rolling.bytes += batch.iter().map(|job| job.req.bytes.len() as u64).sum::<u64>();
                    self.rolling = Some(rolling);
                    Ok(outcomes)
                }
                Err(e) => {
                    held = rolling.batches > 0;
                    Err(e)
                }
            }
        });
        match &result {
            Ok(_) => {
                if self.store.slot().take_read_since_batch() {
                    // Someone reads: commit now rather than make readers wait for
                    // the committer. Should that fail, the reopen applies the batch.
                    let _ = self.settle();
                } else {
                    // Before any writer hears back, so no reader misses their writes.
                    self.store.slot().set_uncommitted(true);
                }
                self.rules.cache.committed(batch.iter().map(|job| job.req.resource_id.as_str()));
                self.store.publish();
                if batch.iter().any(|job| job.req.mutation == Mutation::Delete) {
                    self.store.note_deletes();
                }
            }
            Err(e) => {
                if held && !Store::reopens_after(e) {
                    // The answered batches are only in the log now: apply them again.
                    self.store.after(&Err::<(), _>(StorageError::Unavailable(format!("batch failed: {e}"))));
                } else {
                    self.store.after(&result);
                }
                self.store.slot().set_uncommitted(false);
            }
        }
        match result {
            Ok(outcomes) => {
                for (job, outcome) in batch.into_iter().zip(outcomes) {
                    let _ = job.reply.send(outcome);
                }
            }
            Err(err) => {
                tracing::error!(error = %err, writes = batch.len(), "storage batch failed; no write of it was acknowledged");
                for job in batch {
                    let _ = job.reply.send(Err(err.clone()));
                }
            }
        }
        if self.rolling.as_ref().is_some_and(|r| r.batches >= ROLLING_BATCHES || r.bytes >= ROLLING_BYTES) {
            // Its writers are answered: a failure here reopens the store, which applies them from the log.
            let _ = self.settle();
        }
    }
}

/// A write transaction that syncs nothing: the log is what makes a batch durable.
fn begin(db: &Database) -> Result<WriteTransaction, StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::None).map_err(db_err)?;
    Ok(txn)
}

/// Sets (or with `to` `None`, removes) one resource's fence in its own transaction; returns the fence it replaced.
fn reset(db: &Database, resource_id: &str, to: Option<Fence>) -> Result<Option<Fence>, StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    let before = {
        let mut fences = txn.open_table(FENCES).map_err(db_err)?;
        let before = fences.get(resource_id).map_err(db_err)?.map(|v| decode_fence(v.value()));
        match &to {
            Some(f) => {
                fences.insert(resource_id, (f.lock.as_str(), f.high_water, f.sequence)).map_err(db_err)?;
            }
            None => {
                fences.remove(resource_id).map_err(db_err)?;
            }
        }
        before
    };
    txn.commit().map_err(db_err)?;
    Ok(before)
}

/// A durable commit: every earlier commit (and the LSN they applied) is on disk, so the log can be rewound.
fn checkpoint(db: &Database) -> Result<(), StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let applied = meta.get(WAL_APPLIED).map_err(db_err)?.map_or(0, |v| v.value());
        meta.insert(WAL_APPLIED, applied).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)
}

/// Decides and applies `batch` in the open transaction `txn` and logs it.
/// The outer error fails the whole batch (and the caller drops `txn`);
/// inner errors belong to single writes that changed nothing.
fn commit_batch(
    txn: &mut WriteTransaction,
    rules: &Rules,
    log: &mut Log,
    growth: &Result<(), StorageError>,
    batch: &[Job],
) -> Result<Vec<Result<WriteOutcome, StorageError>>, StorageError> {
    let mut outcomes = Vec::with_capacity(batch.len());
    // Admitted writes are staged in the log's buffer as they are applied.
    log.wal.begin_batch();
    let mut staged = 0u64;
    // How the batch changes the bytes of all objects.
    let mut delta = 0i64;
    {
        let mut fences = txn.open_table(FENCES).map_err(db_err)?;
        let mut objects = txn.open_table(OBJECTS).map_err(db_err)?;
        for job in batch {
            let req = &job.req;
            // While the disk is full only a DELETE, which frees space, is decided.
            if let (Err(full), false) = (growth, req.mutation == Mutation::Delete) {
                outcomes.push(Err(full.clone()));
                continue;
            }
            // Reads inside the write transaction see earlier writes of this batch.
            let current = fences.get(req.resource_id.as_str()).map_err(db_err)?.map(|v| decode_fence(v.value()));
            let max_advance = rules.max_advance.load(Ordering::Acquire);
            let admission = match super::decide(rules.guard.as_ref(), rules.policy, max_advance, current, req) {
                Ok(admission) => admission,
                Err(refused) => {
                    outcomes.push(Ok(refused));
                    continue;
                }
            };
            let record = RecordRef {
                lsn: log.next_lsn + staged,
                resource_id: &req.resource_id,
                file_path: &req.file_path,
                mutation: req.mutation,
                bytes: &req.bytes,
                lock: &req.lock_id,
                high_water: admission.high_water,
                sequence: admission.sequence,
            };
            // The same application replay makes; only an object over the size
            // limit, or a write past the quota, fails alone (changing nothing).
            let used = (log.object_bytes as i64 + delta).max(0) as u64;
            let within_quota = |change: i64| match rules.quota {
                Some(quota) if change > 0 && used + change as u64 > quota => {
                    Err(StorageError::QuotaExceeded { used, quota })
                }
                _ => Ok(()),
            };
            match apply_record(&mut fences, &mut objects, &record, within_quota) {
                Ok(change) => delta += change,
                Err(e @ (StorageError::TooLarge { .. } | StorageError::QuotaExceeded { .. })) => {
                    outcomes.push(Err(e));
                    continue;
                }
                Err(e) => return Err(e),
            }
            log.wal.stage(&record);
            staged += 1;
            outcomes.push(Ok(admission.into()));
        }
    }
    if staged == 0 {
        return Ok(outcomes);
    }
    let last = log.next_lsn + staged - 1;
    let object_bytes = (log.object_bytes as i64 + delta).max(0) as u64;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(WAL_APPLIED, last).map_err(db_err)?;
        meta.insert(OBJECT_BYTES, object_bytes).map_err(db_err)?;
    }
    // Durable in the log, or failed: then the caller drops `txn` and the
    // store reopens from the log, which no longer holds the batch.
    log.wal
        .append_batch()
        .map_err(|e| StorageError::io(&format!("write-ahead log {}", log.wal.path().display()), &e))?;
    log.next_lsn = last + 1;
    log.object_bytes = object_bytes;
    Ok(outcomes)
}

/// Applies a logged write (in its batch, and again when opening the store):
/// the same changes either way. `admit` sees how the write would change the
/// bytes of all objects before anything changes and may refuse it (the
/// quota); replay admits everything. Returns that change.
pub(super) fn apply_record(
    fences: &mut ::redb::Table<&str, (&str, u64, Option<u64>)>,
    objects: &mut ::redb::Table<(&str, &str), &[u8]>,
    r: &RecordRef<'_>,
    admit: impl FnOnce(i64) -> Result<(), StorageError>,
) -> Result<i64, StorageError> {
    let key = (r.resource_id, r.file_path);
    // One lookup; the old bytes are copied only to be appended to.
    let (old_len, appended) = {
        let old = objects.get(key).map_err(db_err)?;
        let old = old.as_ref().map(|v| v.value());
        let appended = match r.mutation {
            Mutation::Append => Some(append(old.unwrap_or(&[]), r.bytes)?),
            Mutation::Put | Mutation::Delete => None,
        };
        (old.map_or(0, <[u8]>::len), appended)
    };
    let new_len = match (&appended, r.mutation) {
        (Some(bytes), _) => bytes.len(),
        (None, Mutation::Put) => r.bytes.len(),
        (None, _) => 0,
    };
    let change = new_len as i64 - old_len as i64;
    admit(change)?;
    match (appended, r.mutation) {
        (Some(bytes), _) => objects.insert(key, bytes.as_slice()).map(drop),
        (None, Mutation::Put) => objects.insert(key, r.bytes).map(drop),
        (None, _) => objects.remove(key).map(drop),
    }
    .map_err(db_err)?;
    fences.insert(r.resource_id, (r.lock, r.high_water, r.sequence)).map_err(db_err)?;
    Ok(change)
}

/// `old` followed by `bytes`, within the object size limit.
fn append(old: &[u8], bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    let size = old.len() + bytes.len();
    if size > MAX_OBJECT_BYTES {
        return Err(StorageError::TooLarge { size, limit: MAX_OBJECT_BYTES });
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(old);
    out.extend_from_slice(bytes);
    Ok(out)
}

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn stored_bytes(&self) -> Option<u64> {
        Some(self.slot.object_bytes())
    }

    fn write(&self, req: ValidWrite) -> BoxFuture<'_, Result<WriteOutcome, StorageError>> {
        Box::pin(async move {
            let (reply, rx) = oneshot::channel();
            self.submit(Task::Write(Job { req, reply }))?;
            rx.await.map_err(|_| StorageError::Closed)?
        })
    }

    fn reset_fence<'a>(
        &'a self,
        resource_id: &'a str,
        to: Option<Fence>,
        _reason: &'a str,
    ) -> BoxFuture<'a, Result<Option<Fence>, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            let (reply, rx) = oneshot::channel();
            self.submit(Task::Reset { resource_id: resource_id.to_owned(), to, reply })?;
            rx.await.map_err(|_| StorageError::Closed)?
        })
    }

    fn read<'a>(&'a self, resource_id: &'a str, file_path: &'a str) -> BoxFuture<'a, Result<ReadResult, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            super::validate_file_path(file_path)?;
            self.slot.note_read();
            // Taken before the read transaction begins (see `read_cache.rs`).
            let load = loop {
                match self.cache.lookup(resource_id, file_path) {
                    Lookup::Shared(bytes, fence) => return Ok(ReadResult { bytes: Some(bytes), fence }),
                    Lookup::Wait(other_reader) => other_reader.await,
                    Lookup::Load(load) => break load,
                }
            };
            let (slot, group) = (self.slot.clone(), self.group.clone());
            let (resource, path) = (resource_id.to_owned(), file_path.to_owned());
            let (bytes, fence) = tokio::task::spawn_blocking(move || {
                RedbEngine::settle_for_read(&slot, &group)?;
                let db = slot.get()?;
                // One read transaction: the object and fence are from the same commit.
                let txn = db.begin_read().map_err(db_err)?;
                let fences = txn.open_table(FENCES).map_err(db_err)?;
                let objects = txn.open_table(OBJECTS).map_err(db_err)?;
                let fence = fences.get(resource.as_str()).map_err(db_err)?.map(|v| decode_fence(v.value()));
                let bytes =
                    objects.get((resource.as_str(), path.as_str())).map_err(db_err)?.map(|v| v.value().to_vec());
                Ok::<_, StorageError>((bytes, fence))
            })
            .await
            .map_err(StorageError::backend)??;
            let bytes = bytes.map(|b| load.finish(b, &fence));
            Ok(ReadResult { bytes, fence })
        })
    }

    fn fence<'a>(&'a self, resource_id: &'a str) -> BoxFuture<'a, Result<Option<Fence>, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            self.slot.note_read();
            if self.slot.uncommitted() {
                let (slot, group) = (self.slot.clone(), self.group.clone());
                tokio::task::spawn_blocking(move || RedbEngine::settle_for_read(&slot, &group))
                    .await
                    .map_err(StorageError::backend)??;
            }
            RedbEngine::read_fence(&self.slot, resource_id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::WriteRequest;
    use fencing_runtime::NativeGuard;

    fn put(resource: &str, token: u64) -> ValidWrite {
        let req = WriteRequest {
            resource_id: resource.to_owned(),
            lock_id: resource.to_owned(),
            token,
            sequence: None,
            file_path: "/f".to_owned(),
            mutation: Mutation::Put,
            bytes: vec![token as u8],
        };
        req.validate().expect("a valid write")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_wait_uncommitted_only_while_nobody_reads() {
        let dir = tempfile::tempdir().unwrap();
        let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
        engine.write(put("a", 1)).await.unwrap();
        engine.write(put("a", 2)).await.unwrap();
        assert!(engine.slot.uncommitted(), "with nobody reading, answered batches wait in the open transaction");

        let read = engine.read("a", "/f").await.unwrap();
        assert_eq!(read.bytes.as_deref(), Some(&[2u8][..]), "a read commits them first");
        assert!(!engine.slot.uncommitted());

        engine.write(put("a", 3)).await.unwrap();
        assert!(!engine.slot.uncommitted(), "once someone reads, a batch is committed before it is answered");
        assert_eq!(engine.fence("a").await.unwrap().map(|f| f.high_water), Some(3));

        // No read since the last batch: the next ones wait again.
        engine.write(put("a", 4)).await.unwrap();
        engine.write(put("a", 5)).await.unwrap();
        assert!(engine.slot.uncommitted());
        assert_eq!(engine.fence("a").await.unwrap().map(|f| f.high_water), Some(5));
    }
}
