//! What a table must look like to be protected, and the keys its triggers
//! must watch: the fence is named by the key as the table compares it.
//!
//! A resource's fence is found by its **name**: an integer key by its
//! decimal form, a text key by its text. That is the key's own equality only
//! when the resource column compares byte for byte, so `fencing_protect`
//! refuses a resource column:
//! - whose collation is not `BINARY` (under `NOCASE`, `'INVOICE'` and
//!   `'invoice'` are one key but would be two fences);
//! - whose affinity is not INTEGER or TEXT (an untyped, NUMERIC or REAL
//!   column holds `5` and `5.0` as one key, and `5` and `'5'` as two keys
//!   with one decimal form).
//!
//! At write time a row's resource must be an integer or a text name (a real
//! or a blob is refused), and an INSERT into a table keyed by its `INTEGER
//! PRIMARY KEY` resource must name the key: SQLite assigns it after the
//! BEFORE triggers run and shows it to them as -1.
//!
//! A `REPLACE` (and `UPDATE OR REPLACE`, and an INSERT's `OR REPLACE` under
//! an UPSERT) deletes every row its new row collides with on a unique key,
//! and runs no DELETE trigger for them unless `recursive_triggers` is on. So
//! the INSERT and UPDATE triggers look for such rows themselves: on every
//! unique key of the table that does not hold the resource column compared
//! byte for byte (the rowid of a rowid table, a second UNIQUE column or
//! index, a key under another collation), a row of **another resource**
//! that the new row collides with fails the statement (`key_conflict`).
//! Collisions with rows of the same resource are the write the trigger
//! decides. A unique index on an expression, or a partial one, cannot be
//! written as such a lookup, and `fencing_protect` refuses the table.

use crate::args::{fail, ident};
use rusqlite::{Connection, Result, ffi};
use std::ffi::{CStr, CString};

/// A unique key the triggers watch for collisions with another resource's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key {
    /// The rowid of a rowid table (its name: `rowid`, `_rowid_` or `oid`,
    /// whichever is not a column).
    Rowid(&'static str),
    /// A unique index: its columns with the collation the index compares them by.
    Columns { index: String, columns: Vec<(String, String)> },
}

/// The protected table as its triggers need it.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The resource is the rowid (an `INTEGER PRIMARY KEY`).
    pub rowid_key: bool,
    /// The unique keys a new row may collide with another resource's row on.
    pub keys: Vec<Key>,
    /// The rows can carry their marks (`fence_in_row.rs`): nothing but the
    /// triggers can remove a resource's row.
    pub in_row: bool,
}

/// The declared type and collation of `table.column`, as SQLite reads them.
fn column_metadata(db: &Connection, table: &str, column: &str) -> Result<(String, String)> {
    let c = |s: &str| CString::new(s).map_err(|_| fail(format!("fencing_protect: {s:?} holds a NUL byte")));
    let (t, col) = (c(table)?, c(column)?);
    let mut declared: *const std::os::raw::c_char = std::ptr::null();
    let mut collation: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: a live connection; the out pointers are SQLite's, read before
    // anything can change the schema.
    let rc = unsafe {
        ffi::sqlite3_table_column_metadata(
            db.handle(),
            c"main".as_ptr(),
            t.as_ptr(),
            col.as_ptr(),
            &mut declared,
            &mut collation,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc != ffi::SQLITE_OK {
        return Err(fail(format!("fencing_protect: cannot read the column {column} of {table}")));
    }
    let read = |p: *const std::os::raw::c_char| {
        // SAFETY: SQLite's NUL-terminated strings, or NULL.
        if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() }
    };
    Ok((read(declared), read(collation)))
}

/// SQLite's affinity of a declared type (the rules of "Determination Of Column Affinity").
fn affinity(declared: &str) -> &'static str {
    let t = declared.to_ascii_uppercase();
    if t.contains("INT") {
        "INTEGER"
    } else if ["CHAR", "CLOB", "TEXT"].iter().any(|w| t.contains(w)) {
        "TEXT"
    } else if t.is_empty() || t.contains("BLOB") {
        "BLOB (none)"
    } else if ["REAL", "FLOA", "DOUB"].iter().any(|w| t.contains(w)) {
        "REAL"
    } else {
        "NUMERIC"
    }
}

/// Refuses a resource column whose equality is not its values' names'.
pub fn check_resource_column(db: &Connection, table: &str, column: &str) -> Result<()> {
    let (declared, collation) = column_metadata(db, table, column)?;
    if !collation.eq_ignore_ascii_case("BINARY") {
        return Err(fail(format!(
            "fencing_protect: the resource column {column} of {table} compares by collation {collation}: a fence is \
             named by the key's bytes, so two keys equal under {collation} would be two fences; declare the column \
             COLLATE BINARY (the default) and fold case in the application"
        )));
    }
    match affinity(&declared) {
        "INTEGER" | "TEXT" => Ok(()),
        other => Err(fail(format!(
            "fencing_protect: the resource column {column} of {table} is declared {declared:?}, affinity {other}: \
             such a column holds 5 and 5.0 as one key and 5 and '5' as two, which no one name per key can follow; \
             declare it INTEGER or TEXT"
        ))),
    }
}

