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
//! | `fencing_fence(resource)` | the resource's mark as JSON (`fence_in_row.rs`: the fence row, raised by a carrier row), NULL without one |
//! | `fencing_check_row(..)`, `fencing_pending(..)` | called by the triggers: decide a row, then hand the new fence row to the upsert (`check_row.rs`) |
//! | `fencing_presented_token()`, `_lock()`, `_sequence()` | what this connection presents |
//! | `fencing_set_keys(id, algorithm, key, ...)` | this connection's verifier keys for signed tokens (`signed.rs`); `NULL` forgets them |
//! | `fencing_admit_signed(current_lock, current_high_water, current_sequence, lock, token, sequence, proof [, policy])` | `fencing_admit` for a signed write: its proof first |
//!
//! SQL integers are signed 64-bit, so tokens and sequences above 2^63-1
//! cannot be presented here; a negative one is refused, never reinterpreted
//! (`args.rs`).

use crate::answer::{decision_json, json_opt};
use crate::args::{fail, fence_lock_token, policy, text, to_i64, unsigned};
use crate::check_row::{check_row, pending};
use crate::fence_in_row;
use crate::guard::{Decider, or_embedded};
use crate::protect;
use crate::session::{Presented, Session};
use fencing_runtime::Sequencer;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::{Connection, Result};
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
    db.create_scalar_function(c"fencing_presented_token", 0, utf8, move |_| presented_int(s.lock().presented.token))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_lock", 0, utf8, move |_| Ok(s.lock().presented.lock.clone()))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_sequence", 0, utf8, move |_| {
        presented_int(s.lock().presented.sequence)
    })?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_check_row", 12, utf8, move |ctx| check_row(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_pending", 2, utf8, move |ctx| pending(ctx, &s))?;
    db.create_scalar_function(c"fencing_fence", 1, utf8, fence)?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_use_plugin", 1, direct, move |ctx| use_plugin(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_guard_info", 0, utf8, move |_| Ok(decider(&s)?.info()))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_set_keys", -1, direct, move |ctx| crate::signed::set_keys(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_admit_signed", -1, utf8, move |ctx| crate::signed::admit_signed(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_present_proof", 1, direct, move |ctx| crate::signed::present_proof(ctx, &s))?;
    db.create_scalar_function(c"fencing_protect", -1, direct, protect::protect)?;
    db.create_scalar_function(c"fencing_unprotect", 1, direct, protect::unprotect)?;
    Ok(false)
}

/// The decider of this connection: its plugin, else the process's embedded guard.
fn decider(s: &Session) -> Result<Arc<Decider>> {
    or_embedded(s.lock().plugin.clone()).map_err(|why| fail(format!("fencing: guard_unavailable: {why}")))
}

fn admit(ctx: &Context<'_>, s: &Session) -> Result<String> {
    if !(5..=7).contains(&ctx.len()) {
        return Err(fail(
            "fencing_admit(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]]) takes 5 to 7 arguments",
        ));
    }
    let (current, lock, token) = fence_lock_token(ctx)?;
    let sequence = if ctx.len() > 5 { unsigned(ctx, 5, "sequence")? } else { None };
    let policy = policy(if ctx.len() > 6 { text(ctx, 6, "policy")? } else { None }.as_deref())?;
    let presented = Sequencer { lock, token, sequence };
    let decision = decider(s)?
        .decide(current.as_ref(), &presented, policy)
        .map_err(|why| fail(format!("fencing: the guard could not decide ({why})")))?;
    Ok(decision_json(&decision))
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
    s.lock().presented = Presented { token, lock, sequence };
    presented_int(token)
}

/// A presented token or sequence as SQL shows it.
fn presented_int(value: Option<u64>) -> Result<Option<i64>> {
    value.map(|v| to_i64(v, "presented value")).transpose()
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
    Ok(fence_in_row::current(&db, &resource)?.map(|f| {
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
