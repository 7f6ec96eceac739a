//! The SQL functions.
//!
//! | function | what it does |
//! |---|---|
//! | `fencing_admit(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]])` | the component's decision on plain values, as JSON |
//! | `fencing_present(token [, lock [, sequence]])` | what this connection presents for rows that do not carry it; `fencing_present(NULL)` clears |
//! | `fencing_protect(table, resource_column, token_column [, lock_column [, sequence_column [, policy]]])` | fences every write of `table` (`protect.rs`) |
//! | `fencing_unprotect(table)` | moves the marks its rows carry into `fencing_fences`, then drops the triggers |
//! | `fencing_use_plugin(path)` | this connection decides with another build of the component (`NULL`: the embedded one) |
//! | `fencing_guard_info()` | which component decides |
//! | `fencing_fence(resource)` | the resource's mark as JSON (`carry.rs`: the fence row, raised by a carrier row), NULL without one |
//! | `fencing_check_row(..)`, `fencing_pending(..)` | called by the triggers: decide a row, then hand the new fence row to the upsert |
//! | `fencing_presented_token()`, `_lock()`, `_sequence()` | what this connection presents |
//!
//! SQL integers are signed 64-bit, so tokens and sequences above 2^63-1
//! cannot be presented here; a negative one is refused, never reinterpreted.

use crate::carry;
use crate::guard::{Decider, embedded};
use crate::protect;
use crate::session::{Pending, Presented, Session};
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
    db.create_scalar_function(c"fencing_check_row", 12, utf8, move |ctx| check_row(ctx, &s))?;
    db.create_scalar_function(c"fencing_check_row", 9, utf8, |_| -> Result<Option<i64>> {
        Err(fail("fencing: this table's triggers were made by fencing-sqlite 0.1.0; run fencing_protect on it again"))
    })?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_pending", 2, utf8, move |ctx| pending(ctx, &s))?;
    db.create_scalar_function(c"fencing_fence", 1, utf8, fence)?;
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
    or_embedded(s.lock().plugin.clone())
}

