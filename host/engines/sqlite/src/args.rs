//! What the extension takes from SQL, checked once: integers as tokens and
//! sequences (by `fencing_runtime::accept`'s rule: 0 to 2^63-1, nothing
//! reinterpreted), text, policies, identifiers and literals quoted for the
//! SQL the extension writes, and the error that fails a statement.

use fencing_runtime::{Fence, Policy, accept};
use rusqlite::functions::Context;
use rusqlite::types::ValueRef;
use rusqlite::{Error, Result};

/// An error that fails the statement with `message`.
pub fn fail(message: impl Into<String>) -> Error {
    Error::UserFunctionError(message.into().into())
}

/// Argument `i` as an integer, `None` for NULL; `what` names it in errors.
pub fn int(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<i64>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(v) => Ok(Some(v)),
        other => Err(fail(format!("fencing: {what} must be an integer, got {}", other.data_type()))),
    }
}

/// A SQL integer as a token or sequence; `what` names it in the error.
pub fn to_u64(value: i64, what: &str) -> Result<u64> {
    accept::from_signed(value).map_err(|e| fail(format!("fencing: {what} {e}")))
}

/// A token or sequence as a SQL integer; `what` names it in the error.
pub fn to_i64(value: u64, what: &str) -> Result<i64> {
    accept::to_signed(value).map_err(|e| fail(format!("fencing: {what} {e}")))
}

/// Argument `i` as a token or sequence, `None` for NULL.
pub fn unsigned(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<u64>> {
    int(ctx, i, what)?.map(|v| to_u64(v, what)).transpose()
}

/// Argument `i` as text (integers and reals are shown as SQL shows them), `None` for NULL.
pub fn text(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<String>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Text(t) => {
            String::from_utf8(t.to_vec()).map(Some).map_err(|_| fail(format!("fencing: {what} is not UTF-8")))
        }
        ValueRef::Integer(v) => Ok(Some(v.to_string())),
        ValueRef::Real(v) => Ok(Some(v.to_string())),
        ValueRef::Blob(_) => Err(fail(format!("fencing: {what} must be text, got a blob"))),
    }
}

/// Argument `i` as borrowed text, `None` for NULL; `what` names it in errors.
pub fn borrowed<'a>(ctx: &'a Context<'_>, i: usize, what: &str) -> Result<Option<&'a str>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Text(t) => {
            std::str::from_utf8(t).map(Some).map_err(|_| fail(format!("fencing: {what} is not UTF-8")))
        }
        other => Err(fail(format!("fencing: {what} must be text, got {}", other.data_type()))),
    }
}

/// A policy name, with `-` or `_` (`non-decreasing`, `strictly_increasing`); NULL is the default.
pub fn policy(name: Option<&str>) -> Result<Policy> {
    match name {
        None => Ok(Policy::NonDecreasing),
        Some(n) => n.replace('_', "-").parse().map_err(|_| {
            fail(format!("fencing: unknown policy {n:?}: expected non-decreasing or strictly-increasing"))
        }),
    }
}

/// `"name"`, with embedded quotes doubled.
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'`, with embedded quotes doubled.
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Arguments 0 to 4 of `fencing_admit` and `fencing_admit_signed`: the
/// stored fence (`current_lock` NULL: none yet), the presented lock and token.
pub fn fence_lock_token(ctx: &Context<'_>) -> Result<(Option<Fence>, String, u64)> {
    let current = match text(ctx, 0, "current_lock")? {
        None => None,
        Some(lock) => {
            let high_water = unsigned(ctx, 1, "current_high_water")?
                .ok_or_else(|| fail("fencing: current_high_water is NULL but current_lock is not"))?;
            Some(Fence { lock, high_water, sequence: unsigned(ctx, 2, "current_sequence")? })
        }
    };
    let lock = text(ctx, 3, "lock")?.ok_or_else(|| fail("fencing: lock is NULL"))?;
    let token = unsigned(ctx, 4, "token")?.ok_or_else(|| fail("fencing: token is NULL"))?;
    Ok((current, lock, token))
}
