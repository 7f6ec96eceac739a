//! What a host accepts around the rules: the text and integers a host takes
//! from its callers before anything reaches [`crate::rules`], written once.
//!
//! The contract takes any string as a lock name and any `u64` as a token;
//! the hosts (the HTTP API, the PostgreSQL, SQLite, MariaDB and Redis
//! extensions, the C API and the language packages) take text from people
//! and programs, and must agree on what is a name, a policy, a token and a
//! proof. Each rule is a pure function here; `tests/vectors/arguments/`
//! holds the shared argument vectors every host runs through its own entry
//! points, as the decision vectors are run.
//!
//! Invariants:
//! - a **name** (resource, lock, client or holder id) is 1 to
//!   [`MAX_NAME_CHARS`] characters of UTF-8 (Unicode scalar values, as JSON
//!   Schema's `maxLength` counts them, so at most 1,024 bytes) with no
//!   control character (Unicode `Cc`: U+0000-U+001F, U+007F-U+009F; NUL is
//!   refused, never truncated at) and no whitespace at either end. Names are
//!   compared byte for byte: nothing normalizes or folds case;
//! - a **policy** is spelled exactly as in the contract: `non-decreasing` or
//!   `strictly-increasing` (no other case, no underscores);
//! - a **token or sequence as text** is its canonical decimal form: ASCII
//!   digits only, no sign, spaces or leading zero (`0` itself aside), at most
//!   2^64-1. One number has one text, so a name or log line that carries it
//!   never has two spellings;
//! - a **token or sequence as a signed 64-bit integer** (SQL's `bigint`,
//!   SQLite's `INTEGER`, Java's `long`) is 0 to 2^63-1; a negative value is
//!   refused, never reinterpreted, and a `u64` above 2^63-1 cannot be handed
//!   back to such a host;
//! - a **proof as text** is hex, two digits a byte (either case), at most
//!   [`MAX_PROOF_HEX`] digits (a proof is 37 or 69 bytes); the empty text is
//!   the empty proof (a missing proof, which the rules refuse by its reason).
//!
//! Every refusal has a stable [`code`](NameError::code) (`name_control`,
//! `token_not_decimal`, ...) that the vectors name and every host's error
//! text carries, so a refusal reads the same in every host.

use alloc::vec::Vec;
use core::fmt;

use crate::rules::Policy;

/// Longest name, in characters (Unicode scalar values).
pub const MAX_NAME_CHARS: usize = 256;

/// Longest proof taken as text, in hex digits (a proof is 37 or 69 bytes).
pub const MAX_PROOF_HEX: usize = 512;

/// The largest token or sequence a signed 64-bit host carries: 2^63-1.
pub const MAX_SIGNED: u64 = i64::MAX as u64;

/// Why some text is not a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// The empty text.
    Empty,
    /// Longer than [`MAX_NAME_CHARS`] characters.
    TooLong {
        /// Its length in characters (in bytes when longer than any name could be).
        chars: usize,
    },
    /// Bytes that are not UTF-8.
    NotUtf8,
    /// A control character (NUL included).
    Control {
        /// The first control character.
        found: char,
    },
    /// Whitespace at the start or the end.
    Whitespace,
}

impl NameError {
    /// The stable code of this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            NameError::Empty => "name_empty",
            NameError::TooLong { .. } => "name_too_long",
            NameError::NotUtf8 => "name_not_utf8",
            NameError::Control { .. } => "name_control",
            NameError::Whitespace => "name_whitespace",
        }
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Empty => f.write_str("must not be empty")?,
            NameError::TooLong { chars } => {
                write!(f, "is {chars} characters, longer than {MAX_NAME_CHARS}")?;
            }
            NameError::NotUtf8 => f.write_str("is not UTF-8 text")?,
            NameError::Control { found } => {
                write!(f, "contains control character U+{:04X}", *found as u32)?;
            }
            NameError::Whitespace => f.write_str("must not begin or end with whitespace")?,
        }
        write!(f, " ({})", self.code())
    }
}

