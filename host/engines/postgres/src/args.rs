//! What the extension takes from SQL, checked by `fencing_runtime::accept`
//! (the rules every host shares, `guest/src/accept.rs`): names (resources
//! and locks), policies, tokens and sequences as `bigint` and as the decimal
//! text of `fencing.token` and `fencing.sequence`, and proofs as hex. A
//! refusal is an ERROR whose message ends with the rule's code (`(name_control)`,
//! `(number_leading_zero)`, ...) and whose SQLSTATE fits it:
//!
//! | codes | SQLSTATE |
//! |---|---|
//! | `name_too_long`, `proof_too_long` | `22001` string_data_right_truncation |
//! | `name_control`, `name_not_utf8` | `22021` character_not_in_repertoire |
//! | `number_not_decimal`, `number_leading_zero`, `proof_not_hex` | `22P02` invalid_text_representation |
//! | `number_too_large`, `number_negative`, `number_above_signed` | `22003` numeric_value_out_of_range |
//! | `name_empty`, `name_whitespace`, `policy_unknown` | `22023` invalid_parameter_value |

use fencing_runtime::{Policy, accept};
use pgrx::prelude::*;

/// Raises a PostgreSQL error with a standard SQLSTATE.
pub fn bad_argument(code: PgSqlErrorCode, message: String) -> ! {
    ereport!(ERROR, code, message);
}

/// The SQLSTATE of a refusal by its rule's code (the table in the module docs).
pub fn sqlstate(code: &str) -> PgSqlErrorCode {
    match code {
        "name_too_long" | "proof_too_long" => PgSqlErrorCode::ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
        "name_control" | "name_not_utf8" => PgSqlErrorCode::ERRCODE_CHARACTER_NOT_IN_REPERTOIRE,
        "number_not_decimal" | "number_leading_zero" | "proof_not_hex" => {
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION
        }
        "number_too_large" | "number_negative" | "number_above_signed" => {
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE
        }
        _ => PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
    }
}

/// Raises the refusal of `what` by an accept rule (`e` ends with its code).
fn refuse(what: &str, code: &str, e: impl std::fmt::Display) -> ! {
    bad_argument(sqlstate(code), format!("fencing: {what} {e}"))
}

/// A token or sequence from SQL's `bigint`; a negative one is refused (`number_negative`).
pub fn unsigned(name: &str, value: i64) -> u64 {
    accept::from_signed(value)
        .unwrap_or_else(|e| refuse(name, e.code(), format_args!("{e}; SQL carries tokens as bigint, from 0 to 2^63-1")))
}

/// A token or sequence as SQL's `bigint`; one above 2^63-1 is refused (`number_above_signed`).
pub fn signed(name: &str, value: u64) -> i64 {
    accept::to_signed(value).unwrap_or_else(|e| {
        refuse(name, e.code(), format_args!("{e}; SQL carries tokens as bigint, so it cannot be presented through SQL"))
    })
}

/// A required argument (22004 when NULL).
pub fn required<T>(name: &str, value: Option<T>) -> T {
    value.unwrap_or_else(|| {
        bad_argument(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("fencing: {name} is NULL"))
    })
}

/// A policy by its contract name, spelled exactly.
pub fn policy(name: &str) -> Policy {
    accept::policy(name.as_bytes()).unwrap_or_else(|e| refuse("policy", e.code(), e))
}

/// A resource or lock name by the shared rule (`accept::name`).
pub fn check_name(what: &str, value: &str) {
    if let Err(e) = accept::name(value) {
        refuse(what, e.code(), e);
    }
}

/// A required name argument.
pub fn name<'a>(what: &str, value: Option<&'a str>) -> &'a str {
    let value = required(what, value);
    check_name(what, value);
    value
}

/// A decimal setting (`fencing.token`, `fencing.sequence`) as a token or
/// sequence: its canonical decimal text (`accept::number`), within `bigint`.
pub fn setting_number(name: &str, value: Option<String>) -> Option<i64> {
    let value = value?;
    let number = accept::number(value.as_bytes()).unwrap_or_else(|e| refuse(name, e.code(), e));
    Some(signed(name, number))
}

/// `fencing.proof` as bytes (empty when unset: the proof is missing), by `accept::proof`.
pub fn setting_proof(value: Option<String>) -> Vec<u8> {
    let Some(value) = value else { return Vec::new() };
    accept::proof(value.as_bytes()).unwrap_or_else(|e| refuse("fencing.proof", e.code(), e))
}
