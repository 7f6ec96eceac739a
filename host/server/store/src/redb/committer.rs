//! The embedded store's committer: it takes a unit of tasks from the group
//! (`group.rs`), decides, applies (`schema.rs`) and logs (`wal.rs`) each
//! batch in redb's write transaction, keeps that transaction open across
//! batches while nobody reads ([`Rolling`]), and between units checkpoints
//! the log and reopens a store that a failure closed (`lifecycle.rs`).
//! The write path is explained once in docs/storage.md ("Group commit");
//! its invariants are stated in `mod.rs`.

use super::group::BatchCommit;
use super::lifecycle::{CommitLog, RETRY_EVERY, StoreKeeper};
use super::read_cache::ReadCache;
use super::retire::floor_fence;
use super::schema::{FENCES, META, OBJECTS, STORED_BYTES, WAL_APPLIED, apply_record, begin, checkpoint};
use super::schema::{FLOORS, db_err, decode_fence, reset};
use super::wal::RecordRef;
use crate::{Mutation, StorageError, ValidWrite, WriteOutcome};
use ::redb::{ReadableTable, WriteTransaction};
use fencing_runtime::{Fence, Guard, Policy, Verifier};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// Longest a log record waits for its checkpoint while writes keep coming.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Most writes decided in one batch.
pub const MAX_BATCH: usize = 4096;

/// Most batches the committer's open transaction takes before it is committed.
const ROLLING_BATCHES: usize = 64;
/// Most bytes of writes it takes (redb holds them in memory until the commit).
const ROLLING_BYTES: u64 = 8 << 20;

type Reply = oneshot::Sender<Result<WriteOutcome, StorageError>>;

pub(super) struct Job {
    pub(super) req: ValidWrite,
    pub(super) reply: Reply,
}

/// What the committer is handed: writes, batched, or an operator's reset, alone.
pub(super) enum Task {
    Write(Job),
    Reset { resource_id: String, to: Option<Fence>, reply: oneshot::Sender<Result<Option<Fence>, StorageError>> },
}

/// What decides a write: the guard, its policy, the verifier, the advance bound and the quota.
pub(super) struct WriteRules {
    pub(super) guard: Arc<dyn Guard>,
    pub(super) policy: Policy,
    pub(super) max_advance: Arc<AtomicU64>,
    /// Most bytes of objects, names and fences in all (`--max-store-bytes`).
    pub(super) quota: Option<u64>,
    /// The keys signed writes are checked with (`None`: unsigned).
    pub(super) verifier: Option<Arc<Verifier>>,
    pub(super) cache: Arc<ReadCache>,
}

/// The store and the rules, committed by whoever leads (`group.rs`).
pub(super) struct Committer {
    /// The open transaction, with the batches applied in it since its last
    /// commit. Invariant: [`StoreView::uncommitted`] is set only while this is
    /// `Some`, except after a commit unwound mid-batch (see `recover`).
    /// Declared first, so it is dropped before the database it belongs to
    /// (uncommitted at a close: its batches are in the log).
    rolling: Option<Rolling>,
    store: StoreKeeper,
    rules: WriteRules,
}

/// redb's write transaction, kept open across batches while nobody reads.
/// Each batch is decided and applied in it and answered once its log
/// records are synced; committing it (without a sync: the log is what is
/// durable) is redb's largest cost in a lone write, so it is paid once for
/// many batches: when a reader needs their writes ([`StoreView::uncommitted`]),
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

impl BatchCommit for Committer {
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
                        let result =
                            self.store.ready().and_then(|(db, log)| reset(db, &resource_id, to, &mut log.stored_bytes));
                        self.store.publish();
                        self.store.reopen_if_failed(&result);
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
            self.store.reopen_if_failed(&result);
        }
        // Records left in the log are checkpointed once they are old enough, writes or not.
        let pending = self.store.log().is_some_and(|log| log.wal.len() > 0);
        pending.then_some(CHECKPOINT_EVERY)
    }
}

impl Committer {
    pub(super) fn new(store: StoreKeeper, rules: WriteRules) -> Committer {
        Committer { rolling: None, store, rules }
    }

    /// Past the log's size bound, or holding records for [`CHECKPOINT_EVERY`].
    fn checkpoint_due(&self, log: &CommitLog) -> bool {
        log.wal.len() >= self.store.checkpoint_bytes()
            || (log.wal.len() > 0 && log.checkpointed.elapsed() >= CHECKPOINT_EVERY)
    }

