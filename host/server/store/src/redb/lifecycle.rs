//! Opening the embedded store: at start, and again after a write failed.
//!
//! redb refuses every operation after an I/O error ("Previous I/O error
//! occurred") until the database is closed and opened again. A full disk is
//! the common cause, and it passes: so after any failed batch or checkpoint
//! the committer closes the database and opens it again, the way a restart
//! would, and keeps retrying (on every task, and every [`RETRY_EVERY`] while
//! idle) until it succeeds.
//!
//! Reopening must write (redb repairs itself, the log's records are applied
//! and checkpointed), and so must a DELETE (redb copies pages on write). On
//! a disk that is full, neither could run. So the store keeps a space
//! reserve: a file of `--space-reserve` bytes allocated beside the database.
//! When a write fails for lack of space the reserve is given back to the
//! file system; the store reopens into that room, and until the reserve can
//! be allocated again (checked at most once a second) it accepts only
//! DELETEs, answering every other write 507. As soon as space returns, the
//! reserve is taken back and every write is accepted again; no restart.
//!
//! Invariants:
//! - reopening is exactly opening: redb returns to its last durable commit
//!   and the log's records after it are applied again, so every acknowledged
//!   write is there afterwards and no refused one is;
//! - while the database is closed, readers get 503 `store_unavailable`
//!   rather than an answer from a database that stopped working.

use super::schema::{FENCES, META, OBJECTS, STORED_BYTES, WAL_APPLIED, apply_record, db_err};
use super::wal::{CHECKPOINT_BYTES, Wal};
use crate::StorageError;
use ::redb::{Database, ReadableDatabase};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// How often a closed store tries to open again while no task comes.
pub(super) const RETRY_EVERY: Duration = Duration::from_millis(200);
/// How long a reopen waits for readers to let go of the old database.
const READERS_GRACE: Duration = Duration::from_secs(2);
/// How often a released reserve is tried again.
const RESERVE_RETRY: Duration = Duration::from_secs(1);
/// The reserve's file name inside the store's directory.
pub const RESERVE_FILE: &str = "space-reserve";
/// The default size of the space reserve.
pub const DEFAULT_SPACE_RESERVE: u64 = 16 << 20;

/// The open database as readers see it (empty while the committer reopens
/// it), and the bytes of all objects as of the last commit.
pub(super) struct StoreView {
    db: RwLock<Option<Arc<Database>>>,
    stored_bytes: AtomicU64,
    /// Acknowledged writes wait in the committer's open transaction: a
    /// reader commits it before it reads (`mod.rs`, `Rolling`). Changed
    /// only under the committer's mutex.
    uncommitted: AtomicBool,
    /// A read has begun since the committer last answered a batch.
    read_since_batch: AtomicBool,
}

impl StoreView {
    /// The database, or 503 while it is being reopened.
    pub(super) fn get(&self) -> Result<Arc<Database>, StorageError> {
        self.db.read().expect("open database").clone().ok_or_else(|| {
            StorageError::Unavailable("the store is reopening after a failed write; retry shortly".into())
        })
    }

    /// The bytes of all objects.
    pub(super) fn stored_bytes(&self) -> u64 {
        self.stored_bytes.load(Ordering::Acquire)
    }

    /// Whether acknowledged writes wait to be committed for readers.
    pub(super) fn uncommitted(&self) -> bool {
        self.uncommitted.load(Ordering::SeqCst)
    }

