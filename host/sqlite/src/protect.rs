//! `fencing_protect` and `fencing_unprotect`: the fence table and the
//! triggers that decide every write of a protected table.
//!
//! Each protected table gets `BEFORE INSERT`, `BEFORE UPDATE` and `BEFORE
//! DELETE` row triggers. Each asks `fencing_check_row` about the row against
//! its resource's row in `fencing_fences` (read in the same statement), and
//! on admission upserts that row to the presented lock, token and sequence
//! (the admission's fence). A refusal fails the statement, so SQLite undoes
//! every row the statement had changed and no fence moves.
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

use crate::functions::{fail, policy, text};
use rusqlite::functions::Context;
use rusqlite::{OptionalExtension, Result};

const FENCES: &str = r#"
CREATE TABLE IF NOT EXISTS fencing_fences (
    resource   TEXT PRIMARY KEY NOT NULL,
    lock       TEXT NOT NULL,
    high_water INTEGER NOT NULL,
    sequence   INTEGER
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

/// `"name"`, with embedded quotes doubled.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `'text'`, with embedded quotes doubled.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

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

    fn lock(&self, row: &str) -> String {
        match &self.lock {
            Some(l) => format!("coalesce(fencing_presented_lock(), {}, {})", Self::at(row, l), self.resource(row)),
            None => format!("coalesce(fencing_presented_lock(), {})", self.resource(row)),
        }
    }

    /// The column's value when this write sets it, else the presented value.
    fn presented(op: &str, column: Option<&str>, fallback: &str) -> String {
        match (op, column) {
            ("insert", Some(c)) => format!("coalesce({}, {fallback})", Self::at("NEW", c)),
            ("update", Some(c)) => {
                let (new, old) = (Self::at("NEW", c), Self::at("OLD", c));
                format!("CASE WHEN {new} IS NOT {old} THEN {new} ELSE {fallback} END")
            }
            _ => fallback.to_string(),
        }
    }

    /// The trigger of one operation.
    fn trigger(&self, table: &str, op: &str, policy: &str) -> String {
        let row = if op == "delete" { "OLD" } else { "NEW" };
        let resource = self.resource(row);
        let lock = self.lock(row);
        let token = Self::presented(op, Some(&self.token), "fencing_presented_token()");
        let sequence = Self::presented(op, self.sequence.as_deref(), "fencing_presented_sequence()");
        let (name, t) = (ident(&format!("fencing_{table}_{op}")), literal(table));
        format!(
            "CREATE TRIGGER {name} BEFORE {kind} ON {on} FOR EACH ROW BEGIN\n\
             SELECT fencing_check_row({t}, {resource}, {lock}, {token}, {sequence}, {policy}, f.lock, f.high_water, f.sequence)\n\
             FROM (SELECT 1) LEFT JOIN fencing_fences f ON f.resource = {resource};\n\
             INSERT INTO fencing_fences(resource, lock, high_water, sequence) VALUES ({resource}, {lock}, {token}, {sequence})\n\
             ON CONFLICT(resource) DO UPDATE SET lock = excluded.lock, high_water = excluded.high_water, sequence = excluded.sequence;\n\
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
    let is_table: Option<String> = db
        .query_row("SELECT type FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [&table], |r| r.get(0))
        .optional()?;
    match is_table.as_deref() {
        Some("table") => {}
        Some(kind) => return Err(fail(format!("fencing_protect: {table} is a {kind}, not a table"))),
        None => return Err(fail(format!("fencing_protect: no table {table} in the main database"))),
    }
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
    let mut sql = String::from(FENCES);
    for name in trigger_names(&table) {
        sql.push_str(&format!("DROP TRIGGER IF EXISTS {name};\n"));
    }
    for op in ["insert", "update", "delete"] {
        sql.push_str(&cols.trigger(&table, op, policy.name()));
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
    Ok(format!(
        "protected {table}: resource {}, token {}, lock {}, sequence {}, policy {}",
        cols.resource,
        cols.token,
        cols.lock.as_deref().unwrap_or("(the resource)"),
        cols.sequence.as_deref().unwrap_or("(none)"),
        policy.name()
    ))
}

/// `fencing_unprotect(table)`: drops the triggers; the fences stay, so
/// protecting the table again continues from the same high-water marks.
pub fn unprotect(ctx: &Context<'_>) -> Result<String> {
    let table = text(ctx, 0, "table")?.ok_or_else(|| fail("fencing_unprotect: table is NULL"))?;
    // SAFETY: as in `protect`.
    let db = unsafe { ctx.get_connection()? };
    let sql: String = trigger_names(&table).iter().map(|n| format!("DROP TRIGGER IF EXISTS {n};\n")).collect();
    db.execute_batch(&sql)?;
    Ok(format!("unprotected {table}"))
}