/// `text` as a name, or why not.
pub fn name(text: &str) -> Result<&str, NameError> {
    if text.is_empty() {
        return Err(NameError::Empty);
    }
    // Four bytes a character at most: a longer text cannot be a name, and
    // its characters need not be counted.
    if text.len() > 4 * MAX_NAME_CHARS {
        return Err(NameError::TooLong { chars: text.chars().count() });
    }
    let chars = text.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(NameError::TooLong { chars });
    }
    if let Some(found) = text.chars().find(|c| c.is_control()) {
        return Err(NameError::Control { found });
    }
    if text.trim() != text {
        return Err(NameError::Whitespace);
    }
    Ok(text)
}

/// `bytes` (a binary-safe host's argument) as a name, or why not.
pub fn name_bytes(bytes: &[u8]) -> Result<&str, NameError> {
    if bytes.len() > 4 * MAX_NAME_CHARS {
        // Not decoded: its length in bytes is reported.
        return Err(NameError::TooLong { chars: bytes.len() });
    }
    name(core::str::from_utf8(bytes).map_err(|_| NameError::NotUtf8)?)
}

/// Why some text is not a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyError;

impl PolicyError {
    /// The stable code of this refusal.
    pub fn code(&self) -> &'static str {
        "policy_unknown"
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "must be non-decreasing or strictly-increasing ({})", self.code())
    }
}

/// `text` as a policy: its contract name, spelled exactly.
pub fn policy(text: &[u8]) -> Result<Policy, PolicyError> {
    Policy::ALL.into_iter().find(|p| p.name().as_bytes() == text).ok_or(PolicyError)
}

/// Why a value is not a token or sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    /// Text that is not decimal digits only (empty, a sign, a space, a point).
    NotDecimal,
    /// Decimal text with a leading zero (`007`).
    LeadingZero,
    /// Decimal text above 2^64-1.
    TooLarge,
    /// A negative signed integer.
    Negative(i64),
    /// A value above 2^63-1 for a signed 64-bit host.
    AboveSigned(u64),
}

impl NumberError {
    /// The stable code of this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            NumberError::NotDecimal => "number_not_decimal",
            NumberError::LeadingZero => "number_leading_zero",
            NumberError::TooLarge => "number_too_large",
            NumberError::Negative(_) => "number_negative",
            NumberError::AboveSigned(_) => "number_above_signed",
        }
    }
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumberError::NotDecimal => f.write_str("must be a decimal integer from 0 to 18446744073709551615")?,
            NumberError::LeadingZero => f.write_str("must be written without leading zeros")?,
            NumberError::TooLarge => f.write_str("is above 18446744073709551615 (2^64-1), the largest token")?,
            NumberError::Negative(v) => write!(f, "{v} is negative: tokens and sequences are 0 or more")?,
            NumberError::AboveSigned(v) => {
                write!(f, "{v} is above 9223372036854775807 (2^63-1), the largest a signed 64-bit integer holds")?
            }
        }
        write!(f, " ({})", self.code())
    }
}

/// A token or sequence from its canonical decimal text.
pub fn number(text: &[u8]) -> Result<u64, NumberError> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return Err(NumberError::NotDecimal);
    }
    if text.len() > 1 && text[0] == b'0' {
        return Err(NumberError::LeadingZero);
    }
    text.iter().try_fold(0u64, |n, d| n.checked_mul(10)?.checked_add(u64::from(d - b'0'))).ok_or(NumberError::TooLarge)
}

/// A token or sequence from a signed 64-bit host.
pub fn from_signed(value: i64) -> Result<u64, NumberError> {
    u64::try_from(value).map_err(|_| NumberError::Negative(value))
}

/// A token or sequence as a signed 64-bit host's integer.
pub fn to_signed(value: u64) -> Result<i64, NumberError> {
    i64::try_from(value).map_err(|_| NumberError::AboveSigned(value))
}

/// Why some text is not a proof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofTextError {
    /// More than [`MAX_PROOF_HEX`] digits.
    TooLong {
        /// Its length in bytes of text.
        digits: usize,
    },
    /// Not hex digits, two a byte.
    NotHex,
}

impl ProofTextError {
    /// The stable code of this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            ProofTextError::TooLong { .. } => "proof_too_long",
            ProofTextError::NotHex => "proof_not_hex",
        }
    }
}

