//! The fenced storage engine.
//!
//! A *resource* is a bucket-like id (`storage:customer-orders-bucket`) holding
//! objects by `file_path` and exactly one [`Fence`]. A write reads the fence,
//! asks the [`Guard`], and on admission applies the
//! mutation and persists the new fence in the same transaction.
//!
//! Invariants every [`Engine`] upholds:
//! - nothing interleaves between the fence check and the write for one resource;
//! - a rejected (or failed) write changes nothing;
//! - an acknowledged write and its fence are durable (fsynced) before the ack;
//! - a resource's high-water mark never goes backwards.
//!
//! # Layout
//! - `lib.rs` (here): [`Engine`], the requests and outcomes, and `decide`,
//!   the guard's decision every engine makes inside its write.
//! - `validate.rs`: names, paths and sizes, a [`WriteRequest`] into the
//!   [`ValidWrite`] an engine takes.
//! - `redb/`: the embedded engine, [`RedbEngine`], and only it: `mod.rs`
//!   the engine and the invariants of its write path; `group.rs` who
//!   commits (one leader at a time, a lone writer on its own thread);
//!   `committer.rs` one batch in redb's write transaction; `wal.rs` the
//!   write-ahead log; `schema.rs` the tables and how a logged write is
//!   applied; `lifecycle.rs` opening, reopening after a failed write and the
//!   space reserve; `read_cache.rs` objects being read, shared by their
//!   readers; `retire.rs` retiring empty fences into their locks' floors
//!   and folding floors (`fencing admin retire-fences`, `drop-floors`).
//! - `postgres.rs` and `pg_extension.rs`: [`PostgresEngine`], the fence
//!   checked by the server or by the `fencing` extension inside PostgreSQL.
//! - `service.rs`: [`StorageService`], an engine timed and counted;
//!   `telemetry.rs`: [`StorageMetrics`].
//!
//! The record files of the write-ahead log, the metrics registry and the
//! full-disk test are `fencing-base`'s, shared with the lock service
//! (`fencing-locks`): the two stand side by side and neither depends on the
//! other. The crate knows nothing of HTTP; `fencing-server` serves it.

mod pg_extension;
mod postgres;
mod redb;
mod service;
mod telemetry;
mod validate;

pub use self::postgres::{POOL_SIZE as POSTGRES_POOL_SIZE, PgGuard, PostgresEngine};
pub use self::redb::{DEFAULT_SPACE_RESERVE, RESERVE_FILE, compact};
pub use self::redb::{DroppedFloors, Retired, drop_floors_below, retire_empty_fences};
pub use self::redb::{RedbEngine, StoreOptions};
pub use service::StorageService;
pub use telemetry::{FlapConfig, StorageMetrics};
pub use validate::{
    MAX_FILE_PATH_CHARS, MAX_LOCK_ID_CHARS, MAX_OBJECT_BYTES, MAX_RESOURCE_ID_CHARS, PATH_SEGMENTS_PATTERN,
};
pub use validate::{ValidWrite, validate_file_path, validate_lock_id, validate_resource_id};

use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Admission, Fence, Guard, GuardFailure, Policy, Rejection, Sequencer, Verifier};
use futures::future::BoxFuture;

pub use fencing_api::wire::storage::Mutation;

/// One fenced write as a client asked for it. [`WriteRequest::validate`]
/// (`validate.rs`) turns it into the [`ValidWrite`] an [`Engine`] takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRequest {
    pub resource_id: String,
    /// The lock the token belongs to (defaults to the resource id at the API).
    pub lock_id: String,
    pub token: u64,
    pub sequence: Option<u64>,
    pub file_path: String,
    pub mutation: Mutation,
    pub bytes: Vec<u8>,
    /// The lock service's proof that it granted `token` for `lock_id`
    /// (`fencing_runtime::proof`); what an engine with a verifier checks.
    pub proof: Option<Vec<u8>>,
}

/// The result of a write the engine could decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Applied and durable; the fence now holds `high_water`/`sequence`.
    Admitted { high_water: u64, sequence: Option<u64>, new_term: bool },
    /// Refused by the guard; `fence` is the unchanged fence (evidence).
    Rejected { rejection: Rejection, fence: Option<Fence> },
    /// Signed writes only: the proof does not show that the lock service
    /// granted the token for the lock, so the fence was not consulted.
    ProofRefused { rejection: ProofRejection, fence: Option<Fence> },
    /// The guard could not decide; the write was refused (fail closed).
    GuardFailed { failure: GuardFailure, fence: Option<Fence> },
    /// The token is more than `max_advance` above the fence's high-water mark,
    /// or above `max_advance` itself for a resource with no fence
    /// (`--max-token-advance`); refused before the guard was asked.
    TooFarAhead { max_advance: u64, fence: Option<Fence> },
}

/// An object and the fence of its resource at the time of the read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// `None` when the object does not exist. Shared with concurrent readers
    /// of the same object where the engine can (`read_cache.rs`).
    pub bytes: Option<bytes::Bytes>,
    pub fence: Option<Fence>,
}

