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
//! - `fencing_unprotect` folds the carried tokens into the fence rows before
//!   the triggers go. A protected table dropped without it loses what its
//!   rows carried; every later decision on such a resource fails
//!   (`carrier_missing`) until `fencing_unprotect` acknowledges the loss.

use crate::args::{fail, ident, to_u64};
use fencing_runtime::Fence;
use rusqlite::{Connection, OptionalExtension, Result, params};

/// The registry of protected tables, read to find a carrier row.
pub const REGISTRY: &str = r#"
CREATE TABLE IF NOT EXISTS fencing_protected (
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

/// The protected table's resource and token columns, and whether its rows carry their fences.
pub fn registered(db: &Connection, table: &str) -> Result<Option<(String, String, bool)>> {
    db.prepare_cached("SELECT resource_column, token_column, fence_in_row FROM fencing_protected WHERE tbl = ?1")?
        .query_row([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
}

/// The token that `carrier`'s row for `resource` holds, read through the registry.
pub fn read_carried(db: &Connection, carrier: &str, resource: &str) -> Result<Option<u64>> {
    let missing = || {
        fail(format!(
            "fencing: carrier_missing: resource {resource:?}: part of its mark is carried by table {carrier}, which \
             is no longer protected (dropped?); run SELECT fencing_unprotect('{}') to keep the mark as last written",
            carrier.replace('\'', "''")
        ))
    };
    let Some((res, tok, _)) = registered(db, carrier)? else { return Err(missing()) };
    let sql = format!("SELECT {} FROM {} WHERE {} = ?1", ident(&tok), ident(carrier), ident(&res));
    let mut stmt = db.prepare_cached(&sql).map_err(|_| missing())?;
    let value: Option<rusqlite::types::Value> = stmt.query_row([resource], |r| r.get(0)).optional()?;
    match value {
        None | Some(rusqlite::types::Value::Null) => Ok(None),
        Some(rusqlite::types::Value::Integer(v)) => carried_value(carrier, resource, Some(v)),
        Some(other) => Err(fail(format!(
            "fencing: guard_failure: table {carrier}, resource {resource:?}: the carrier row's token is {:?}, not an integer",
            other.data_type()
        ))),
    }
}

/// The stored fence row of `resource`.
pub fn stored(db: &Connection, resource: &str) -> Result<Option<Stored>> {
    db.prepare_cached("SELECT lock, high_water, sequence, carrier FROM fencing_fences WHERE resource = ?1")?
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

/// Can `table`'s rows carry their fences? Only when nothing but its own
/// triggers can remove a resource's row: `resource` is the table's whole key
/// and no other unique index exists.
pub fn can_hold_fence_in_row(db: &Connection, table: &str, resource: &str) -> Result<bool> {
    let mut pk: Vec<(String, String)> = Vec::new();
    let mut stmt = db.prepare("SELECT name, upper(type) FROM pragma_table_info(?1) WHERE pk > 0")?;
    for row in stmt.query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))? {
        pk.push(row?);
    }
    // `pragma_table_list` is SQLite 3.37+; an older SQLite keeps every fence in `fencing_fences`.
    let without_rowid: bool = db
        .query_row("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [table], |r| r.get(0))
        .unwrap_or(false);
    // A rowid table whose key is not the rowid itself (`INTEGER PRIMARY KEY
    // DESC`, `INT PRIMARY KEY`) has a key index beside the rowid, and REPLACE
    // on the rowid could remove a row behind the triggers.
    let key_index: bool =
        db.query_row("SELECT count(*) > 0 FROM pragma_index_list(?1) WHERE origin = 'pk'", [table], |r| r.get(0))?;
    let key_is_resource = match pk.as_slice() {
        [(name, ty)] => name == resource && (without_rowid || (ty == "INTEGER" && !key_index)),
        _ => false,
    };
    let other_unique: i64 =
        db.query_row("SELECT count(*) FROM pragma_index_list(?1) WHERE \"unique\" AND origin != 'pk'", [table], |r| {
            r.get(0)
        })?;
    Ok(key_is_resource && other_unique == 0)
}

/// Folds what `table`'s rows carry into the fence rows that name it and
/// clears those carriers; `exists`: the table is still there (if not, the
/// carriers are cleared and the marks stay as last written). Returns the
/// number of fence rows changed.
pub fn fold(db: &Connection, table: &str, exists: bool) -> Result<usize> {
    let Some((res, tok, _)) = registered(db, table)?.filter(|_| exists) else {
        return db.execute("UPDATE fencing_fences SET carrier = NULL WHERE carrier = ?1", [table]);
    };
    let carried = format!(
        "(SELECT {tok} FROM {t} WHERE {res} = fencing_fences.resource AND typeof({tok}) = 'integer' AND {tok} >= 0)",
        tok = ident(&tok),
        t = ident(table),
        res = ident(&res),
    );
    db.execute(
        &format!(
            "UPDATE fencing_fences SET \
             sequence = CASE WHEN coalesce({carried}, -1) > fencing_fences.high_water THEN NULL ELSE fencing_fences.sequence END, \
             high_water = max(fencing_fences.high_water, coalesce({carried}, -1)), \
             carrier = NULL \
             WHERE carrier = ?1"
        ),
        params![table],
    )
}
