//! The SQL functions.
//!
//! | function | what it does |
//! |---|---|
//! | `fencing_admit(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]])` | the component's decision on plain values, as JSON |
//! | `fencing_present(token [, lock [, sequence]])` | what this connection presents for rows that do not carry it; `fencing_present(NULL)` clears |
//! | `fencing_protect(table, resource_column, token_column [, lock_column [, sequence_column [, policy]]])` | fences every write of `table` (`protect.rs`) |
//! | `fencing_unprotect(table)` | drops the triggers; the fences stay |
//! | `fencing_use_plugin(path)` | this connection decides with another build of the component (`NULL`: the embedded one) |
//! | `fencing_guard_info()` | which component decides |
//! | `fencing_check_row(..)`, `fencing_presented_*()` | called by the triggers |
//!
//! SQL integers are signed 64-bit, so tokens and sequences above 2^63-1
//! cannot be presented here; a negative one is refused, never reinterpreted.

use crate::guard::{Decider, embedded};
use crate::protect;
use crate::session::{Presented, Session};
use fencing_runtime::{Fence, Policy, Rejection, Sequencer};
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Registers every function on `db`; `Ok(false)`: the extension is not persistent.
pub fn register(db: Connection) -> Result<bool> {
    let session = Session::default();
    let utf8 = FunctionFlags::SQLITE_UTF8;
    // Functions that change the connection's set-up may only be called by
    // statements the application wrote, never from a trigger or view.
    let direct = utf8 | FunctionFlags::SQLITE_DIRECTONLY;

    let s = session.clone();
    db.create_scalar_function(c"fencing_admit", -1, utf8, move |ctx| admit(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_present", -1, utf8, move |ctx| present(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_token", 0, utf8, move |_| Ok(s.lock().presented.token))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_lock", 0, utf8, move |_| Ok(s.lock().presented.lock.clone()))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_sequence", 0, utf8, move |_| Ok(s.lock().presented.sequence))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_check_row", 9, utf8, move |ctx| check_row(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_use_plugin", 1, direct, move |ctx| use_plugin(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_guard_info", 0, utf8, move |_| Ok(decider(&s)?.info()))?;
    db.create_scalar_function(c"fencing_protect", -1, direct, protect::protect)?;
    db.create_scalar_function(c"fencing_unprotect", 1, direct, protect::unprotect)?;
    Ok(false)
}

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

/// A non-negative integer argument, as a token or sequence.
fn unsigned(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<u64>> {
    match int(ctx, i, what)? {
        Some(v) if v < 0 => Err(fail(format!("fencing: {what} {v} is negative; tokens and sequences are 0 or more"))),
        v => Ok(v.map(|v| v as u64)),
    }
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

/// A policy name, with `-` or `_` (`non-decreasing`, `strictly_increasing`); NULL is the default.
pub fn policy(name: Option<&str>) -> Result<Policy> {
    match name {
        None => Ok(Policy::NonDecreasing),
        Some(n) => n.replace('_', "-").parse().map_err(|_| {
            fail(format!("fencing: unknown policy {n:?}: expected non-decreasing or strictly-increasing"))
        }),
    }
}

/// The decider of this connection: its plugin, else the process's embedded guard.
fn decider(s: &Session) -> Result<Arc<Decider>> {
    if let Some(plugin) = &s.lock().plugin {
        return Ok(plugin.clone());
    }
    embedded().map_err(|why| fail(format!("fencing: guard_unavailable: {why}")))
}

fn admit(ctx: &Context<'_>, s: &Session) -> Result<String> {
    if !(5..=7).contains(&ctx.len()) {
        return Err(fail(
            "fencing_admit(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]]) takes 5 to 7 arguments",
        ));
    }
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
    let sequence = if ctx.len() > 5 { unsigned(ctx, 5, "sequence")? } else { None };
    let policy = policy(if ctx.len() > 6 { text(ctx, 6, "policy")? } else { None }.as_deref())?;
    let presented = Sequencer { lock, token, sequence };
    let decision = decider(s)?
        .decide(current.as_ref(), &presented, policy)
        .map_err(|why| fail(format!("fencing: the guard could not decide ({why})")))?;
    Ok(match decision {
        Ok(a) => format!(
            r#"{{"admitted":true,"high_water":{},"sequence":{},"new_term":{}}}"#,
            a.high_water,
            json_opt(a.sequence),
            a.new_term
        ),
        Err(r) => format!(r#"{{"admitted":false,"reason":"{}"{}}}"#, r.reason(), evidence_json(&r)),
    })
}

fn json_opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".into(), |v| v.to_string())
}

fn evidence_json(r: &Rejection) -> String {
    match r {
        Rejection::InvalidToken | Rejection::WrongLock => String::new(),
        Rejection::StaleToken { presented, high_water } | Rejection::TokenReused { presented, high_water } => {
            format!(r#","presented":{presented},"high_water":{high_water}"#)
        }
        Rejection::SequenceRegressed { token, presented, last } => {
            format!(r#","token":{token},"presented":{},"last":{last}"#, json_opt(*presented))
        }
    }
}

fn present(ctx: &Context<'_>, s: &Session) -> Result<Option<i64>> {
    if !(1..=3).contains(&ctx.len()) {
        return Err(fail("fencing_present(token [, lock [, sequence]]) takes 1 to 3 arguments"));
    }
    let token = unsigned(ctx, 0, "token")?;
    let lock = if ctx.len() > 1 { text(ctx, 1, "lock")? } else { None };
    let sequence = if ctx.len() > 2 { unsigned(ctx, 2, "sequence")? } else { None };
    if token.is_none() && (lock.is_some() || sequence.is_some()) {
        return Err(fail("fencing: fencing_present(NULL) clears; a lock or sequence needs a token"));
    }
    let token = token.map(|t| t as i64);
    s.lock().presented = Presented { token, lock, sequence: sequence.map(|v| v as i64) };
    Ok(token)
}

fn use_plugin(ctx: &Context<'_>, s: &Session) -> Result<String> {
    let plugin = match text(ctx, 0, "path")? {
        None => None,
        Some(path) => Some(Arc::new(
            Decider::build(Some(Path::new(&path)))
                .map_err(|why| fail(format!("fencing: cannot load {path}: {why}")))?,
        )),
    };
    let source = plugin.as_ref().map_or_else(|| "embedded".to_string(), |p| p.source.clone());
    s.lock().plugin = plugin;
    Ok(source)
}

/// `fencing_check_row(table, resource, lock, token, sequence, policy,
/// fence_lock, fence_high_water, fence_sequence)`: NULL when the row's write
/// is admitted; otherwise the statement fails with the refusal. The trigger
/// raises the fence itself right after an admission.
fn check_row(ctx: &Context<'_>, s: &Session) -> Result<Option<i64>> {
    let table = text(ctx, 0, "table")?.unwrap_or_default();
    let resource = text(ctx, 1, "resource")?
        .ok_or_else(|| fail(format!("fencing: a row of {table} has a NULL resource; protected rows need one")))?;
    let lock = text(ctx, 2, "lock")?.unwrap_or_else(|| resource.clone());
    // Where a refusal happened; built only when there is one (this runs for every protected row).
    let at = |lock: &str| format!("table {table}, resource {resource:?}, lock {lock:?}");
    let token = match int(ctx, 3, "token")? {
        None => {
            return Err(fail(format!(
                "fencing: missing_token: {}: the write presents no token (set the token column, or call fencing_present(token) first)",
                at(&lock)
            )));
        }
        Some(t) if t < 0 => {
            return Err(fail(format!("fencing: invalid_token: {}: token {t} is negative", at(&lock))));
        }
        Some(t) => t as u64,
    };
    let sequence = unsigned(ctx, 4, "sequence")?;
    let policy = policy(text(ctx, 5, "policy")?.as_deref())?;
    let current = match text(ctx, 6, "fence lock")? {
        None => None,
        Some(fence_lock) => Some(Fence {
            lock: fence_lock,
            high_water: unsigned(ctx, 7, "fence high_water")?.unwrap_or(0),
            sequence: unsigned(ctx, 8, "fence sequence")?,
        }),
    };
    let presented = Sequencer { lock, token, sequence };
    let decision = decider(s)?.decide(current.as_ref(), &presented, policy).map_err(|why| {
        fail(format!(
            "fencing: guard_failure: {}: the guard could not decide ({why}); nothing was written",
            at(&presented.lock)
        ))
    })?;
    let Err(rejection) = decision else { return Ok(None) };
    let shown = |seq: Option<u64>| seq.map_or_else(String::new, |v| format!(" sequence {v}"));
    let fence = match &current {
        None => "no fence".to_string(),
        Some(f) => format!("high_water {}{} (bound to lock {:?})", f.high_water, shown(f.sequence), f.lock),
    };
    Err(fail(format!(
        "fencing: {}: {}: presented token {token}{}, {fence}",
        rejection.reason(),
        at(&presented.lock),
        shown(sequence)
    )))
}