    /// Commits the open transaction, if any. If that fails, the store
    /// reopens, applying its batches again from the log.
    pub(super) fn settle(&mut self) -> Result<(), StorageError> {
        self.recover();
        let Some(rolling) = self.rolling.take() else { return Ok(()) };
        let result = rolling.txn.commit().map_err(db_err);
        // Cleared only once readers can no longer reach a database without
        // the answered writes: committed, or closed and reopened from the log.
        self.store.reopen_if_failed(&result);
        self.store.readers().set_uncommitted(false);
        result
    }

    /// Whether answered batches were lost with a transaction: a commit
    /// unwound while their transaction was out of `rolling`, rolling it back.
    fn lost(&self) -> bool {
        self.rolling.is_none() && self.store.readers().uncommitted()
    }

    /// After [`lost`](Self::lost): reopen, which applies those batches again from the log.
    fn recover(&mut self) {
        if self.lost() {
            self.store.reopen_if_failed(&Err::<(), _>(StorageError::Unavailable("a commit unwound".into())));
            self.store.readers().set_uncommitted(false);
        }
    }

    fn commit_jobs(&mut self, batch: Vec<Job>) {
        if !self.store.reserve_held() {
            // Giving space back may compact the database, which needs no transaction open.
            let _ = self.settle();
        }
        let room = self.store.room_to_grow();
        // Whether the transaction the batch failed in held answered batches.
        let mut held = false;
        let result = self.store.ready().and_then(|(db, log)| {
            let mut rolling = match self.rolling.take() {
                Some(rolling) => rolling,
                None => Rolling { txn: begin(db)?, batches: 0, bytes: 0 },
            };
            // Out of `self` while the batch is applied: should it unwind, the
            // transaction rolls back and `recover` reopens the store.
            match commit_batch(&mut rolling.txn, &self.rules, log, &room, &batch) {
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
                if self.store.readers().take_read_since_batch() {
                    // Someone reads: commit now rather than make readers wait for
                    // the committer. Should that fail, the reopen applies the batch.
                    let _ = self.settle();
                } else {
                    // Before any writer hears back, so no reader misses their writes.
                    self.store.readers().set_uncommitted(true);
                }
                self.rules.cache.committed(batch.iter().map(|job| job.req.resource_id.as_str()));
                self.store.publish();
                if batch.iter().any(|job| job.req.mutation == Mutation::Delete) {
                    self.store.note_deletes();
                }
            }
            Err(e) => {
                if held && !StoreKeeper::reopens_after(e) {
                    // The answered batches are only in the log now: apply them again.
                    self.store.reopen_if_failed(&Err::<(), _>(StorageError::Unavailable(format!("batch failed: {e}"))));
                } else {
                    self.store.reopen_if_failed(&result);
                }
                self.store.readers().set_uncommitted(false);
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

/// Decides and applies `batch` in the open transaction `txn` and logs it.
/// The outer error fails the whole batch (and the caller drops `txn`);
/// inner errors belong to single writes that changed nothing.
fn commit_batch(
    txn: &mut WriteTransaction,
    rules: &WriteRules,
    log: &mut CommitLog,
    room: &Result<(), StorageError>,
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
        let floors = txn.open_table(FLOORS).map_err(db_err)?;
        for job in batch {
            let req = &job.req;
            // While the disk is full only a DELETE, which frees space, is decided.
            if let (Err(full), false) = (room, req.mutation == Mutation::Delete) {
                outcomes.push(Err(full.clone()));
                continue;
            }
            // Reads inside the write transaction see earlier writes of this batch.
            // A resource with no fence is decided against its lock's floor (`retire.rs`).
            let current = match fences.get(req.resource_id.as_str()).map_err(db_err)? {
                Some(v) => Some(decode_fence(v.value())),
                None => floor_fence(&floors, &req.lock_id)?,
            };
            let max_advance = rules.max_advance.load(Ordering::Acquire);
            let verifier = rules.verifier.as_deref();
            let admission = match crate::decide(rules.guard.as_ref(), rules.policy, verifier, max_advance, current, req)
            {
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
            let used = (log.stored_bytes as i64 + delta).max(0) as u64;
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
    let stored_bytes = (log.stored_bytes as i64 + delta).max(0) as u64;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(WAL_APPLIED, last).map_err(db_err)?;
        meta.insert(STORED_BYTES, stored_bytes).map_err(db_err)?;
    }
    // Durable in the log, or failed: then the caller drops `txn` and the
    // store reopens from the log, which no longer holds the batch.
    log.wal
        .append_batch()
        .map_err(|e| StorageError::io(&format!("write-ahead log {}", log.wal.path().display()), &e))?;
    log.next_lsn = last + 1;
    log.stored_bytes = stored_bytes;
    Ok(outcomes)
}
