//! The fence table `fencing_fences` and the guards that keep its marks.
//!
//! A row is a resource's fence: its lock, high-water mark, last sequence and,
//! when a protected table's rows carry the mark (`fence_in_row.rs`), that
//! table's name as `carrier`. The resource's **mark** is the row raised by
//! the token its carrier row holds.
//!
//! Invariants, each held by a trigger on the table (so they hold for every
//! statement of every connection, the extension's own included):
//! - **forward** (`fencing_fences_forward`, BEFORE UPDATE): an UPDATE never
//!   lowers a mark, whatever columns it sets. The mark after (the new row,
//!   raised by its carrier's row) is compared with the mark before: a lower
//!   high-water, another lock (a lock is bound for good: the rules refuse
//!   any other), a sequence that goes back at the same high-water, another
//!   resource, or a value that is not a name or a token is refused, and so
//!   is a lower stored high-water (no admission or fold writes one). So `SET
//!   carrier = NULL` under a carried mark is refused like `SET high_water = 1`.
//! - **kept** (`fencing_fences_kept`, BEFORE DELETE): a fence row is never
//!   deleted, except by `fencing_reset` (which records it).
//! - **new** (`fencing_fences_new`, BEFORE INSERT): an INSERT meeting an
//!   existing row is held to the forward rule too, so `INSERT OR REPLACE`
//!   cannot swap a fence row for a lower one (SQLite runs no DELETE trigger
//!   for the row a REPLACE removes unless `recursive_triggers` is on). The
//!   protected tables' trigger bodies insert a resource's first fence row
//!   and update it afterwards, which passes the forward guard: an admission
//!   is never lower than the mark it was decided against.
//!
//! The guards call the extension's functions, so a connection that has not
//! loaded the extension cannot change a fence row at all (`no such
//! function`), as it cannot write a protected table. The forward guard
//! decides the common case in SQL (same lock, no carrier, a higher or equal
//! high-water with its sequence not going back, values of the right types)
//! and calls the extension for the rest. Dropping a guard is
//! schema power: `docs/sqlite.md` says who has it and how an operator denies
//! it (`fencing_seal`).

use crate::args::{fail, name_of, to_u64};
use crate::fence_in_row::{self, mark};
use crate::session::{Resetting, Session};
use fencing_runtime::Fence;
use rusqlite::functions::Context;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Result};

