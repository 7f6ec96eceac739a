//! The lock service: leases that carry fencing tokens.
//!
//! [`LockService`] is the one interface the HTTP API (`fencing-server`), the
//! CLI and the tests use; [`EmbeddedLocks`] (the default, one process, state
//! in memory plus a durable generation clock and lease journal) and
//! [`EtcdLocks`] implement it.
//!
//! Invariants every implementation keeps:
//! - a grant's `fencing_token` is strictly greater than every token ever
//!   issued for that lock, including across crashes and restarts;
//! - at most one unexpired lease per lock, with expiry measured on a
//!   monotonic clock (never wall time);
//! - a lease id (`lock_token`) is 128 random bits, the only capability that
//!   renews or releases the lease.
//!
//! # Layout
//! - `embedded/`: the service: `mod.rs` its settings, opening and
//!   invariants; `state.rs` what its handles share and how a grant changes
//!   it; `acquire.rs` the acquisition loop and its wait queue; `lease_ops.rs`
//!   renew, release and status.
//! - `table.rs`: its shards (expiry heap, idle list).
//! - `journal/`: leases made durable.
//! - `clock.rs`: the token ceiling.
//! - `offline.rs`: what operators do on a stopped service's directory
//!   (recover a lost journal, the tokens still to be handed out).
//! - `etcd.rs`: [`EtcdLocks`].
//! - `lease.rs`: lease ids; `validate.rs`: requests into [`ValidAcquire`];
//!   `metrics.rs`: [`LockMetrics`].
//!
//! What this crate shares with the fenced store (`fencing-store`), the
//! record files of its journal and the metrics registry, is
//! `fencing-base`'s, imported here as `records` and `telemetry`: the lock
//! service and the store stand side by side, neither depends on the other.
//! The crate knows nothing of HTTP; `fencing-server` serves it.

mod clock;
mod embedded;
mod etcd;
mod journal;
mod lease;
mod metrics;
mod offline;
mod table;
mod validate;

use fencing_base::{records, secrets, telemetry};

pub use clock::{Bump, CLOCK_FILE, ClockError, ClockState, GenerationClock, bump, recreate as recreate_clock};
pub use embedded::{DEFAULT_MAX_HELD, EmbeddedConfig, EmbeddedLocks, OpenError, TokenMode};
pub use etcd::EtcdLocks;
pub use journal::JOURNAL_FILE;
pub use lease::{LeaseStamp, format_lease_id, new_lease_id, parse_lease_id, rfc3339_now};
pub use metrics::LockMetrics;
pub use offline::{LockTokens, RecoverError, Recovered, lock_tokens, recover_leases, replace_leases};
pub use validate::{MAX_LEASE_MS, MAX_NAME_CHARS, MAX_WAIT_MS, MIN_LEASE_MS};
pub use validate::{ValidAcquire, validate_acquire, validate_lease, validate_name};

pub use fencing_api::wire::locks::Acquired;
use fencing_api::wire::locks::{LeaseRef, Released, Renewed, Status};

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so that [`LockService`] can be used as `Arc<dyn LockService>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why a lock operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    /// A request field is malformed or out of range.
    #[error("{field}: {message}")]
    Invalid { field: &'static str, message: String },
    /// The lease id is not the current lease of this lock (never was, or was superseded).
    #[error("lock_token is not the current lease of this lock")]
    WrongLease,
    /// The lease id was the lock's lease but it has expired.
    #[error("the lease has expired")]
    LeaseExpired,
    /// The lock table holds its maximum of leases.
    #[error("the lock service holds its maximum of {limit} leases; retry later")]
    AtCapacity { limit: usize },
    /// The backend cannot serve the request now (persistence or etcd failure).
    #[error("lock backend unavailable: {0}")]
    Unavailable(String),
}

impl LockError {
    pub(crate) fn invalid(field: &'static str, message: impl Into<String>) -> LockError {
        LockError::Invalid { field, message: message.into() }
    }
}

/// A lock backend. Cheap to share as `Arc<dyn LockService>`.
pub trait LockService: Send + Sync + 'static {
    /// Grants the lock, or reports it held; with `wait_ms`, waits (FIFO on the embedded backend).
    fn acquire(&self, req: ValidAcquire) -> BoxFuture<'_, Result<Acquired, LockError>>;
    /// Extends the lease by its duration, from now.
    fn renew(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Renewed, LockError>>;
    /// Frees the lock if `lease` is its current, unexpired lease.
    fn release(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Released, LockError>>;
    /// Who holds the lock, with which token, for how much longer.
    fn status(&self, resource_id: String) -> BoxFuture<'_, Result<Status, LockError>>;
    /// A short name for logs and metrics labels (`embedded`, `etcd`).
    fn backend(&self) -> &'static str;
}