    /// Notes a read (before it looks at the database). Loaded first, so
    /// readers write the shared flag only once per batch.
    pub(super) fn note_read(&self) {
        if !self.read_since_batch.load(Ordering::Relaxed) {
            self.read_since_batch.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a read has begun since the last call (the committer's, once a batch).
    pub(super) fn take_read_since_batch(&self) -> bool {
        self.read_since_batch.swap(false, Ordering::Relaxed)
    }

    /// Notes that acknowledged writes wait in an open transaction (set
    /// before their writers are answered), or that none do.
    pub(super) fn set_uncommitted(&self, waiting: bool) {
        self.uncommitted.store(waiting, Ordering::SeqCst);
    }

    fn set(&self, db: Option<Arc<Database>>) {
        *self.db.write().expect("open database") = db;
    }
}

/// The committer's log and where it stands.
pub(super) struct CommitLog {
    pub wal: Wal,
    pub next_lsn: u64,
    pub checkpointed: Instant,
    /// The bytes of all objects as of the last commit.
    pub stored_bytes: u64,
}

/// The committer's side of the store: the database and its log when open.
pub(super) struct StoreKeeper {
    dir: PathBuf,
    /// What readers see, shared with the engine: emptied while the store
    /// reopens, filled again once it is open.
    readers: Arc<StoreView>,
    open: Option<(Arc<Database>, CommitLog)>,
    /// Why the last reopen failed: the answer to writes until one succeeds.
    last_error: Option<StorageError>,
    reserve: Reserve,
    /// DELETEs ran while the reserve was given back: compacting may give space back.
    freed: bool,
}

impl StoreKeeper {
    /// Opens the store in `dir` (creating it), applying the log, with a
    /// space reserve of `reserve` bytes (0: none).
    pub(super) fn open(dir: &Path, reserve: u64) -> Result<(StoreKeeper, Arc<StoreView>), StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| StorageError::io(&format!("create {}", dir.display()), &e))?;
        // Taken first: on a full disk the reserve is what the open writes into.
        let mut reserve = Reserve { path: dir.join(RESERVE_FILE), bytes: reserve, held: false, tried: None };
        if !reserve.take() {
            reserve.release();
        }
        let (db, log) = match open_store(dir) {
            // Opening applies the log and must write: on a full disk, into the reserve.
            Err(StorageError::NoSpace(_)) if reserve.held && reserve.bytes > 0 => {
                reserve.release();
                open_store(dir)?
            }
            other => other?,
        };
        let db = Arc::new(db);
        let readers = Arc::new(StoreView {
            db: RwLock::new(Some(db.clone())),
            stored_bytes: AtomicU64::new(log.stored_bytes),
            uncommitted: AtomicBool::new(false),
            read_since_batch: AtomicBool::new(false),
        });
        let store = StoreKeeper {
            dir: dir.to_path_buf(),
            readers: readers.clone(),
            open: Some((db, log)),
            last_error: None,
            reserve,
            freed: false,
        };
        Ok((store, readers))
    }

    /// CommitLog bytes that trigger a checkpoint: at most half the reserve, so what
    /// a reopen must apply from the log fits in the room the reserve leaves.
    pub(super) fn checkpoint_bytes(&self) -> u64 {
        match self.reserve.bytes {
            0 => CHECKPOINT_BYTES,
            reserve => (reserve / 2).clamp(1 << 20, CHECKPOINT_BYTES),
        }
    }

    /// Whether there is room for writes that grow the store: `Err` (507)
    /// while the reserve is given back, after taking it again if space has
    /// returned. DELETEs are accepted either way.
    pub(super) fn room_to_grow(&mut self) -> Result<(), StorageError> {
        if self.reserve.held || self.reserve.retry() {
            return Ok(());
        }
        // redb reuses freed pages but never shrinks its file by itself: after
        // DELETEs on a full disk, compacting is what gives the space back.
        if std::mem::take(&mut self.freed) && self.compact() && self.reserve.take() {
            tracing::info!("compaction gave space back: space reserve taken back, all writes accepted");
            return Ok(());
        }
        Err(StorageError::NoSpace(
            "the disk is full: only DELETE is accepted until space returns (the store keeps its space reserve \
             given back until then)"
                .into(),
        ))
    }

    /// The open database and log, reopening them first if a failure closed them.
    pub(super) fn ready(&mut self) -> Result<(&Database, &mut CommitLog), StorageError> {
        if self.open.is_none() {
            self.reopen();
        }
        match &mut self.open {
            Some((db, log)) => Ok((db, log)),
            None => Err(self.last_error.clone().unwrap_or_else(|| StorageError::Unavailable("store closed".into()))),
        }
    }

    /// Publishes the committed bytes of all objects to readers.
    pub(super) fn publish(&self) {
        if let Some((_, log)) = &self.open {
            self.readers.stored_bytes.store(log.stored_bytes, Ordering::Release);
        }
    }

    /// Notes that DELETEs ran while the reserve is given back.
    pub(super) fn note_deletes(&mut self) {
        if !self.reserve.held {
            self.freed = true;
        }
    }

    /// Compacts the database file (readers wait with 503 meanwhile); whether it worked.
    fn compact(&mut self) -> bool {
        let Some((db, log)) = self.open.take() else { return false };
        self.readers.set(None);
        let unwrapped = wait_for_readers(db);
        let (db, compacted) = match unwrapped {
            Ok(mut owned) => {
                let compacted = match owned.compact() {
                    Ok(_) => true,
                    Err(e) => {
                        tracing::warn!(error = %e, "storage compaction failed");
                        false
                    }
                };
                (Arc::new(owned), compacted)
            }
            Err(shared) => (shared, false),
        };
        self.readers.set(Some(db.clone()));
        self.open = Some((db, log));
        compacted
    }

    /// Closes the store and opens it again when `result` is a failure of
    /// the store itself ([`reopens_after`](Self::reopens_after)); else nothing.
    pub(super) fn reopen_if_failed<T>(&mut self, result: &Result<T, StorageError>) {
        match result {
            Err(e) if StoreKeeper::reopens_after(e) => {
                if matches!(e, StorageError::NoSpace(_)) {
                    self.reserve.release();
                }
            }
            _ => return,
        }
        if let Some((db, log)) = self.open.take() {
            self.readers.set(None);
            drop(log);
            drop(wait_for_readers(db));
        }
        self.reopen();
    }

    /// Whether after `failure` the store closes and opens again ([`reopen_if_failed`](Self::reopen_if_failed)).
    pub(super) fn reopens_after(failure: &StorageError) -> bool {
        matches!(failure, StorageError::NoSpace(_) | StorageError::Backend(_) | StorageError::Unavailable(_))
    }

    /// Whether the space reserve is held (the disk is not full): no compaction is due.
    pub(super) fn reserve_held(&self) -> bool {
        self.reserve.held
    }

    /// What readers see, and the flags the committer and readers signal each other with.
    pub(super) fn readers(&self) -> &StoreView {
        &self.readers
    }

    /// Whether the database and log are open.
    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The open log, if the store is open.
    pub(super) fn log(&self) -> Option<&CommitLog> {
        self.open.as_ref().map(|(_, log)| log)
    }

    /// Tries to open a closed store again (the committer does every [`RETRY_EVERY`]).
    pub(super) fn retry_open(&mut self) {
        if self.open.is_none() {
            self.reopen();
        }
    }

    fn reopen(&mut self) {
        match open_store(&self.dir) {
            Ok((db, log)) => {
                let db = Arc::new(db);
                self.readers.set(Some(db.clone()));
                self.open = Some((db, log));
                if self.last_error.take().is_some() {
                    tracing::info!(dir = %self.dir.display(), "storage reopened; writes are accepted again");
                }
            }
            Err(e) => {
                if self.last_error.is_none() {
                    tracing::warn!(error = %e, "storage cannot reopen yet; writes are refused until it can");
                }
                self.last_error = Some(e);
            }
        }
    }
}

/// A file of allocated blocks kept beside the store, given back when the disk fills.
struct Reserve {
    path: PathBuf,
    bytes: u64,
    held: bool,
    /// When a released reserve was last tried.
    tried: Option<Instant>,
}

impl Reserve {
    /// Allocates the reserve; whether it is held.
    fn take(&mut self) -> bool {
        if self.bytes == 0 {
            self.held = true;
            return true;
        }
        let allocate = || -> std::io::Result<()> {
            let file = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&self.path)?;
            let len = i64::try_from(self.bytes).map_err(std::io::Error::other)?;
            nix::fcntl::posix_fallocate(&file, 0, len).map_err(std::io::Error::from)?;
            file.sync_all()
        };
        self.held = match allocate() {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, path = %self.path.display(), "space reserve not allocated");
                let _ = std::fs::remove_file(&self.path);
                false
            }
        };
        self.held
    }

    /// Takes the reserve again if it was given back at least [`RESERVE_RETRY`] ago and space allows.
    fn retry(&mut self) -> bool {
        if self.tried.is_some_and(|t| t.elapsed() < RESERVE_RETRY) {
            return false;
        }
        self.tried = Some(Instant::now());
        if self.take() {
            tracing::info!(path = %self.path.display(), "disk space returned: space reserve taken back, all writes accepted");
        }
        self.held
    }

    /// Gives the reserve back to the file system.
    fn release(&mut self) {
        if self.bytes == 0 || (!self.held && self.tried.is_some()) {
            return;
        }
        let _ = std::fs::remove_file(&self.path);
        self.held = false;
        self.tried = Some(Instant::now());
        tracing::warn!(
            path = %self.path.display(), bytes = self.bytes,
            "disk full: space reserve given back; only DELETE is accepted until space returns"
        );
    }
}

