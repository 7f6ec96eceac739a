//! `fencing_protect` and `fencing_unprotect`: the fence table and the
//! triggers that decide every write of a protected table.
//!
//! Each protected table gets `BEFORE INSERT`, `BEFORE UPDATE` and `BEFORE
//! DELETE` row triggers. A trigger's `WHEN` asks `fencing_check_row` about
//! the row against its resource's mark (the row of `fencing_fences`, raised
//! by a carrier row: `fence_in_row.rs`); a refusal fails the statement, so SQLite
//! undoes every row the statement had changed and no fence moves. An
//! admission whose row does not carry the new mark runs the trigger's body:
//! an upsert of the fence row to the presented lock, token and sequence (the
//! admission's fence).
//!
//! What a row presents:
//! - token: INSERT: the token column, else `fencing_present`'s token;
//!   UPDATE: the token column when the UPDATE changes it, else the presented
//!   token (a trigger cannot see whether the SET list named the column, so an
//!   unchanged token column is never taken as presented: a stale writer must
//!   not inherit the current holder's token); DELETE: the presented token;
//! - lock: the presented lock, else the lock column, else the resource;
//! - sequence: like the token, from the sequence column or the presented one.
//!
//! Identifiers are checked against the schema and quoted, so no argument
//! reaches the generated SQL unquoted.

use crate::args::{fail, ident, literal, policy, text};
use crate::fence_in_row;
use rusqlite::functions::Context;
use rusqlite::{Connection, OptionalExtension, Result};