/// `plugin`, else the process's embedded guard.
fn or_embedded(plugin: Option<Arc<Decider>>) -> Result<Arc<Decider>> {
    match plugin {
        Some(p) => Ok(p),
        None => embedded().map_err(|why| fail(format!("fencing: guard_unavailable: {why}"))),
    }
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
/// fence_lock, fence_high_water, fence_sequence, fence_carrier, carried,
/// row_token)`: the trigger's `WHEN`. `lock`, `token` and `sequence` are
/// what the row itself presents (NULL: the connection's `fencing_present`
/// values, the lock defaulting to the resource). Fails the statement with a
/// refusal; on admission returns 0 when the written row carries the new
/// mark, and 1 or 2 when the trigger's body must write the fence row (2:
/// naming `table` as carrier), leaving that fence for `fencing_pending`.
/// `carried` is the token this table's row held before the write; `row_token`
/// the token it holds after, when the table's rows can carry marks
/// (`carry.rs`).
fn check_row(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    let table = borrowed(ctx, 0, "table")?.unwrap_or_default();
    let resource = borrowed(ctx, 1, "resource")?
        .ok_or_else(|| fail(format!("fencing: a row of {table} has a NULL resource; protected rows need one")))?;
    let (presented, plugin) = {
        let state = s.lock();
        (state.presented.clone(), state.plugin.clone())
    };
    let lock = match presented.lock {
        Some(l) => l,
        None => borrowed(ctx, 2, "lock")?.unwrap_or(resource).to_string(),
    };
    // Where a refusal happened; built only when there is one (this runs for every protected row).
    let at = |lock: &str| format!("table {table}, resource {resource:?}, lock {lock:?}");
    let token = match int(ctx, 3, "token")?.or(presented.token) {
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
    let sequence = match unsigned(ctx, 4, "sequence")? {
        Some(v) => Some(v),
        None => presented.sequence.map(|v| v as u64),
    };
    let policy = policy(borrowed(ctx, 5, "policy")?)?;
    let fence_lock = borrowed(ctx, 6, "fence lock")?;
    let fence_sequence = unsigned(ctx, 8, "fence sequence")?;
    let fence_carrier = borrowed(ctx, 9, "fence carrier")?;
    let current = match fence_lock {
        None => None,
        Some(fence_lock) => {
            let carried = match fence_carrier {
                None => None,
                Some(c) if c == table => carry::carried_value(table, resource, int(ctx, 10, "carried token")?)?,
                Some(c) => {
                    // SAFETY: the connection running this trigger; the read finishes before returning.
                    let db = unsafe { ctx.get_connection()? };
                    carry::read_carried(&db, c, resource)?
                }
            };
            let high_water = unsigned(ctx, 7, "fence high_water")?.unwrap_or(0);
            Some(carry::mark(fence_lock, high_water, fence_sequence, carried))
        }
    };
    let row_token = int(ctx, 11, "row token")?;
    let presented = Sequencer { lock, token, sequence };
    let decision = or_embedded(plugin)?.decide(current.as_ref(), &presented, policy).map_err(|why| {
        fail(format!(
            "fencing: guard_failure: {}: the guard could not decide ({why}); nothing was written",
            at(&presented.lock)
        ))
    })?;
    let rejection = match decision {
        Ok(admission) => {
            // The row carries the new mark when it holds the admitted token and no sequence is involved.
            let carries = row_token == Some(token as i64) && admission.sequence.is_none();
            let kept = carries
                && fence_carrier == Some(table)
                && fence_lock == Some(presented.lock.as_str())
                && fence_sequence.is_none();
            let write = if kept {
                0
            } else if carries {
                2
            } else {
                1
            };
            s.lock().pending = (write > 0).then(|| Pending {
                resource: resource.to_string(),
                lock: presented.lock,
                high_water: admission.high_water,
                sequence: admission.sequence,
                write,
            });
            return Ok(write);
        }
        Err(rejection) => rejection,
    };
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

/// Argument `i` as borrowed text, `None` for NULL; `what` names it in errors.
fn borrowed<'a>(ctx: &'a Context<'_>, i: usize, what: &str) -> Result<Option<&'a str>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Text(t) => {
            std::str::from_utf8(t).map(Some).map_err(|_| fail(format!("fencing: {what} is not UTF-8")))
        }
        other => Err(fail(format!("fencing: {what} must be text, got {}", other.data_type()))),
    }
}

/// `fencing_pending(resource, field)`: the fence the check just admitted for
/// `resource`, for the trigger's body to write: `'lock'`, `'high_water'`,
/// `'sequence'`, or `'carrier'` (1 when the body names no carrier, 2 when it
/// names the table). A body for another resource than the check's fails
/// closed.
fn pending(ctx: &Context<'_>, s: &Session) -> Result<rusqlite::types::Value> {
    use rusqlite::types::Value;
    let resource = borrowed(ctx, 0, "resource")?.unwrap_or_default();
    let state = s.lock();
    let Some(p) = state.pending.as_ref().filter(|p| p.resource == resource) else {
        return Err(fail(format!(
            "fencing: guard_failure: resource {resource:?}: no admission is pending; nothing was written"
        )));
    };
    Ok(match borrowed(ctx, 1, "field")? {
        Some("lock") => Value::Text(p.lock.clone()),
        Some("high_water") => Value::Integer(p.high_water as i64),
        Some("sequence") => p.sequence.map_or(Value::Null, |v| Value::Integer(v as i64)),
        Some("carrier") => Value::Integer(p.write),
        other => return Err(fail(format!("fencing_pending: unknown field {other:?}"))),
    })
}

/// `fencing_fence(resource)`: the resource's mark as every protected table
/// sees it, as JSON (`{"lock":..,"high_water":..,"sequence":..}`), NULL without one.
fn fence(ctx: &Context<'_>) -> Result<Option<String>> {
    let resource = text(ctx, 0, "resource")?.ok_or_else(|| fail("fencing_fence: resource is NULL"))?;
    // SAFETY: the connection running this function; its reads finish before returning.
    let db = unsafe { ctx.get_connection()? };
    let has_fences: bool =
        db.query_row("SELECT count(*) > 0 FROM main.sqlite_schema WHERE name = 'fencing_fences'", [], |r| r.get(0))?;
    if !has_fences {
        return Ok(None);
    }
    Ok(carry::current(&db, &resource)?.map(|f| {
        format!(
            r#"{{"lock":{},"high_water":{},"sequence":{}}}"#,
            json_string(&f.lock),
            f.high_water,
            json_opt(f.sequence)
        )
    }))
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
