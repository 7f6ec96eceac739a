//! Lease ids and grant times: what a grant hands the holder besides its token.
//!
//! Invariant: a lease id is 128 bits from the operating system's
//! CSPRNG-seeded generator and the only capability that renews or releases
//! its lease; on the wire it is exactly 32 lowercase hex digits.

use std::time::SystemTime;

/// A new lease as a grant reports it: its id, the id's wire form and the
/// grant's time, made in one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseStamp {
    /// The lease id.
    pub id: u128,
    /// [`format_lease_id`] of `id`: the grant's `lock_token`.
    pub lock_token: String,
    /// [`rfc3339_now`] at the grant: the grant's `acquired_at`.
    pub acquired_at: String,
}

impl LeaseStamp {
    /// A fresh lease id, stamped now.
    pub fn new() -> LeaseStamp {
        LeaseStamp::of(new_lease_id())
    }

    /// An existing lease id (a re-entrant grant), stamped now.
    pub fn of(id: u128) -> LeaseStamp {
        LeaseStamp { id, lock_token: format_lease_id(id), acquired_at: rfc3339_now() }
    }
}

impl Default for LeaseStamp {
    fn default() -> Self {
        LeaseStamp::new()
    }
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
        assert!(rfc3339_now().ends_with('Z'));
    }
}
