//! What the extension takes from SQL, checked once by
//! `fencing_runtime::accept`'s rules: names (resources and locks: 1 to 256
//! characters of UTF-8, no control character, no whitespace at either end),
//! policies (the contract's spelling only), integers as tokens and sequences
//! (0 to 2^63-1, nothing reinterpreted), proofs as hex text; identifiers and
//! literals quoted for the SQL the extension writes; and the error that fails
//! a statement. Every refusal of an argument carries the rule's code
//! (`name_control`, `policy_unknown`, `number_negative`, `proof_not_hex`, ...).

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

/// Argument `i` as text (integers are shown in decimal), `None` for NULL.
pub fn text(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<String>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Text(t) => {
            String::from_utf8(t.to_vec()).map(Some).map_err(|_| fail(format!("fencing: {what} is not UTF-8")))
        }
        ValueRef::Integer(v) => Ok(Some(v.to_string())),
        other => Err(fail(format!("fencing: {what} must be text, got {}", other.data_type()))),
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

/// A SQL value as a name (a resource or a lock): text by the name rule, an
/// integer by its decimal form (always a name); `Err` says why not, with the
/// rule's code. NULL is the caller's to handle.
pub fn name_of(value: ValueRef<'_>) -> std::result::Result<String, String> {
    match value {
        ValueRef::Text(t) => accept::name_bytes(t).map(str::to_owned).map_err(|e| e.to_string()),
        ValueRef::Integer(v) => Ok(v.to_string()),
        ValueRef::Real(v) => Err(format!(
            "must be text or an integer, got the real {v} (SQLite compares 5.0 equal to 5, so a real has no one name)"
        )),
        ValueRef::Blob(_) => Err("must be text or an integer, got a blob".to_string()),
        ValueRef::Null => Err("must not be NULL".to_string()),
    }
}

/// Argument `i` as a name, `None` for NULL; `what` names it in errors.
pub fn name(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<String>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        v => name_of(v).map(Some).map_err(|why| fail(format!("fencing: {what} {why}"))),
    }
}

/// A policy by its contract name (`non-decreasing`, `strictly-increasing`); NULL is the default.
pub fn policy(name: Option<&str>) -> Result<Policy> {
    match name {
        None => Ok(Policy::NonDecreasing),
        Some(n) => accept::policy(n.as_bytes()).map_err(|e| fail(format!("fencing: policy {n:?} {e}"))),
    }
}

/// Argument `i` as a policy, the default for NULL or a missing argument.
pub fn policy_arg(ctx: &Context<'_>, i: usize) -> Result<Policy> {
    if i >= ctx.len() {
        return policy(None);
    }
    policy(borrowed(ctx, i, "policy")?)
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
    let current = match name(ctx, 0, "current_lock")? {
        None => None,
        Some(lock) => {
            let high_water = unsigned(ctx, 1, "current_high_water")?
                .ok_or_else(|| fail("fencing: current_high_water is NULL but current_lock is not"))?;
            Some(Fence { lock, high_water, sequence: unsigned(ctx, 2, "current_sequence")? })
        }
    };
    let lock = name(ctx, 3, "lock")?.ok_or_else(|| fail("fencing: lock is NULL"))?;
    let token = unsigned(ctx, 4, "token")?.ok_or_else(|| fail("fencing: token is NULL"))?;
    Ok((current, lock, token))
}
