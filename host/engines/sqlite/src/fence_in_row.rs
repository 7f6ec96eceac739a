//! Fence in row: where a resource's mark lives when the protected row
//! carries its fence (the same idea as the PostgreSQL extension's
//! `fence_in_row`, chosen here by `fencing_protect` for every table that can).
//!
//! Writing the fence row on every write puts a second B-tree page into every
//! commit. When the row itself can hold the admitted token, the fence row is
//! left alone and names the table whose row carries the rest of the mark
//! (`fencing_fences.carrier`). The mark of a resource is then
//!
//! ```text
//! high_water = max(fence.high_water, carrier row's token)
//! sequence   = none if the carrier row's token is above fence.high_water, else fence.sequence
//! ```
//!
//! Invariants that keep that equal to the last admission:
//! - `carrier = T` is written only by a write whose row of `T` holds the
//!   admitted token afterwards, without a sequence; every later change of
//!   that row passes `T`'s triggers, which either leave the row holding the
//!   new admitted token (and skip the fence row) or rewrite the fence row.
//! - Only tables whose rows nothing can remove behind the triggers carry:
//!   the resource column is the table's key (the `INTEGER PRIMARY KEY` or
//!   the key of a `WITHOUT ROWID` table) and no other unique index exists,
//!   so `REPLACE` can only replace the same resource's row, which the
//!   INSERT trigger sees. A DELETE always rewrites the fence row.
//! - The extension reads a carrier's rows through the view
//!   `main."fencing_<label>_carried"` (`triggers.rs`), which SQLite rewrites
//!   when the table or its columns are renamed: the mark follows a rename.
//! - `fencing_unprotect` folds the carried tokens into the fence rows before
//!   the triggers go. A protected table dropped without it loses what its
//!   rows carried; every later decision on such a resource fails
//!   (`carrier_missing`) until `fencing_unprotect(table, reason)`
//!   acknowledges the loss, which is recorded as a reset (`reset.rs`).

use crate::args::{fail, ident, to_u64};
use crate::triggers::carried_view;
use fencing_runtime::Fence;
use rusqlite::{Connection, OptionalExtension, Result, params};

/// The registry of protected tables, by the name each was protected under
/// (its label; the table itself is found through the label's INSERT trigger).
pub const REGISTRY: &str = r#"
CREATE TABLE IF NOT EXISTS main.fencing_protected (
    tbl             TEXT PRIMARY KEY NOT NULL,
    resource_column TEXT NOT NULL,
    token_column    TEXT NOT NULL,
    fence_in_row    INTEGER NOT NULL
) WITHOUT ROWID;
"#;

/// A resource's row of `fencing_fences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub lock: String,
    pub high_water: u64,
    pub sequence: Option<u64>,
    pub carrier: Option<String>,
}

/// The mark of a fence row, given the token its carrier row holds (if any).
pub fn mark(lock: &str, high_water: u64, sequence: Option<u64>, carried: Option<u64>) -> Fence {
    match carried {
        Some(c) if c > high_water => Fence { lock: lock.to_string(), high_water: c, sequence: None },
        _ => Fence { lock: lock.to_string(), high_water, sequence },
    }
}

/// A carried token as SQL holds it: an admitted token is a non-negative integer.
pub fn carried_value(table: &str, resource: &str, value: Option<i64>) -> Result<Option<u64>> {
    let what = format!("guard_failure: table {table}, resource {resource:?}: the carrier row's token");
    value.map(|v| to_u64(v, &what)).transpose()
}

/// Whether `main` has a table (or view, index, trigger) named `name` exactly.
pub fn exists(db: &Connection, name: &str) -> Result<bool> {
    db.query_row("SELECT count(*) > 0 FROM main.sqlite_schema WHERE name = ?1", [name], |r| r.get(0))
}

/// The table the protection registered as `label` is on now (another name
/// after an `ALTER TABLE .. RENAME`), found through its INSERT trigger;
/// `None` when the triggers are gone (the table was dropped).
pub fn table_of(db: &Connection, label: &str) -> Result<Option<String>> {
    db.query_row(
        "SELECT tbl_name FROM main.sqlite_schema WHERE type = 'trigger' AND name = ?1",
        [format!("fencing_{label}_insert")],
        |r| r.get(0),
    )
    .optional()
}

