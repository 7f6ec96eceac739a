//! The lock API's bodies: `POST /v1/locks/acquire|renew|release` and
//! `GET /v1/locks/status`. The lock service takes and returns these types, so
//! what the server answers is what the service decided, field for field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `POST /v1/locks/acquire` body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireRequest {
    /// The lock: 1 to 256 characters, no control characters, no surrounding whitespace.
    pub resource_id: String,
    /// Who asks (shown in status; never a capability).
    pub client_id: String,
    /// 10 to 3,600,000.
    #[schema(minimum = 10, maximum = 3_600_000)]
    #[serde(deserialize_with = "super::number::u64_integral")]
    pub lease_duration_ms: u64,
    /// Wait up to this long (at most 300,000 ms) for a held lock, in arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::number::opt_u64_integral")]
    #[schema(maximum = 300_000)]
    pub wait_ms: Option<u64>,
    /// Re-entry (servers started with `--reentrant`): the `lock_token` of the
    /// lease this caller holds; a match returns the same lease and token with
    /// the new duration. Without it, a held lock is refused to everyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub lock_token: Option<String>,
}

/// `POST /v1/locks/renew` and `/release` body.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRef {
    pub resource_id: String,
    /// The lease id from the grant (32 lowercase hex digits).
    #[schema(pattern = "^[0-9a-f]{32}$")]
    pub lock_token: String,
}

/// A granted lease: the acquisition response of the lock API.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Grant {
    pub resource_id: String,
    pub lock_acquired: bool,
    pub lock_token: String,
    pub fencing_token: u64,
    pub lease_duration_ms: u64,
    /// RFC 3339 UTC with milliseconds, for humans and logs only: expiry uses a monotonic clock.
    pub acquired_at: String,
    /// With signing on (`--signing-key`): the lock service's proof that it
    /// granted `fencing_token` for this lock (hex), to send with every write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_proof: Option<String>,
}

/// Why an acquisition was refused.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HeldReason {
    /// Another client holds an unexpired lease.
    Held,
    /// The service restarted on a data directory without a lease journal and
    /// waits out leases that may have been granted before the restart.
    GracePeriod,
}

/// The 409 answer to an acquisition: the lock is held, and for how much longer at most.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Refusal {
    pub resource_id: String,
    pub lock_acquired: bool,
    pub reason: HeldReason,
    /// Upper bound on the time until the lock can be granted, unless renewed.
    pub remaining_lease_ms: u64,
}

/// A successful renewal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Renewed {
    pub resource_id: String,
    pub renewed: bool,
    pub fencing_token: u64,
    pub lease_duration_ms: u64,
    /// With signing on: the grant's proof again (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_proof: Option<String>,
}

/// A successful release.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Released {
    pub resource_id: String,
    pub released: bool,
    pub fencing_token: u64,
}

/// `GET /v1/locks/status`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Status {
    pub resource_id: String,
    pub held: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ms: Option<u64>,
    /// Waiters queued on this lock (embedded backend; 0 where unknown).
    pub waiters: u64,
}

/// What `acquire` returns when nothing went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    Granted(Grant),
    Refused(Refusal),
}
