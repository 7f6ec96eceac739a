//! What the extension takes from SQL, checked once: tokens and sequences
//! (bigint, by `fencing_runtime::accept`'s rule: 0 to 2^63-1, nothing
//! wrapped), names, policies and the decimal settings, and the error each
//! refusal raises with its SQLSTATE.

use fencing_runtime::{Policy, accept};
use pgrx::prelude::*;

/// Longest resource or lock name, in bytes.
pub const MAX_NAME: usize = 1024;

/// Raises a PostgreSQL error with a standard SQLSTATE.
pub fn bad_argument(code: PgSqlErrorCode, message: String) -> ! {
    ereport!(ERROR, code, message);
}

/// A token or sequence from SQL; a negative one is refused (22003).
pub fn unsigned(name: &str, value: i64) -> u64 {
    accept::from_signed(value).unwrap_or_else(|e| out_of_range(name, e))
}

/// A token or sequence as SQL's bigint; one above 2^63-1 is refused (22003).
pub fn signed(name: &str, value: u64) -> i64 {
    accept::to_signed(value).unwrap_or_else(|e| out_of_range(name, e))
}

fn out_of_range(name: &str, e: accept::NumberError) -> ! {
    bad_argument(
        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
        format!(
            "fencing: {name} {e}; SQL carries tokens as bigint, so tokens above 2^63-1 cannot be presented through SQL"
        ),
    )
}

/// A required argument (22004 when NULL).
pub fn required<T>(name: &str, value: Option<T>) -> T {
    value.unwrap_or_else(|| bad_argument(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{name} is NULL")))
}

/// A policy by its contract name.
pub fn policy(name: &str) -> Policy {
    name.parse().unwrap_or_else(|e| {
        bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("policy `{name}`: {e}"))
    })
}

/// A resource or lock name: 1 to [`MAX_NAME`] bytes.
pub fn check_name(what: &str, value: &str) {
    if value.is_empty() || value.len() > MAX_NAME {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("fencing: {what} must be 1 to {MAX_NAME} bytes, got {}", value.len()),
        );
    }
}

/// A required name argument.
pub fn name<'a>(what: &str, value: Option<&'a str>) -> &'a str {
    let value = required(what, value);
    check_name(what, value);
    value
}

/// A decimal setting (`fencing.token`, `fencing.sequence`) as a token or
/// sequence: 22P02 when it is not a decimal number, 22003 above 2^63-1.
pub fn setting_number(name: &str, value: Option<String>) -> Option<i64> {
    let value = value?;
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("fencing: {name} {value:?} is not a decimal number"),
        );
    }
    // All digits: only a value past u64 fails to parse.
    let parsed = value.parse::<u64>().unwrap_or(u64::MAX);
    Some(signed(name, parsed))
}

/// `fencing.proof` as bytes (empty when unset: the proof is missing): 22P02
/// when it is not hex, 22001 when longer than any proof.
pub fn setting_proof(value: Option<String>) -> Vec<u8> {
    let Some(value) = value else { return Vec::new() };
    accept::proof(value.as_bytes()).unwrap_or_else(|e| {
        let code = match e {
            accept::ProofTextError::TooLong { .. } => PgSqlErrorCode::ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
            accept::ProofTextError::NotHex => PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        };
        bad_argument(code, format!("fencing: fencing.proof {e}"))
    })
}
