//! The embedded engine: redb behind a write-ahead log, with group commit.
//!
//! Writers hand their [`ValidWrite`] to whoever commits (`group.rs`); the
//! committer (`committer.rs`) decides a batch in one redb write
//! transaction, logs it (`wal.rs`) and answers its writers, keeping the
//! transaction open across batches while nobody reads ([`Rolling`]). How
//! and why, step by step, is explained once in docs/storage.md ("Group
//! commit"); checkpoints and reopening are `lifecycle.rs`.
//!
//! Invariants of the whole path:
//! - the fence check and the write of one request happen inside the single
//!   write transaction, so nothing interleaves between them (no TOCTOU);
//! - a write that is rejected, fails the guard or exceeds a limit touches no
//!   table; a failed commit answers every writer of the batch with an error,
//!   so no unacknowledged write is reported as admitted;
//! - a reply is sent only after the batch's log records are synced, so every
//!   acknowledged write is on disk (in the log, or in redb since a
//!   checkpoint);
//! - every read begins after the open transaction holding acknowledged
//!   writes is committed ([`StoreView::uncommitted`] is set before the writers are
//!   answered, and a reader that sees it commits first), so a read that
//!   starts after a write's answer sees it;
//! - the open transaction holds only batches whose log records are synced:
//!   when it is dropped uncommitted (a failed batch, a failed commit) the
//!   store reopens, which applies them again from the log;
//! - a batch whose log write fails is not answered as admitted and, being
//!   cleared from the log, is never applied by that reopen.

mod committer;
mod group;
mod lifecycle;
mod read_cache;
mod retire;
mod schema;
mod wal;

pub use self::lifecycle::{DEFAULT_SPACE_RESERVE, RESERVE_FILE, compact};
pub use self::retire::{DroppedFloors, Retired, drop_floors_below, retire_empty_fences};

use self::committer::{Committer, Job, Task, WriteRules};
use self::group::Group;
use self::lifecycle::{StoreKeeper, StoreView};
use self::read_cache::{Lookup, ReadCache};
use self::schema::{FENCES, OBJECTS, db_err, decode_fence};
use super::{Engine, ReadResult, StorageError, ValidWrite, WriteOutcome};
use ::redb::ReadableDatabase;
use fencing_runtime::{Fence, Guard, Policy, Verifier};
use futures::future::BoxFuture;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// How the embedded store uses its disk.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bytes kept allocated beside the store and given back on a full disk (0: none; see `lifecycle.rs`).
    pub space_reserve: u64,
    /// Most bytes in all, objects, names and fences (`--max-store-bytes`): a
    /// write that would grow past it gets 507 `quota_exceeded`; writes that
    /// shrink the store are always decided.
    pub max_bytes: Option<u64>,
    /// Signed writes (`--verify-keys`): every write's proof is checked with
    /// these keys before its fence (`None`: unsigned writes).
    pub verifier: Option<Arc<Verifier>>,
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions { space_reserve: DEFAULT_SPACE_RESERVE, max_bytes: None, verifier: None }
    }
}

/// A redb file holding every resource, committed by one leader at a time (`group.rs`).
pub struct RedbEngine {
    view: Arc<StoreView>,
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
        let (store, view) = StoreKeeper::open(dir, options.space_reserve)?;
        let max_advance = Arc::new(AtomicU64::new(u64::MAX));
        let cache = Arc::new(ReadCache::default());
        let rules = WriteRules {
            guard,
            policy,
            max_advance: max_advance.clone(),
            quota: options.max_bytes,
            verifier: options.verifier,
            cache: cache.clone(),
        };
        let (group, background) =
            Group::start("fencing-redb-commit", Committer::new(store, rules)).map_err(StorageError::backend)?;
        Ok(RedbEngine { view, cache, group, background: Mutex::new(Some(background)), max_advance })
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
    /// taking the database from the view (a reopen waits for readers of it).
    fn settle_for_read(view: &StoreView, group: &Group<Committer>) -> Result<(), StorageError> {
        if view.uncommitted() { group.between_units(Committer::settle) } else { Ok(()) }
    }

    fn read_fence(view: &StoreView, resource_id: &str) -> Result<Option<Fence>, StorageError> {
        let db = view.get()?;
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

impl Engine for RedbEngine {
    fn name(&self) -> &'static str {
        "redb"
    }

    fn stored_bytes(&self) -> Option<u64> {
        Some(self.view.stored_bytes())
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
            self.view.note_read();
            // Taken before the read transaction begins (see `read_cache.rs`).
            let load = loop {
                match self.cache.lookup(resource_id, file_path) {
                    Lookup::Shared(bytes, fence) => return Ok(ReadResult { bytes: Some(bytes), fence }),
                    Lookup::Wait(other_reader) => other_reader.await,
                    Lookup::Load(load) => break load,
                }
            };
            let (view, group) = (self.view.clone(), self.group.clone());
            let (resource, path) = (resource_id.to_owned(), file_path.to_owned());
            let (bytes, fence) = tokio::task::spawn_blocking(move || {
                RedbEngine::settle_for_read(&view, &group)?;
                let db = view.get()?;
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
            self.view.note_read();
            if self.view.uncommitted() {
                let (view, group) = (self.view.clone(), self.group.clone());
                tokio::task::spawn_blocking(move || RedbEngine::settle_for_read(&view, &group))
                    .await
                    .map_err(StorageError::backend)??;
            }
            RedbEngine::read_fence(&self.view, resource_id)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Mutation, WriteRequest};
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
            proof: None,
        };
        req.validate().expect("a valid write")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_wait_uncommitted_only_while_nobody_reads() {
        let dir = tempfile::tempdir().unwrap();
        let engine = RedbEngine::open(dir.path(), Arc::new(NativeGuard), Policy::NonDecreasing).unwrap();
        engine.write(put("a", 1)).await.unwrap();
        engine.write(put("a", 2)).await.unwrap();
        assert!(engine.view.uncommitted(), "with nobody reading, answered batches wait in the open transaction");

        let read = engine.read("a", "/f").await.unwrap();
        assert_eq!(read.bytes.as_deref(), Some(&[2u8][..]), "a read commits them first");
        assert!(!engine.view.uncommitted());

        engine.write(put("a", 3)).await.unwrap();
        assert!(!engine.view.uncommitted(), "once someone reads, a batch is committed before it is answered");
        assert_eq!(engine.fence("a").await.unwrap().map(|f| f.high_water), Some(3));

        // No read since the last batch: the next ones wait again.
        engine.write(put("a", 4)).await.unwrap();
        engine.write(put("a", 5)).await.unwrap();
        assert!(engine.view.uncommitted());
        assert_eq!(engine.fence("a").await.unwrap().map(|f| f.high_water), Some(5));
    }
}