/// The committer's handle, owned once readers have let go of it (they hold
/// it for one read transaction), or still shared after [`READERS_GRACE`].
fn wait_for_readers(db: Arc<Database>) -> Result<Database, Arc<Database>> {
    let deadline = Instant::now() + READERS_GRACE;
    let mut db = Arc::try_unwrap(db);
    while let Err(shared) = db {
        if Instant::now() >= deadline {
            return Err(shared);
        }
        std::thread::sleep(Duration::from_millis(1));
        db = Arc::try_unwrap(shared);
    }
    db
}

/// Opens (or creates) `dir/fencing.redb` and its log, and applies the log's
/// records beyond the last checkpoint in one durable commit.
pub(super) fn open_store(dir: &Path) -> Result<(Database, CommitLog), StorageError> {
    let db = Database::create(dir.join("fencing.redb")).map_err(db_err)?;
    let wal_path = dir.join(super::wal::WAL_FILE);
    // A store with its tables and nothing to apply opens without writing,
    // which is what lets it reopen on a disk that is still full.
    let (applied, counted) = {
        let txn = db.begin_read().map_err(db_err)?;
        match txn.open_table(META) {
            Ok(meta) => (
                Some(meta.get(WAL_APPLIED).map_err(db_err)?.map_or(0, |v| v.value())),
                meta.get(STORED_BYTES).map_err(db_err)?.map(|v| v.value()),
            ),
            Err(::redb::TableError::TableDoesNotExist(_)) => (None, Some(0)),
            Err(e) => return Err(db_err(e)),
        }
    };
    // Every store keeps the count beside the log's position from its first
    // open; one that kept only its objects' bytes is counted again, once.
    let stored_bytes = match counted {
        Some(n) => n,
        None => super::schema::count_stored_bytes(&db)?,
    };
    let (wal, pending) = Wal::open(dir, applied.unwrap_or(0))
        .map_err(|e| StorageError::io(&format!("open {}", wal_path.display()), &e))?;
    if applied.is_some() && pending.is_empty() {
        let next_lsn = applied.unwrap_or(0) + 1;
        return Ok((db, CommitLog { wal, next_lsn, checkpointed: Instant::now(), stored_bytes }));
    }
    // Create the tables so read transactions never see them missing, and
    // apply the log's records in one durable commit.
    let txn = db.begin_write().map_err(db_err)?;
    let mut delta = 0i64;
    {
        let mut fences = txn.open_table(FENCES).map_err(db_err)?;
        let mut objects = txn.open_table(OBJECTS).map_err(db_err)?;
        for r in &pending {
            delta += apply_record(&mut fences, &mut objects, &r.borrowed(), |_| Ok(()))?;
        }
    }
    let applied = pending.last().map_or(applied.unwrap_or(0), |r| r.lsn);
    let stored_bytes = (stored_bytes as i64 + delta).max(0) as u64;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(WAL_APPLIED, applied).map_err(db_err)?;
        meta.insert(STORED_BYTES, stored_bytes).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    if !pending.is_empty() {
        tracing::info!(records = pending.len(), applied, "storage: applied the write-ahead log");
    }
    Ok((db, CommitLog { wal, next_lsn: applied + 1, checkpointed: Instant::now(), stored_bytes }))
}

/// Compacts the store in `dir` (its server stopped: the file is locked
/// otherwise), after applying its log; the file's size before and after.
pub fn compact(dir: &Path) -> Result<(u64, u64), StorageError> {
    let file = dir.join("fencing.redb");
    let size =
        || std::fs::metadata(&file).map(|m| m.len()).map_err(|e| StorageError::io(&file.display().to_string(), &e));
    let before = size()?;
    let (mut db, log) = open_store(dir)?;
    drop(log);
    db.compact().map_err(db_err)?;
    drop(db);
    Ok((before, size()?))
}
