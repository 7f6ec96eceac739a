//! The lock service: leases that carry fencing tokens.
//!
//! [`LockService`] is the one interface the HTTP API, the CLI and the tests
//! use; [`EmbeddedLocks`] (the default, one process, state in memory plus a
//! durable generation clock) and [`EtcdLocks`] implement it.
//!
//! Invariants every implementation keeps:
//! - a grant's `fencing_token` is strictly greater than every token ever
//!   issued for that lock, including across crashes and restarts;
//! - at most one unexpired lease per lock, with expiry measured on a
//!   monotonic clock (never wall time);
//! - a lease id (`lock_token`) is 128 random bits, the only capability that
//!   renews or releases the lease.

mod clock;
mod embedded;
mod etcd;
mod metrics;

pub use clock::{ClockError, ClockState, GenerationClock};
pub use embedded::{EmbeddedConfig, EmbeddedLocks, TokenMode};
pub use etcd::EtcdLocks;
pub use metrics::LockMetrics;

use crate::wire::locks::{AcquireRequest, Grant, LeaseRef, Refusal, Released, Renewed, Status};

use std::future::Future;
use std::pin::Pin;
use std::time::SystemTime;

/// Longest accepted `resource_id` / `client_id`, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Shortest accepted lease.
pub const MIN_LEASE_MS: u64 = 10;
/// Longest accepted lease (one hour); also bounds the post-crash grace period.
pub const MAX_LEASE_MS: u64 = 3_600_000;
/// Longest accepted `wait_ms`.
pub const MAX_WAIT_MS: u64 = 300_000;

/// A boxed future, so that [`LockService`] can be used as `Arc<dyn LockService>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What `acquire` returns when nothing went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    Granted(Grant),
    Refused(Refusal),
}

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
    /// The backend cannot serve the request now (persistence or etcd failure).
    #[error("lock backend unavailable: {0}")]
    Unavailable(String),
}

impl LockError {
    fn invalid(field: &'static str, message: impl Into<String>) -> LockError {
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

/// Checks a lock or client name: 1..=256 bytes, no control characters.
pub fn validate_name(field: &'static str, value: &str) -> Result<(), LockError> {
    if value.is_empty() {
        return Err(LockError::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_NAME_BYTES {
        return Err(LockError::invalid(field, format!("must be at most {MAX_NAME_BYTES} bytes")));
    }
    if value.chars().any(char::is_control) {
        return Err(LockError::invalid(field, "must not contain control characters"));
    }
    Ok(())
}

/// An [`AcquireRequest`] whose names and bounds passed [`validate_acquire`]:
/// the only form a [`LockService`] takes, so no backend validates again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidAcquire(AcquireRequest);

impl ValidAcquire {
    /// Validates `req`; the error names the offending field.
    pub fn new(req: AcquireRequest) -> Result<ValidAcquire, LockError> {
        validate_acquire(&req)?;
        Ok(ValidAcquire(req))
    }

    /// The request itself.
    pub fn into_inner(self) -> AcquireRequest {
        self.0
    }
}

impl std::ops::Deref for ValidAcquire {
    type Target = AcquireRequest;

    fn deref(&self) -> &AcquireRequest {
        &self.0
    }
}

/// Checks an acquisition request's fields and bounds.
pub fn validate_acquire(req: &AcquireRequest) -> Result<(), LockError> {
    validate_name("resource_id", &req.resource_id)?;
    validate_name("client_id", &req.client_id)?;
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&req.lease_duration_ms) {
        return Err(LockError::invalid(
            "lease_duration_ms",
            format!("must be between {MIN_LEASE_MS} and {MAX_LEASE_MS}"),
        ));
    }
    if let Some(w) = req.wait_ms
        && w > MAX_WAIT_MS
    {
        return Err(LockError::invalid("wait_ms", format!("must be at most {MAX_WAIT_MS}")));
    }
    Ok(())
}

/// Checks a lease reference and decodes its 128-bit lease id.
pub fn validate_lease(lease: &LeaseRef) -> Result<u128, LockError> {
    validate_name("resource_id", &lease.resource_id)?;
    parse_lease_id(&lease.lock_token).ok_or_else(|| LockError::invalid("lock_token", "must be 32 lowercase hex digits"))
}

/// A fresh lease id: 128 bits from the operating system's CSPRNG-seeded generator.
pub fn new_lease_id() -> u128 {
    rand::random::<u128>()
}

/// The wire form of a lease id: 32 lowercase hex digits.
pub fn format_lease_id(id: u128) -> String {
    format!("{id:032x}")
}

/// Parses the wire form of a lease id.
pub fn parse_lease_id(s: &str) -> Option<u128> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    u128::from_str_radix(s, 16).ok()
}

/// RFC 3339 UTC with milliseconds (`2026-05-23T10:00:00.123Z`).
pub fn rfc3339_now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ids_round_trip_and_reject_junk() {
        let id = new_lease_id();
        assert_eq!(parse_lease_id(&format_lease_id(id)), Some(id));
        assert_eq!(parse_lease_id("ABCDEF0123456789abcdef0123456789"), None);
        assert_eq!(parse_lease_id("abc"), None);
        assert_ne!(new_lease_id(), new_lease_id());
    }

    #[test]
    fn validation_names_the_field() {
        let mut req =
            AcquireRequest { resource_id: "r".into(), client_id: "c".into(), lease_duration_ms: 5, wait_ms: None };
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "lease_duration_ms", .. })));
        req.lease_duration_ms = 1000;
        req.resource_id = "x".repeat(MAX_NAME_BYTES + 1);
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "resource_id", .. })));
        req.resource_id = "r".into();
        req.client_id = String::new();
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "client_id", .. })));
        req.client_id = "c".into();
        req.wait_ms = Some(MAX_WAIT_MS + 1);
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "wait_ms", .. })));
        assert!(rfc3339_now().ends_with('Z'));
    }
}