impl fmt::Display for ProofTextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProofTextError::TooLong { digits } => {
                write!(f, "is {digits} hex digits, more than {MAX_PROOF_HEX}")?;
            }
            ProofTextError::NotHex => f.write_str("must be hex digits, two per byte, as the grant gave it")?,
        }
        write!(f, " ({})", self.code())
    }
}

/// A proof from its hex text (the grant's `fencing_proof`).
pub fn proof(text: &[u8]) -> Result<Vec<u8>, ProofTextError> {
    if text.len() > MAX_PROOF_HEX {
        return Err(ProofTextError::TooLong { digits: text.len() });
    }
    unhex(text).ok_or(ProofTextError::NotHex)
}

/// The bytes of `text`, two hex digits each (either case); `None` for
/// anything else, an odd length included.
pub fn unhex(text: &[u8]) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2).map(|p| Some((digit(p[0])? << 4) | digit(p[1])?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn names_are_bounded_text_without_controls_or_edge_spaces() {
        assert_eq!(name("orders"), Ok("orders"));
        assert_eq!(name("a b"), Ok("a b"));
        assert_eq!(name(""), Err(NameError::Empty));
        assert_eq!(name("a\0b"), Err(NameError::Control { found: '\0' }));
        assert_eq!(name("a\u{85}"), Err(NameError::Control { found: '\u{85}' }));
        assert_eq!(name(" a"), Err(NameError::Whitespace));
        assert_eq!(name("a\u{3000}"), Err(NameError::Whitespace));
        let long = "\u{1F512}".repeat(MAX_NAME_CHARS);
        assert_eq!(name(&long), Ok(long.as_str()));
        let longer = alloc::format!("{long}x");
        assert_eq!(name(&longer), Err(NameError::TooLong { chars: MAX_NAME_CHARS + 1 }));
        assert_eq!(name_bytes(b"\xff"), Err(NameError::NotUtf8));
        assert_eq!(name_bytes(&[b'x'; 2000]), Err(NameError::TooLong { chars: 2000 }));
        assert_eq!(name("a\0").unwrap_err().to_string(), "contains control character U+0000 (name_control)");
    }

    #[test]
    fn policies_are_spelled_as_in_the_contract() {
        assert_eq!(policy(b"non-decreasing"), Ok(Policy::NonDecreasing));
        assert_eq!(policy(b"strictly-increasing"), Ok(Policy::StrictlyIncreasing));
        for bad in [&b"non_decreasing"[..], b"Non-Decreasing", b"", b"non-decreasing "] {
            assert_eq!(policy(bad), Err(PolicyError));
        }
    }

    #[test]
    fn numbers_have_one_text_and_signed_hosts_carry_half_the_range() {
        assert_eq!(number(b"0"), Ok(0));
        assert_eq!(number(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(number(b"18446744073709551616"), Err(NumberError::TooLarge));
        assert_eq!(number(b"99999999999999999999999"), Err(NumberError::TooLarge));
        assert_eq!(number(b"007"), Err(NumberError::LeadingZero));
        for bad in [&b""[..], b"-1", b"+1", b" 1", b"1.0", b"1e3", b"\xd9\xa1"] {
            assert_eq!(number(bad), Err(NumberError::NotDecimal), "{bad:?}");
        }
        assert_eq!(from_signed(i64::MAX), Ok(MAX_SIGNED));
        assert_eq!(from_signed(-1), Err(NumberError::Negative(-1)));
        assert_eq!(to_signed(MAX_SIGNED + 1), Err(NumberError::AboveSigned(MAX_SIGNED + 1)));
    }

    #[test]
    fn proofs_are_bounded_hex() {
        assert_eq!(proof(b""), Ok(Vec::new()));
        assert_eq!(proof(b"0aFf"), Ok(alloc::vec![10, 255]));
        assert_eq!(proof(b"0"), Err(ProofTextError::NotHex));
        assert_eq!(proof(b"zz"), Err(ProofTextError::NotHex));
        assert_eq!(proof(&[b'0'; MAX_PROOF_HEX]).map(|p| p.len()), Ok(MAX_PROOF_HEX / 2));
        assert_eq!(proof(&[b'0'; MAX_PROOF_HEX + 2]), Err(ProofTextError::TooLong { digits: MAX_PROOF_HEX + 2 }));
    }
}