const FENCES: &str = r#"
CREATE TABLE IF NOT EXISTS fencing_fences (
    resource   TEXT PRIMARY KEY NOT NULL,
    lock       TEXT NOT NULL,
    high_water INTEGER NOT NULL,
    sequence   INTEGER,
    carrier    TEXT
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS fencing_fences_forward BEFORE UPDATE ON fencing_fences
    WHEN NEW.high_water < OLD.high_water OR NEW.resource IS NOT OLD.resource
BEGIN
    SELECT RAISE(ABORT, 'fencing: a fence never moves backwards or to another resource');
END;
CREATE TRIGGER IF NOT EXISTS fencing_fences_kept BEFORE DELETE ON fencing_fences
BEGIN
    SELECT RAISE(ABORT, 'fencing: fences are kept; drop the trigger fencing_fences_kept to reset one on purpose');
END;
"#;

fn trigger_names(table: &str) -> [String; 4] {
    ["insert", "update", "delete", "resource"].map(|op| ident(&format!("fencing_{table}_{op}")))
}

/// The columns a protection uses, checked to exist.
struct Columns {
    resource: String,
    token: String,
    lock: Option<String>,
    sequence: Option<String>,
}

impl Columns {
    /// `row."col"` for `row` NEW or OLD.
    fn at(row: &str, col: &str) -> String {
        format!("{row}.{}", ident(col))
    }

    fn resource(&self, row: &str) -> String {
        format!("CAST({} AS TEXT)", Self::at(row, &self.resource))
    }

    /// The lock column's value; NULL (the presented lock, else the resource) without one.
    fn lock(&self, row: &str) -> String {
        self.lock.as_deref().map_or_else(|| "NULL".to_string(), |l| Self::at(row, l))
    }

    /// The column's value when this write sets it; NULL (the presented value) otherwise.
    fn presented(op: &str, column: Option<&str>) -> String {
        match (op, column) {
            ("insert", Some(c)) => Self::at("NEW", c),
            ("update", Some(c)) => {
                let (new, old) = (Self::at("NEW", c), Self::at("OLD", c));
                format!("CASE WHEN {new} IS NOT {old} THEN {new} END")
            }
            _ => "NULL".to_string(),
        }
    }

    /// The token this table's row for the resource holds before the write.
    fn carried(&self, table: &str, op: &str) -> String {
        match op {
            // An INSERT (or its REPLACE) meets the row it replaces, if any.
            "insert" => format!(
                "(SELECT {tok} FROM {on} WHERE {res} = NEW.{res})",
                tok = ident(&self.token),
                on = ident(table),
                res = ident(&self.resource)
            ),
            _ => Self::at("OLD", &self.token),
        }
    }

    /// The trigger of one operation; `in_row`: the table's rows carry their fences.
    ///
    /// The check is the trigger's `WHEN`: it fails the statement on a
    /// refusal, and is true when the fence row must be written, so a write
    /// whose row carries the new mark runs no statement of its own. The
    /// aggregate reads the fence row in one lookup and yields one row (of
    /// NULLs) when there is none.
    fn trigger(&self, table: &str, op: &str, policy: &str, in_row: bool) -> String {
        let row = if op == "delete" { "OLD" } else { "NEW" };
        let resource = self.resource(row);
        let lock = self.lock(row);
        let token = Self::presented(op, Some(&self.token));
        let sequence = Self::presented(op, self.sequence.as_deref());
        let (carried, row_token) = match (in_row, op) {
            (true, "delete") => (self.carried(table, op), "NULL".to_string()),
            (true, _) => (self.carried(table, op), Self::at("NEW", &self.token)),
            (false, _) => ("NULL".to_string(), "NULL".to_string()),
        };
        let (name, t) = (ident(&format!("fencing_{table}_{op}")), literal(table));
        format!(
            "CREATE TRIGGER {name} BEFORE {kind} ON {on} FOR EACH ROW\n\
             WHEN coalesce((SELECT fencing_check_row({t}, {resource}, {lock}, {token}, {sequence}, {policy}, \
             f.lock, f.high_water, f.sequence, f.carrier, {carried}, {row_token}) FROM fencing_fences f WHERE f.resource = {resource}), \
             fencing_check_row({t}, {resource}, {lock}, {token}, {sequence}, {policy}, NULL, NULL, NULL, NULL, NULL, {row_token})) > 0 BEGIN\n\
             INSERT INTO fencing_fences(resource, lock, high_water, sequence, carrier)\n\
             VALUES ({resource}, fencing_pending({resource}, 'lock'), fencing_pending({resource}, 'high_water'), \
             fencing_pending({resource}, 'sequence'), CASE fencing_pending({resource}, 'carrier') WHEN 2 THEN {t} END)\n\
             ON CONFLICT(resource) DO UPDATE SET lock = excluded.lock, high_water = excluded.high_water, \
             sequence = excluded.sequence, carrier = excluded.carrier;\n\
             END;\n",
            kind = op.to_uppercase(),
            on = ident(table),
            policy = literal(policy),
        )
    }
}

/// `fencing_protect(table, resource_column, token_column [, lock_column [, sequence_column [, policy]]])`.
pub fn protect(ctx: &Context<'_>) -> Result<String> {
    if !(3..=6).contains(&ctx.len()) {
        return Err(fail(
            "fencing_protect(table, resource_column, token_column [, lock_column [, sequence_column [, policy]]]) takes 3 to 6 arguments",
        ));
    }
    let arg =
        |i: usize, what: &str| -> Result<Option<String>> { if i < ctx.len() { text(ctx, i, what) } else { Ok(None) } };
    let table = arg(0, "table")?.ok_or_else(|| fail("fencing_protect: table is NULL"))?;
    let policy = policy(arg(5, "policy")?.as_deref())?;
    // SAFETY: the connection that runs this function; statements run on it
    // are finished before the function returns.
    let db = unsafe { ctx.get_connection()? };
    let table = match schema_entry(&db, &table)? {
        Some((name, kind)) if kind == "table" => name,
        Some((_, kind)) => return Err(fail(format!("fencing_protect: {table} is a {kind}, not a table"))),
        None => return Err(fail(format!("fencing_protect: no table {table} in the main database"))),
    };
    if table.starts_with("fencing_") {
        return Err(fail("fencing_protect: tables named fencing_* belong to the extension"));
    }
    let mut stmt = db.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names: Vec<String> = stmt.query_map([&table], |r| r.get(0))?.collect::<Result<_>>()?;
    let column = |i: usize, what: &str, required: bool| -> Result<Option<String>> {
        match arg(i, what)? {
            None if required => Err(fail(format!("fencing_protect: {what} is NULL"))),
            None => Ok(None),
            Some(c) => match names.iter().find(|n| n.eq_ignore_ascii_case(&c)) {
                Some(n) => Ok(Some(n.clone())),
                None => Err(fail(format!("fencing_protect: {table} has no column {c} ({what})"))),
            },
        }
    };
    let cols = Columns {
        resource: column(1, "resource_column", true)?.expect("required"),
        token: column(2, "token_column", true)?.expect("required"),
        lock: column(3, "lock_column", false)?,
        sequence: column(4, "sequence_column", false)?,
    };
    let in_row = in_savepoint(&db, "fencing_protect", || {
        ensure_tables(&db)?;
        if fence_in_row::registered(&db, &table)?.is_some() {
            if schema_entry(&db, &format!("fencing_{table}_insert"))?.is_none() {
                return Err(fail(format!(
                    "fencing_protect: {table} was protected and has lost its triggers (dropped and created again?), \
                     so the tokens its rows carried are gone; run SELECT fencing_unprotect('{}') to keep its \
                     resources' marks as last written, then protect it again",
                    table.replace('\'', "''")
                )));
            }
            fence_in_row::fold(&db, &table, true)?;
        }
        let in_row = fence_in_row::can_hold_fence_in_row(&db, &table, &cols.resource)?;
        db.execute(
            "INSERT OR REPLACE INTO fencing_protected(tbl, resource_column, token_column, fence_in_row) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![table, cols.resource, cols.token, in_row],
        )?;
        let mut sql = String::new();
        for name in trigger_names(&table) {
            sql.push_str(&format!("DROP TRIGGER IF EXISTS {name};\n"));
        }
        for op in ["insert", "update", "delete"] {
            sql.push_str(&cols.trigger(&table, op, policy.name(), in_row));
        }
        sql.push_str(&format!(
            "CREATE TRIGGER {name} BEFORE UPDATE OF {col} ON {on} FOR EACH ROW WHEN NEW.{col} IS NOT OLD.{col} BEGIN\n\
             SELECT RAISE(ABORT, 'fencing: the resource column of a protected table cannot change; delete the row and insert it anew');\n\
             END;\n",
            name = ident(&format!("fencing_{table}_resource")),
            col = ident(&cols.resource),
            on = ident(&table),
        ));
        db.execute_batch(&sql)?;
        Ok(in_row)
    })?;
    Ok(format!(
        "protected {table}: resource {}, token {}, lock {}, sequence {}, policy {}, marks {}",
        cols.resource,
        cols.token,
        cols.lock.as_deref().unwrap_or("(the resource)"),
        cols.sequence.as_deref().unwrap_or("(none)"),
        policy.name(),
        if in_row { "in the rows (fence in row)" } else { "in fencing_fences" }
    ))
}

/// `fencing_unprotect(table)`: folds what the table's rows carry into the
/// fences and drops the triggers; the fences stay, so protecting the table
/// again continues from the same marks. Works for a table that was dropped
/// while protected: its carried tokens are gone, and the marks stay as last
/// written to `fencing_fences`.
pub fn unprotect(ctx: &Context<'_>) -> Result<String> {
    let table = text(ctx, 0, "table")?.ok_or_else(|| fail("fencing_unprotect: table is NULL"))?;
    // SAFETY: as in `protect`.
    let db = unsafe { ctx.get_connection()? };
    let exists = schema_entry(&db, &table)?;
    let table = match (&exists, registered_name(&db, &table)?) {
        (_, Some(registered)) => registered,
        (Some((name, _)), None) => name.clone(),
        (None, None) => table,
    };
    let folded = in_savepoint(&db, "fencing_unprotect", || {
        ensure_tables(&db)?;
        let folded = fence_in_row::fold(&db, &table, exists.is_some())?;
        db.execute("DELETE FROM fencing_protected WHERE tbl = ?1", [&table])?;
        let sql: String = trigger_names(&table).iter().map(|n| format!("DROP TRIGGER IF EXISTS {n};\n")).collect();
        db.execute_batch(&sql)?;
        Ok(folded)
    })?;
    Ok(match (exists, folded) {
        (Some(_), 0) => format!("unprotected {table}"),
        (Some(_), n) => format!("unprotected {table}: {n} marks its rows carried moved into fencing_fences"),
        (None, n) => {
            format!("unprotected {table} (no longer exists): {n} marks stay as last written to fencing_fences")
        }
    })
}

/// The name and type of a schema object, found without regard to case.
fn schema_entry(db: &Connection, name: &str) -> Result<Option<(String, String)>> {
    db.query_row("SELECT name, type FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [name], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()
}

/// The registered spelling of a protected table's name.
fn registered_name(db: &Connection, table: &str) -> Result<Option<String>> {
    let exists: bool =
        db.query_row("SELECT count(*) > 0 FROM main.sqlite_schema WHERE name = 'fencing_protected'", [], |r| r.get(0))?;
    if !exists {
        return Ok(None);
    }
    db.query_row("SELECT tbl FROM fencing_protected WHERE tbl = ?1 COLLATE NOCASE", [table], |r| r.get(0)).optional()
}

/// The fence table and the registry of protected tables.
fn ensure_tables(db: &Connection) -> Result<()> {
    db.execute_batch(FENCES)?;
    db.execute_batch(fence_in_row::REGISTRY)
}

/// Runs `f` inside a savepoint: all of it happens, or none of it.
fn in_savepoint<T>(db: &Connection, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    db.execute_batch(&format!("SAVEPOINT {name}"))?;
    match f() {
        Ok(v) => {
            db.execute_batch(&format!("RELEASE {name}"))?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.execute_batch(&format!("ROLLBACK TO {name}; RELEASE {name}"));
            Err(e)
        }
    }
}
