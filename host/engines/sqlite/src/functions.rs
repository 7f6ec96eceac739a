//! The SQL functions, and what loading the extension sets on a connection.
//!
//! | function | what it does |
//! |---|---|
//! | `fencing_admit(current_lock, current_high_water, current_sequence, lock, token [, sequence [, policy]])` | the component's decision on plain values, as JSON |
//! | `fencing_present(token [, lock [, sequence]])` | what this connection presents for rows that do not carry it; `fencing_present(NULL)` clears |
//! | `fencing_protect(table, resource_column, token_column [, lock_column [, sequence_column [, policy]]])` | fences every write of `table` (`protect.rs`) |
//! | `fencing_unprotect(table [, reason])` | moves the marks its rows carry into `fencing_fences`, then drops the triggers |
//! | `fencing_reset(resource, reason [, lock, high_water])` | the operator's recorded reset (`reset.rs`) |
//! | `fencing_seal()` | this connection can no longer reset, unprotect or re-key (`seal.rs`) |
//! | `fencing_use_plugin(path)` | this connection decides with another build of the component (`NULL`: the embedded one) |
//! | `fencing_guard_info()` | which component decides |
//! | `fencing_fence(resource)` | the resource's mark as JSON (`fence_in_row.rs`: the fence row, raised by a carrier row), NULL without one |
//! | `fencing_check_row(..)`, `fencing_pending(..)` | called by the triggers: decide a row, then hand the admitted fence to the body that writes the fence row (`check_row.rs`) |
//! | `fencing_fence_update(..)`, `_insert(..)`, `_delete(..)`, `fencing_recording()` | called by the guards of `fencing_fences` and `fencing_resets` (`fences.rs`, `reset.rs`) |
//! | `fencing_presented_token()`, `_lock()`, `_sequence()` | what this connection presents |
//! | `fencing_set_keys(id, algorithm, key, ...)` | this connection's verifier keys for signed tokens (`signed.rs`); `NULL` forgets them |
//! | `fencing_admit_signed(current_lock, current_high_water, current_sequence, lock, token, sequence, proof [, policy])` | `fencing_admit` for a signed write: its proof first |
//!
//! Every function that changes what a connection presents or how it or a
//! table is fenced is `SQLITE_DIRECTONLY`: no trigger, view or other schema
//! object of a database file can call it. The functions the triggers call
//! are `SQLITE_INNOCUOUS`, so the extension works under `PRAGMA
//! trusted_schema = OFF`. Loading the extension turns on
//! `SQLITE_DBCONFIG_DEFENSIVE` for the connection (no `writable_schema`, no
//! `journal_mode = OFF`, no raw page writes); the program can turn it off
//! through the C API.
//!
//! SQL integers are signed 64-bit, so tokens and sequences above 2^63-1
//! cannot be presented here; a negative one is refused, never reinterpreted
//! (`args.rs`).

use crate::answer::{decision_json, fence_json};
use crate::args::{fail, fence_lock_token, name, policy_arg, text, to_i64, unsigned};
use crate::check_row::{check_row, pending};
use crate::guard::{Decider, or_embedded};
use crate::protect;
use crate::session::{Presented, Session};
use crate::{fence_in_row, fences, reset, seal};
use fencing_runtime::Sequencer;
use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::{Connection, Result, ffi};
use std::path::Path;
use std::sync::Arc;

/// `SQLITE_DBCONFIG_DEFENSIVE` (SQLite 3.26): the loadable-extension
/// bindings are generated from an older header that lacks it.
const SQLITE_DBCONFIG_DEFENSIVE: std::os::raw::c_int = 1010;

/// Registers every function on `db`; `Ok(false)`: the extension is not persistent.
pub fn register(db: Connection) -> Result<bool> {
    // SAFETY: the live connection the loader passed; DEFENSIVE takes an int and no out pointer.
    let rc = unsafe { ffi::sqlite3_db_config(db.handle(), SQLITE_DBCONFIG_DEFENSIVE, 1, std::ptr::null_mut()) };
    if rc != ffi::SQLITE_OK {
        return Err(fail("fencing: SQLite refused SQLITE_DBCONFIG_DEFENSIVE"));
    }
    let session = Session::default();
    let utf8 = FunctionFlags::SQLITE_UTF8;
    // Functions that change the connection's set-up may only be called by
    // statements the application wrote, never from a trigger or view.
    let direct = utf8 | FunctionFlags::SQLITE_DIRECTONLY;
    // The functions the triggers call: usable under trusted_schema = OFF.
    let trigger = utf8 | FunctionFlags::SQLITE_INNOCUOUS;

    let s = session.clone();
    db.create_scalar_function(c"fencing_admit", -1, utf8, move |ctx| admit(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_present", -1, direct, move |ctx| present(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_token", 0, utf8, move |_| presented_int(s.lock().presented.token))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_lock", 0, utf8, move |_| Ok(s.lock().presented.lock.clone()))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_presented_sequence", 0, utf8, move |_| {
        presented_int(s.lock().presented.sequence)
    })?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_check_row", 14, trigger, move |ctx| check_row(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_pending", 2, trigger, move |ctx| pending(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_fence_update", 10, trigger, move |ctx| fences::update(ctx, &s))?;
    db.create_scalar_function(c"fencing_fence_insert", 5, trigger, fences::insert)?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_fence_delete", 1, trigger, move |ctx| fences::delete(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_recording", 0, trigger, move |_| Ok(reset::recording(&s)))?;
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
    let s = session.clone();
    db.create_scalar_function(c"fencing_unprotect", -1, direct, move |ctx| protect::unprotect(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_reset", -1, direct, move |ctx| reset::reset(ctx, &s))?;
    let s = session.clone();
    db.create_scalar_function(c"fencing_seal", 0, direct, move |ctx| seal::seal(ctx, &s))?;
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
    let policy = policy_arg(ctx, 6)?;
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
    let lock = if ctx.len() > 1 { name(ctx, 1, "lock")? } else { None };
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
    let resource = name(ctx, 0, "resource")?.ok_or_else(|| fail("fencing_fence: resource is NULL"))?;
    // SAFETY: the connection running this function; its reads finish before returning.
    let db = unsafe { ctx.get_connection()? };
    if !fence_in_row::exists(&db, "fencing_fences")? {
        return Ok(None);
    }
    Ok(fence_in_row::current(&db, &resource)?.map(|f| fence_json(&f, None)))
}
