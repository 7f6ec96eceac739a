//! Names and bounds of lock requests, checked once: the HTTP API and the CLI
//! build a [`ValidAcquire`], which is what a lock service takes.

use super::LockError;
use fencing_api::wire::locks::{AcquireRequest, LeaseRef};

/// Longest accepted `resource_id` / `client_id`, in characters.
pub use fencing_api::wire::names::MAX_NAME_CHARS;
/// Shortest accepted lease.
pub const MIN_LEASE_MS: u64 = 10;
/// Longest accepted lease (one hour).
pub const MAX_LEASE_MS: u64 = 3_600_000;
/// Longest accepted `wait_ms`.
pub const MAX_WAIT_MS: u64 = 300_000;

/// Checks a lock or client name by the rule both APIs share
/// ([`fencing_api::wire::names::name_problem`]): 1..=256 characters, no control
/// characters, no leading or trailing whitespace.
pub fn validate_name(field: &'static str, value: &str) -> Result<(), LockError> {
    match fencing_api::wire::names::name_problem(value) {
        Some(problem) => Err(LockError::invalid(field, problem)),
        None => Ok(()),
    }
}

/// An [`AcquireRequest`] whose names and bounds passed [`validate_acquire`]:
/// the only form a [`LockService`](super::LockService) takes, so no backend validates again.
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
    if let Some(t) = &req.lock_token
        && super::lease::parse_lease_id(t).is_none()
    {
        return Err(LockError::invalid("lock_token", "must be 32 lowercase hex digits"));
    }
    Ok(())
}

/// Checks a lease reference and decodes its 128-bit lease id.
pub fn validate_lease(lease: &LeaseRef) -> Result<u128, LockError> {
    validate_name("resource_id", &lease.resource_id)?;
    super::lease::parse_lease_id(&lease.lock_token)
        .ok_or_else(|| LockError::invalid("lock_token", "must be 32 lowercase hex digits"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let mut req = AcquireRequest {
            resource_id: "r".into(),
            client_id: "c".into(),
            lease_duration_ms: 5,
            wait_ms: None,
            lock_token: None,
        };
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "lease_duration_ms", .. })));
        req.lease_duration_ms = 1000;
        req.resource_id = "x".repeat(MAX_NAME_CHARS + 1);
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "resource_id", .. })));
        req.resource_id = "r".into();
        req.client_id = String::new();
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "client_id", .. })));
        req.client_id = "c".into();
        req.wait_ms = Some(MAX_WAIT_MS + 1);
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "wait_ms", .. })));
        req.wait_ms = None;
        req.lock_token = Some("c1".into());
        assert!(matches!(validate_acquire(&req), Err(LockError::Invalid { field: "lock_token", .. })));
    }
}