/// The token that the row of carrier `label` for `resource` holds, read
/// through the label's view (so under the table's and columns' current names).
pub fn read_carried(db: &Connection, label: &str, resource: &str) -> Result<Option<u64>> {
    let missing = |why: String| {
        fail(format!(
            "fencing: carrier_missing: resource {resource:?}: part of its mark is carried by the rows of the table \
             protected as {label}, which cannot be read ({why}); if the table was dropped, \
             SELECT fencing_unprotect('{}', 'reason') keeps the mark as last written to fencing_fences and records \
             the loss; if it was renamed with legacy_alter_table on, rename it back",
            label.replace('\'', "''")
        ))
    };
    let sql = format!("SELECT token FROM main.{} WHERE resource = ?1", ident(&carried_view(label)));
    let mut stmt = db.prepare(&sql).map_err(|e| missing(e.to_string()))?;
    let value: Option<rusqlite::types::Value> =
        stmt.query_row([resource], |r| r.get(0)).optional().map_err(|e| missing(e.to_string()))?;
    match value {
        None | Some(rusqlite::types::Value::Null) => Ok(None),
        Some(rusqlite::types::Value::Integer(v)) => carried_value(label, resource, Some(v)),
        Some(other) => Err(fail(format!(
            "fencing: guard_failure: table {label}, resource {resource:?}: the carrier row's token is {:?}, not an integer",
            other.data_type()
        ))),
    }
}

/// The stored fence row of `resource`.
pub fn stored(db: &Connection, resource: &str) -> Result<Option<Stored>> {
    db.prepare("SELECT lock, high_water, sequence, carrier FROM main.fencing_fences WHERE resource = ?1")?
        .query_row([resource], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, Option<i64>>(2)?, r.get(3)?))
        })
        .optional()?
        .map(|(lock, high_water, sequence, carrier)| {
            let what = format!("guard_failure: resource {resource:?}: its fence row's");
            Ok(Stored {
                lock,
                high_water: to_u64(high_water, &format!("{what} high_water"))?,
                sequence: sequence.map(|s| to_u64(s, &format!("{what} sequence"))).transpose()?,
                carrier,
            })
        })
        .transpose()
}

/// The mark of `resource` as every protected table sees it; `None`: no fence yet.
pub fn current(db: &Connection, resource: &str) -> Result<Option<Fence>> {
    let Some(s) = stored(db, resource)? else { return Ok(None) };
    let carried = match &s.carrier {
        Some(c) => read_carried(db, c, resource)?,
        None => None,
    };
    Ok(Some(mark(&s.lock, s.high_water, s.sequence, carried)))
}

/// The number of fence rows whose carrier is `label`.
pub fn carried_count(db: &Connection, label: &str) -> Result<usize> {
    db.query_row("SELECT count(*) FROM main.fencing_fences WHERE carrier = ?1", [label], |r| r.get(0))
}

/// Folds what the rows of the table protected as `label` carry into the
/// fence rows that name it and clears those carriers; the marks stay what
/// they were. Returns the number of fence rows changed.
pub fn fold(db: &Connection, label: &str) -> Result<usize> {
    if carried_count(db, label)? == 0 {
        // Nothing to fold (a table that keeps its marks in fencing_fences has no view).
        return Ok(0);
    }
    let carried = format!(
        "(SELECT v.token FROM main.{view} AS v WHERE v.resource = fencing_fences.resource \
         AND typeof(v.token) = 'integer' AND v.token >= 0)",
        view = ident(&carried_view(label)),
    );
    db.execute(
        &format!(
            "UPDATE main.fencing_fences SET \
             sequence = CASE WHEN coalesce({carried}, -1) > fencing_fences.high_water THEN NULL ELSE fencing_fences.sequence END, \
             high_water = max(fencing_fences.high_water, coalesce({carried}, -1)), \
             carrier = NULL \
             WHERE carrier = ?1"
        ),
        params![label],
    )
}

/// Clears the carriers naming `label` whose table is gone: the marks stay as
/// last written to `fencing_fences` (the caller records the loss).
pub fn forget_carrier(db: &Connection, label: &str) -> Result<usize> {
    db.execute("UPDATE main.fencing_fences SET carrier = NULL WHERE carrier = ?1", [label])
}