/// The fence table and its guards; run by every function that creates or
/// changes fences, so an older database gets the current guards.
pub const FENCES: &str = r#"
CREATE TABLE IF NOT EXISTS main.fencing_fences (
    resource   TEXT PRIMARY KEY NOT NULL,
    lock       TEXT NOT NULL,
    high_water INTEGER NOT NULL,
    sequence   INTEGER,
    carrier    TEXT
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS main.fencing_fences_forward;
CREATE TRIGGER main.fencing_fences_forward BEFORE UPDATE ON fencing_fences
    WHEN NOT coalesce(NEW.resource IS OLD.resource AND NEW.lock IS OLD.lock
                      AND OLD.carrier IS NULL AND NEW.carrier IS NULL
                      AND typeof(NEW.high_water) = 'integer'
                      AND (NEW.sequence IS NULL OR (typeof(NEW.sequence) = 'integer' AND NEW.sequence >= 0))
                      AND (NEW.high_water > OLD.high_water
                           OR (NEW.high_water = OLD.high_water
                               AND (OLD.sequence IS NULL OR NEW.sequence >= OLD.sequence))), 0)
     AND fencing_fence_update(OLD.resource, OLD.lock, OLD.high_water, OLD.sequence, OLD.carrier,
                              NEW.resource, NEW.lock, NEW.high_water, NEW.sequence, NEW.carrier)
BEGIN
    SELECT RAISE(ABORT, 'fencing: a fence never moves backwards');
END;
DROP TRIGGER IF EXISTS main.fencing_fences_kept;
CREATE TRIGGER main.fencing_fences_kept BEFORE DELETE ON fencing_fences
    WHEN fencing_fence_delete(OLD.resource) = 0
BEGIN
    SELECT RAISE(ABORT, 'fencing: fences are kept; SELECT fencing_reset(resource, reason) removes or re-binds one and records it');
END;
DROP TRIGGER IF EXISTS main.fencing_fences_new;
CREATE TRIGGER main.fencing_fences_new BEFORE INSERT ON fencing_fences
    WHEN coalesce((SELECT fencing_fence_update(o.resource, o.lock, o.high_water, o.sequence, o.carrier,
                                               NEW.resource, NEW.lock, NEW.high_water, NEW.sequence, NEW.carrier)
                   FROM main.fencing_fences AS o WHERE o.resource = NEW.resource),
                  fencing_fence_insert(NEW.resource, NEW.lock, NEW.high_water, NEW.sequence, NEW.carrier))
BEGIN
    SELECT RAISE(ABORT, 'fencing: a fence never moves backwards');
END;
"#;

/// One side of a fence row, as a guard receives it.
struct Row {
    resource: String,
    lock: String,
    high_water: u64,
    sequence: Option<u64>,
    carrier: Option<String>,
}

impl Row {
    /// Arguments `at..at + 5` as a fence row; a value that is not a name or
    /// a token fails the statement (a fence row holds nothing else).
    fn read(ctx: &Context<'_>, at: usize) -> Result<Row> {
        let name = |i: usize, what: &str| -> Result<String> {
            name_of(ctx.get_raw(at + i)).map_err(|why| fail(format!("fencing: a fence row's {what} {why}")))
        };
        let number = |i: usize, what: &str| -> Result<Option<u64>> {
            match ctx.get_raw(at + i) {
                ValueRef::Null => Ok(None),
                ValueRef::Integer(v) => to_u64(v, &format!("a fence row's {what}")).map(Some),
                other => {
                    Err(fail(format!("fencing: a fence row's {what} must be an integer, got {}", other.data_type())))
                }
            }
        };
        let carrier = match ctx.get_raw(at + 4) {
            ValueRef::Null => None,
            ValueRef::Text(t) => Some(String::from_utf8_lossy(t).into_owned()),
            other => {
                return Err(fail(format!("fencing: a fence row's carrier must be text, got {}", other.data_type())));
            }
        };
        Ok(Row {
            resource: name(0, "resource")?,
            lock: name(1, "lock")?,
            high_water: number(2, "high_water")?.ok_or_else(|| fail("fencing: a fence row's high_water is NULL"))?,
            sequence: number(3, "sequence")?,
            carrier,
        })
    }

    /// The mark this row stands for: raised by its carrier's row.
    fn mark(&self, db: &Connection) -> Result<Fence> {
        let carried = match &self.carrier {
            Some(c) => fence_in_row::read_carried(db, c, &self.resource)?,
            None => None,
        };
        Ok(mark(&self.lock, self.high_water, self.sequence, carried))
    }
}

/// Why `after` is lower than `before`, if it is.
pub fn lowered(before: &Fence, after: &Fence) -> Option<String> {
    if after.lock != before.lock {
        return Some(format!("re-binds it from lock {:?} to {:?}", before.lock, after.lock));
    }
    if after.high_water < before.high_water {
        return Some(format!("lowers its mark from {} to {}", before.high_water, after.high_water));
    }
    match (before.sequence, after.sequence) {
        (Some(b), a) if after.high_water == before.high_water && a.is_none_or(|a| a < b) => {
            Some(format!("takes its sequence back from {b} at high_water {}", before.high_water))
        }
        _ => None,
    }
}

/// `fencing_fence_update(old row.., new row..)`: 0 when the UPDATE keeps
/// every mark; fails the statement otherwise.
pub fn update(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    let (old, new) = (Row::read(ctx, 0)?, Row::read(ctx, 5)?);
    if new.resource != old.resource {
        return Err(fail(format!(
            "fencing: a fence never moves to another resource ({:?} to {:?})",
            old.resource, new.resource
        )));
    }
    let allowed = match &s.lock().resetting {
        Some(Resetting::Resource(r)) => *r == old.resource,
        Some(Resetting::CarrierLost(c)) => old.carrier.as_deref() == Some(c.as_str()) && new.carrier.is_none(),
        None => false,
    };
    if allowed {
        return Ok(0);
    }
    if new.high_water < old.high_water {
        // Never needed by an admission (it raises the row to the admitted
        // token, at or above the mark) nor by a fold (which takes the larger).
        return Err(fail(format!(
            "fencing: fence_lowered: resource {:?}: the UPDATE of fencing_fences lowers its stored high_water from {} \
             to {}; a fence never moves backwards (SELECT fencing_reset(resource, reason [, lock, high_water]) \
             removes or re-binds one and records it)",
            old.resource, old.high_water, new.high_water
        )));
    }
    // SAFETY: the connection running this trigger; its reads finish before returning.
    let db = unsafe { ctx.get_connection()? };
    let before = old.mark(&db)?;
    let after = new.mark(&db)?;
    match lowered(&before, &after) {
        None => Ok(0),
        Some(why) => Err(fail(format!(
            "fencing: fence_lowered: resource {:?}: the UPDATE of fencing_fences {why}; a fence never moves backwards \
             (SELECT fencing_reset(resource, reason [, lock, high_water]) removes or re-binds one and records it)",
            old.resource
        ))),
    }
}

/// `fencing_fence_delete(resource)`: 1 while `fencing_reset` removes this
/// resource's fence, 0 otherwise (the DELETE is refused).
pub fn delete(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    let resource = name_of(ctx.get_raw(0)).unwrap_or_default();
    Ok(i64::from(matches!(&s.lock().resetting, Some(Resetting::Resource(r)) if *r == resource)))
}

/// `fencing_fence_insert(new row..)`: 0 when the new fence row (of a
/// resource that has none) holds a name and a token; fails the statement
/// otherwise. An INSERT meeting an existing row is decided by
/// [`update`], as an UPDATE from that row to the new one.
pub fn insert(ctx: &Context<'_>) -> Result<i64> {
    Row::read(ctx, 0).map(|_| 0)
}
