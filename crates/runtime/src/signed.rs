//! Tokens and sequences are `u64` in the contract. A host whose integers are
//! signed 64-bit (SQL's `bigint`, SQLite's `INTEGER`, Java's `long`) carries
//! 0 to 2^63-1 and refuses the rest, never reinterpreting a value: this is
//! that rule, written once for every such host.
//!
//! ```
//! use fencing_runtime::signed::{self, OutOfRange};
//!
//! assert_eq!(signed::to_u64(34), Ok(34));
//! assert_eq!(signed::to_u64(-1), Err(OutOfRange::Negative(-1)));
//! assert_eq!(signed::to_i64(u64::MAX), Err(OutOfRange::TooLarge(u64::MAX)));
//! ```

/// The largest token or sequence a signed 64-bit host carries: 2^63-1.
pub const MAX: u64 = i64::MAX as u64;

/// Why a value cannot cross between the contract's `u64` and a signed 64-bit integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutOfRange {
    /// A negative integer: tokens and sequences are 0 or more.
    #[error("{0} is negative: tokens and sequences are 0 or more")]
    Negative(i64),
    /// A token or sequence above 2^63-1, which a signed 64-bit integer cannot hold.
    #[error("{0} is above 9223372036854775807 (2^63-1), the largest a signed 64-bit integer holds")]
    TooLarge(u64),
}

/// A signed integer from the host as a token or sequence.
pub fn to_u64(value: i64) -> Result<u64, OutOfRange> {
    u64::try_from(value).map_err(|_| OutOfRange::Negative(value))
}

/// A token or sequence as the host's signed integer.
pub fn to_i64(value: u64) -> Result<i64, OutOfRange> {
    i64::try_from(value).map_err(|_| OutOfRange::TooLarge(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_edges_cross_or_are_refused() {
        assert_eq!(to_u64(0), Ok(0));
        assert_eq!(to_u64(i64::MAX), Ok(MAX));
        assert_eq!(to_u64(i64::MIN), Err(OutOfRange::Negative(i64::MIN)));
        assert_eq!(to_i64(MAX), Ok(i64::MAX));
        assert_eq!(to_i64(MAX + 1), Err(OutOfRange::TooLarge(MAX + 1)));
        assert_eq!(OutOfRange::Negative(-1).to_string(), "-1 is negative: tokens and sequences are 0 or more");
    }
}
