//! The operator's reset: `fencing_reset(resource, reason [, lock,
//! high_water])` removes a resource's fence, or re-binds it to `lock` at
//! `high_water` (the safe way to un-brick a resource a client pushed to a
//! huge token, or to raise marks after restoring an older copy). Every reset
//! leaves a row in `fencing_resets`: when, which resource, who (SQLite has no
//! users: the process that ran it, by user id, process id and program), why,
//! and the mark before and after. `fencing_unprotect(table, reason)` of a
//! table dropped while protected records the marks its rows carried as lost
//! the same way.
//!
//! Invariants:
//! - the fence table's guards (`fences.rs`) let a fence row be deleted or
//!   lowered only while this connection runs `fencing_reset` for that
//!   resource (or `fencing_unprotect` for that lost carrier): the session's
//!   `resetting`, set for the length of the call and cleared however it ends;
//! - `fencing_resets` takes rows only at those times, and never loses or
//!   changes one (its triggers refuse UPDATE and DELETE, and an INSERT OR
//!   REPLACE is an INSERT they refuse);
//! - the record and the change are one savepoint: both happen, or neither.
//!
//! `fencing_reset` is `SQLITE_DIRECTONLY` (no trigger or view can call it);
//! who may run it is whoever can run SQL on a read-write connection that
//! loaded the extension, unless the connection is sealed (`seal.rs`).

use crate::answer::fence_json;
use crate::args::{fail, name, text, unsigned};
use crate::fence_in_row::{self, Stored};
use crate::session::{Resetting, Session};
use crate::tables::{ensure_tables, in_savepoint};
use fencing_runtime::Fence;
use rusqlite::functions::Context;
use rusqlite::{Connection, Result, params};

/// The longest reason a reset records, in characters.
const MAX_REASON_CHARS: usize = 1024;

/// A reset's reason: 1 to 1,024 characters, not only whitespace.
pub fn reason(text: Option<&str>) -> std::result::Result<String, String> {
    let text = text.unwrap_or_default();
    let chars = text.chars().count();
    if text.trim().is_empty() || chars > MAX_REASON_CHARS {
        return Err(format!("a reason is 1 to {MAX_REASON_CHARS} characters"));
    }
    Ok(text.to_string())
}

/// Who runs this: SQLite has no users, so the process, by user id, process id and program.
fn who() -> String {
    let uid = {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata("/proc/self").map(|m| m.uid().to_string()).unwrap_or_else(|_| "?".into())
        }
        #[cfg(not(unix))]
        {
            "?".to_string()
        }
    };
    let program = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
    format!("uid {uid}, pid {}, {program}", std::process::id())
}

/// The mark a reset replaces, as the record shows it: the fence row raised
/// by its carrier, or the row as stored with the carrier it cannot read.
fn before_json(db: &Connection, resource: &str, stored: Option<&Stored>) -> Option<String> {
    let s = stored?;
    Some(match fence_in_row::current(db, resource) {
        Ok(Some(f)) => fence_json(&f, None),
        _ => fence_json(
            &Fence { lock: s.lock.clone(), high_water: s.high_water, sequence: s.sequence },
            s.carrier.as_deref(),
        ),
    })
}

/// Writes one record.
fn record(db: &Connection, resource: &str, reason: &str, before: Option<&str>, after: Option<&str>) -> Result<i64> {
    db.execute(
        "INSERT INTO main.fencing_resets(at, resource, who, reason, before, after) \
         VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ?1, ?2, ?3, ?4, ?5)",
        params![resource, who(), reason, before, after],
    )?;
    Ok(db.last_insert_rowid())
}

/// Records, for every fence row carried by the dropped table `label`, that
/// its mark stays as last written to `fencing_fences`. Run under `resetting`.
pub fn record_carrier_lost(db: &Connection, label: &str, reason: &str) -> Result<()> {
    let rows: Vec<(String, String, i64, Option<i64>)> = db
        .prepare("SELECT resource, lock, high_water, sequence FROM main.fencing_fences WHERE carrier = ?1")?
        .query_map([label], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_>>()?;
    for (resource, lock, high_water, sequence) in rows {
        let kept = Fence { lock, high_water: high_water.max(0) as u64, sequence: sequence.map(|s| s.max(0) as u64) };
        let before = fence_json(&kept, Some(label));
        let reason =
            format!("{reason} (the table protected as {label} was dropped: the tokens its rows carried are lost)");
        record(db, &resource, &reason, Some(&before), Some(&fence_json(&kept, None)))?;
    }
    Ok(())
}

/// `fencing_reset(resource, reason [, lock, high_water])`: what it did, and the record's id.
pub fn reset(ctx: &Context<'_>, s: &Session) -> Result<String> {
    if ctx.len() != 2 && ctx.len() != 4 {
        return Err(fail("fencing_reset(resource, reason [, lock, high_water]) takes 2 or 4 arguments"));
    }
    let resource = name(ctx, 0, "resource")?.ok_or_else(|| fail("fencing_reset: resource is NULL"))?;
    let reason = reason(text(ctx, 1, "reason")?.as_deref()).map_err(|why| fail(format!("fencing_reset: {why}")))?;
    let after = if ctx.len() == 4 {
        let lock = name(ctx, 2, "lock")?.ok_or_else(|| fail("fencing_reset: lock is NULL"))?;
        let high_water = unsigned(ctx, 3, "high_water")?.ok_or_else(|| fail("fencing_reset: high_water is NULL"))?;
        if high_water == 0 {
            return Err(fail("fencing_reset: high_water must be 1 or more (token 0 is never issued)"));
        }
        Some(Fence { lock, high_water, sequence: None })
    } else {
        None
    };
    // SAFETY: the connection running this function; its statements finish before it returns.
    let db = unsafe { ctx.get_connection()? };
    let (id, before) = in_savepoint(&db, "fencing_reset", || {
        ensure_tables(&db)?;
        let stored = fence_in_row::stored(&db, &resource)?;
        let before = before_json(&db, &resource, stored.as_ref());
        let after_json = after.as_ref().map(|f| fence_json(f, None));
        s.resetting(Resetting::Resource(resource.clone()), || {
            let id = record(&db, &resource, &reason, before.as_deref(), after_json.as_deref())?;
            match (&after, &stored) {
                (None, _) => db.execute("DELETE FROM main.fencing_fences WHERE resource = ?1", [&resource])?,
                (Some(f), Some(_)) => db.execute(
                    "UPDATE main.fencing_fences SET lock = ?2, high_water = ?3, sequence = NULL, carrier = NULL WHERE resource = ?1",
                    params![resource, f.lock, f.high_water as i64],
                )?,
                (Some(f), None) => db.execute(
                    "INSERT INTO main.fencing_fences(resource, lock, high_water) VALUES (?1, ?2, ?3)",
                    params![resource, f.lock, f.high_water as i64],
                )?,
            };
            Ok((id, before))
        })
    })?;
    let shown = |f: Option<&str>| f.unwrap_or("none").to_string();
    Ok(format!(
        "reset {resource:?}: {} -> {} (fencing_resets id {id})",
        shown(before.as_deref()),
        shown(after.as_ref().map(|f| fence_json(f, None)).as_deref())
    ))
}

/// `fencing_recording()`: 1 while this connection runs a reset, whose record the guard lets in.
pub fn recording(s: &Session) -> i64 {
    i64::from(s.lock().resetting.is_some())
}