/// Why an engine call failed (not a fence rejection: those are [`WriteOutcome`]s).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// A name is empty, too long, or contains forbidden characters.
    #[error("{field}: {message}")]
    InvalidField { field: &'static str, message: String },
    /// The object would exceed the size limit; nothing was changed.
    #[error("object would be {size} bytes, over the {limit}-byte limit")]
    TooLarge { size: usize, limit: usize },
    /// The backing store failed; the write may not have been applied and was not acknowledged.
    #[error("store failure: {0}")]
    Backend(String),
    /// The engine is shutting down.
    #[error("storage engine is closed")]
    Closed,
    /// The disk (or the database's disk) is full, or the store's quota is
    /// reached; nothing of the write was applied. Writes succeed again once
    /// space is freed, without a restart.
    #[error("no space for the write: {0}")]
    NoSpace(String),
    /// The write would take the store past `--max-store-bytes` (objects,
    /// their names and paths, and fences all count); nothing was applied.
    /// Writes that shrink the store are always decided.
    #[error(
        "the store holds {used} bytes of objects, names and fences; this write would pass its quota of {quota} bytes"
    )]
    QuotaExceeded { used: u64, quota: u64 },
    /// The store is reopening after a failed write and cannot answer for a
    /// moment; nothing was changed.
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
}

impl StorageError {
    pub(crate) fn backend(e: impl std::fmt::Display) -> StorageError {
        StorageError::Backend(e.to_string())
    }

    /// An I/O failure: [`StorageError::NoSpace`] when the disk or a quota is
    /// full (`ENOSPC`, `EDQUOT`), [`StorageError::Backend`] otherwise.
    pub(crate) fn io(context: &str, e: &std::io::Error) -> StorageError {
        if fencing_base::is_out_of_space(e) {
            StorageError::NoSpace(format!("{context}: {e}"))
        } else {
            StorageError::Backend(format!("{context}: {e}"))
        }
    }
}

/// A fenced store. Implementations decide every write with the guard they were built with.
pub trait Engine: Send + Sync {
    /// A short name for logs and metrics (`redb`, `postgres`).
    fn name(&self) -> &'static str;

    /// Decides and (on admission) applies one write; returns after it is durable.
    fn write(&self, req: ValidWrite) -> BoxFuture<'_, Result<WriteOutcome, StorageError>>;

    /// Reads one object and the resource's fence.
    fn read<'a>(&'a self, resource_id: &'a str, file_path: &'a str) -> BoxFuture<'a, Result<ReadResult, StorageError>>;

    /// The bytes of all objects, where the engine keeps count.
    fn stored_bytes(&self) -> Option<u64> {
        None
    }

    /// The resource's fence (`None`: no write was ever admitted).
    fn fence<'a>(&'a self, resource_id: &'a str) -> BoxFuture<'a, Result<Option<Fence>, StorageError>>;

    /// An operator's reset: replaces the resource's fence with `to` (`None`
    /// removes it, so the next write is a first write), serialized with the
    /// resource's writes, durable before it returns. Returns the fence it
    /// replaced. `reason` is for engines that keep their own record of resets.
    fn reset_fence<'a>(
        &'a self,
        resource_id: &'a str,
        to: Option<Fence>,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<Option<Fence>, StorageError>>;
}

/// Asks `guard` about `req` against the resource's `current` fence, with
/// `verifier`'s keys when writes are signed: the admission, or the refusal to
/// report (with a verifier, a proof that does not hold; a token more than `max_advance` above the high-water mark; a
/// rejection or a guard failure; each with `current` as evidence), after
/// which the engine must change nothing.
pub(crate) fn decide(
    guard: &dyn Guard,
    policy: Policy,
    verifier: Option<&Verifier>,
    max_advance: u64,
    current: Option<Fence>,
    req: &WriteRequest,
) -> Result<Admission, WriteOutcome> {
    if verifier.is_none() && too_far_ahead(req.token, current.as_ref(), max_advance) {
        return Err(WriteOutcome::TooFarAhead { max_advance, fence: current });
    }
    let presented = Sequencer { lock: req.lock_id.clone(), token: req.token, sequence: req.sequence };
    let proof = req.proof.as_deref().unwrap_or_default();
    let decision = guard.admit_with_keys(verifier, current.as_ref(), &presented, proof, policy);
    match decision {
        Err(failure) => Err(WriteOutcome::GuardFailed { failure, fence: current }),
        Ok(Err(SignedRejection::Proof(rejection))) => Err(WriteOutcome::ProofRefused { rejection, fence: current }),
        // Signed writes are bounded after the proof, so a forged token is named as forged.
        _ if too_far_ahead(req.token, current.as_ref(), max_advance) => {
            Err(WriteOutcome::TooFarAhead { max_advance, fence: current })
        }
        Ok(Err(SignedRejection::Fence(rejection))) => Err(WriteOutcome::Rejected { rejection, fence: current }),
        Ok(Ok(admission)) => Ok(admission),
    }
}

/// `--max-token-advance` when none is given: far above how far tokens move
/// between two writes of one resource (each restart of the embedded lock
/// service moves them by at most 2^20; etcd revisions grow by one per
/// change), far below 2^64-1.
pub const DEFAULT_MAX_TOKEN_ADVANCE: u64 = 1 << 40;

/// Whether `token` is more than `max_advance` above `fence`'s high-water mark;
/// a resource with no fence counts as a mark of 0, so its first write is
/// bounded too (one runaway first token would otherwise brick it).
pub(crate) fn too_far_ahead(token: u64, fence: Option<&Fence>, max_advance: u64) -> bool {
    token > fence.map_or(0, |f| f.high_water).saturating_add(max_advance)
}

impl From<Admission> for WriteOutcome {
    fn from(a: Admission) -> WriteOutcome {
        WriteOutcome::Admitted { high_water: a.high_water, sequence: a.sequence, new_term: a.new_term }
    }
}