/// The table's shape for a protection of `resource`, or why it cannot be protected.
pub fn shape(db: &Connection, table: &str, resource: &str) -> Result<Shape> {
    check_resource_column(db, table, resource)?;
    let columns: Vec<(String, String, i64)> = db
        .prepare("SELECT name, upper(type), pk FROM pragma_table_info(?1, 'main')")?
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_>>()?;
    // `pragma_table_list` is SQLite 3.37+; an older SQLite reads a rowid table.
    let without_rowid: bool = db
        .query_row("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1", [table], |r| r.get(0))
        .unwrap_or(false);
    let indexes: Vec<(String, String, bool)> = db
        .prepare("SELECT name, origin, partial FROM pragma_index_list(?1, 'main') WHERE \"unique\"")?
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_>>()?;
    let pk: Vec<&(String, String, i64)> = columns.iter().filter(|c| c.2 > 0).collect();
    // A rowid table whose key is not the rowid itself (`INTEGER PRIMARY KEY
    // DESC`, `INT PRIMARY KEY`) has a key index beside the rowid.
    let key_index = indexes.iter().any(|i| i.1 == "pk");
    let rowid_key =
        !without_rowid && !key_index && matches!(pk.as_slice(), [(n, t, _)] if n == resource && t == "INTEGER");

    let mut keys = Vec::new();
    let mut pk_by_resource = false;
    let mut other_unique = false;
    for (index, origin, partial) in &indexes {
        let cols: Vec<(i64, Option<String>, String)> = db
            .prepare("SELECT cid, name, coll FROM pragma_index_xinfo(?1, 'main') WHERE key")?
            .query_map([index], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_>>()?;
        if *partial || cols.iter().any(|c| c.0 < 0) {
            return Err(fail(format!(
                "fencing_protect: {table} has the unique index {index} {}: a REPLACE through it could delete another \
                 resource's row, and the triggers cannot look such a key up; make it a plain UNIQUE index or constraint",
                if *partial { "with a WHERE clause" } else { "on an expression" }
            )));
        }
        let by_resource =
            cols.iter().any(|(_, n, coll)| n.as_deref() == Some(resource) && coll.eq_ignore_ascii_case("BINARY"));
        if origin == "pk" {
            pk_by_resource = by_resource && cols.len() == 1;
        } else {
            other_unique = true;
        }
        if !by_resource {
            let columns = cols.into_iter().filter_map(|(_, n, coll)| n.map(|n| (n, coll))).collect();
            keys.push(Key::Columns { index: index.clone(), columns });
        }
    }
    if !without_rowid && !rowid_key {
        let free =
            ["rowid", "_rowid_", "oid"].into_iter().find(|r| !columns.iter().any(|c| c.0.eq_ignore_ascii_case(r)));
        let Some(rowid) = free else {
            return Err(fail(format!(
                "fencing_protect: {table} has columns named rowid, _rowid_ and oid, so its triggers cannot read its rowid"
            )));
        };
        keys.push(Key::Rowid(rowid));
    }
    let key_is_resource = rowid_key || (without_rowid && pk_by_resource);
    Ok(Shape { rowid_key, in_row: key_is_resource && !other_unique && keys.is_empty(), keys })
}

impl Shape {
    /// The SQL a trigger passes as `conflict`: the name of a resource whose
    /// row the new row collides with on a watched key, or NULL. `op` is
    /// `insert` or `update` (an UPDATE collides only on keys it changes).
    pub fn conflict_sql(&self, op: &str, table: &str, resource: &str) -> String {
        if self.keys.is_empty() || op == "delete" {
            return "NULL".to_string();
        }
        let res = ident(resource);
        let mut changed = Vec::new();
        let mut hits = Vec::new();
        for key in &self.keys {
            let (change, hit) = match key {
                Key::Rowid(r) => (format!("NEW.{r} IS NOT OLD.{r}"), format!("c.{r} = NEW.{r}")),
                Key::Columns { columns, .. } => {
                    let change = columns
                        .iter()
                        .map(|(c, _)| format!("NEW.{c} IS NOT OLD.{c} COLLATE BINARY", c = ident(c)))
                        .collect::<Vec<_>>()
                        .join(" OR ");
                    let hit = columns
                        .iter()
                        .map(|(c, coll)| format!("c.{c} = NEW.{c} COLLATE {coll}", c = ident(c), coll = ident(coll)))
                        .collect::<Vec<_>>()
                        .join(" AND ");
                    (format!("({change})"), format!("({hit})"))
                }
            };
            if op == "update" {
                hits.push(format!("({change} AND {hit})"));
                changed.push(change);
            } else {
                hits.push(hit);
            }
        }
        let lookup = format!(
            "(SELECT CAST(c.{res} AS TEXT) FROM main.{t} AS c WHERE ({}) AND c.{res} IS NOT NEW.{res} COLLATE BINARY LIMIT 1)",
            hits.join(" OR "),
            t = ident(table),
        );
        match op {
            "update" => format!("CASE WHEN {} THEN {lookup} END", changed.join(" OR ")),
            _ => lookup,
        }
    }
}
