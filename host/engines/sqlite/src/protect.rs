//! `fencing_protect` and `fencing_unprotect`: a table's protection, given and
//! taken, without losing a mark.
//!
//! - `fencing_protect(table, ..)` checks the table (`schema.rs`), writes its
//!   registration, triggers and (when its rows carry their marks) view
//!   (`triggers.rs`). Protecting again keeps the marks: what the rows carry
//!   is folded into `fencing_fences` first. A table renamed while protected
//!   keeps working under its old registration; protecting it again under its
//!   new name moves the registration (folding its marks on the way).
//! - `fencing_unprotect(table)` folds the carried marks into `fencing_fences`
//!   and drops the triggers; the fences stay. For a table dropped while
//!   protected, the marks its rows carried are gone: unprotecting it then
//!   needs a reason (`fencing_unprotect(table, reason)`), keeps the marks as
//!   last written to `fencing_fences`, and records the loss as a reset.
//!
//! Every statement runs in one savepoint: all of it happens, or none.

use crate::args::{fail, policy, text};
use crate::fence_in_row::{self, carried_count, exists, fold, table_of};
use crate::reset;
use crate::schema;
use crate::session::{Resetting, Session};
use crate::tables::{ensure_tables, in_savepoint};
use crate::triggers::{Columns, drop_sql};
use rusqlite::functions::Context;
use rusqlite::{Connection, OptionalExtension, Result};

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
    let names: Vec<String> = db
        .prepare("SELECT name FROM pragma_table_info(?1, 'main')")?
        .query_map([&table], |r| r.get(0))?
        .collect::<Result<_>>()?;
    let column = |i: usize, what: &str| -> Result<Option<String>> {
        match arg(i, what)? {
            None => Ok(None),
            Some(c) => match names.iter().find(|n| n.eq_ignore_ascii_case(&c)) {
                Some(n) => Ok(Some(n.clone())),
                None => Err(fail(format!("fencing_protect: {table} has no column {c} ({what})"))),
            },
        }
    };
    let required = |i: usize, what: &str| -> Result<String> {
        column(i, what)?.ok_or_else(|| fail(format!("fencing_protect: {what} is NULL")))
    };
    let cols = Columns {
        resource: required(1, "resource_column")?,
        token: required(2, "token_column")?,
        lock: column(3, "lock_column")?,
        sequence: column(4, "sequence_column")?,
    };
    let shape = schema::shape(&db, &table, &cols.resource)?;
    if shape.in_row {
        let view = crate::triggers::carried_view(&table);
        if let Some((name, kind)) = schema_entry(&db, &view)?.filter(|(_, kind)| kind != "view") {
            return Err(fail(format!(
                "fencing_protect: {table}'s rows carry their marks, read through the extension's view {view}, but \
                 main.{name} is a {kind} of its own: rename or drop it, then protect {table}"
            )));
        }
    }
    in_savepoint(&db, "fencing_protect", || {
        ensure_tables(&db)?;
        take_over(&db, &table)?;
        db.execute(
            "INSERT OR REPLACE INTO main.fencing_protected(tbl, resource_column, token_column, fence_in_row) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![table, cols.resource, cols.token, shape.in_row],
        )?;
        let mut sql = drop_sql(&table);
        for op in ["insert", "update", "delete"] {
            sql.push_str(&cols.trigger(&table, &table, op, policy.name(), &shape));
        }
        sql.push_str(&cols.resource_trigger(&table, &table));
        if shape.in_row {
            sql.push_str(&cols.carried_view(&table, &table));
        }
        db.execute_batch(&sql)
    })?;
    Ok(format!(
        "protected {table}: resource {}, token {}, lock {}, sequence {}, policy {}, marks {}",
        cols.resource,
        cols.token,
        cols.lock.as_deref().unwrap_or("(the resource)"),
        cols.sequence.as_deref().unwrap_or("(none)"),
        policy.name(),
        if shape.in_row { "in the rows (fence in row)" } else { "in fencing_fences" }
    ))
}

/// Before `table` is (re-)protected under its own name: folds the marks of
/// every registration whose triggers sit on it (itself, or the name it had
/// before a rename) and removes those registrations; refuses when the
/// registration under its name belongs to another table or lost its table.
fn take_over(db: &Connection, table: &str) -> Result<()> {
    if let Some(label) = registered_label(db, table)? {
        match table_of(db, &label)? {
            Some(on) if on.eq_ignore_ascii_case(table) => {}
            Some(on) => {
                return Err(fail(format!(
                    "fencing_protect: the protection registered as {label} is on table {on} now (renamed); protect \
                     {on} again under its name first (SELECT fencing_protect('{}', ..)), then {table}",
                    on.replace('\'', "''")
                )));
            }
            None if carried_count(db, &label)? > 0 => {
                return Err(fail(format!(
                    "fencing_protect: {table} was protected and has lost its triggers (dropped and created again?), so \
                     the tokens its rows carried are gone; SELECT fencing_unprotect('{}', 'reason') keeps its \
                     resources' marks as last written and records the loss, then protect it again",
                    table.replace('\'', "''")
                )));
            }
            None => forget(db, &label)?,
        }
    }
    for label in labels_on(db, table)? {
        fold(db, &label)?;
        forget(db, &label)?;
    }
    Ok(())
}

/// Removes a registration, its triggers and its view.
fn forget(db: &Connection, label: &str) -> Result<()> {
    db.execute("DELETE FROM main.fencing_protected WHERE tbl = ?1", [label])?;
    db.execute_batch(&drop_sql(label))
}

/// The labels whose triggers sit on `table`.
fn labels_on(db: &Connection, table: &str) -> Result<Vec<String>> {
    if !exists(db, "fencing_protected")? {
        return Ok(Vec::new());
    }
    db.prepare(
        "SELECT p.tbl FROM main.fencing_protected AS p JOIN main.sqlite_schema AS s \
         ON s.type = 'trigger' AND s.name = 'fencing_' || p.tbl || '_insert' WHERE s.tbl_name = ?1 COLLATE NOCASE",
    )?
    .query_map([table], |r| r.get(0))?
    .collect()
}

/// The registered label spelled like `table`, without regard to case.
fn registered_label(db: &Connection, table: &str) -> Result<Option<String>> {
    if !exists(db, "fencing_protected")? {
        return Ok(None);
    }
    db.query_row("SELECT tbl FROM main.fencing_protected WHERE tbl = ?1 COLLATE NOCASE", [table], |r| r.get(0))
        .optional()
}

/// `fencing_unprotect(table [, reason])`: folds what the table's rows carry
/// into the fences and drops the triggers; the fences stay, so protecting the
/// table again continues from the same marks. `table` is the table's current
/// name or the name it was protected under. For a table dropped while
/// protected whose rows carried marks, `reason` is required: the marks stay
/// as last written to `fencing_fences`, and each is recorded as a reset.
pub fn unprotect(ctx: &Context<'_>, s: &Session) -> Result<String> {
    if !(1..=2).contains(&ctx.len()) {
        return Err(fail("fencing_unprotect(table [, reason]) takes 1 or 2 arguments"));
    }
    let named = text(ctx, 0, "table")?.ok_or_else(|| fail("fencing_unprotect: table is NULL"))?;
    let reason = if ctx.len() > 1 { text(ctx, 1, "reason")? } else { None };
    // SAFETY: as in `protect`.
    let db = unsafe { ctx.get_connection()? };
    let label = match labels_on(&db, &named)?.into_iter().next() {
        Some(label) => label,
        None => match registered_label(&db, &named)? {
            Some(label) => label,
            None => return Ok(format!("{named} is not protected")),
        },
    };
    let table = table_of(&db, &label)?;
    if let Some(on) = table.as_ref().filter(|on| !on.eq_ignore_ascii_case(&named))
        && schema_entry(&db, &named)?.is_some()
    {
        // `named` is another table now: the protection of that name moved with a rename.
        return Err(fail(format!(
            "fencing_unprotect: {named} is not protected; the protection registered under that name is on table \
             {on} now (renamed): SELECT fencing_unprotect('{}') unprotects that one",
            on.replace('\'', "''")
        )));
    }
    let out = in_savepoint(&db, "fencing_unprotect", || {
        ensure_tables(&db)?;
        let folded = match &table {
            Some(_) => fold(&db, &label)?,
            None => {
                let lost = carried_count(&db, &label)?;
                if lost > 0 {
                    let reason = reset::reason(reason.as_deref()).map_err(|why| {
                        fail(format!(
                            "fencing_unprotect: {label} was dropped while protected, and the tokens its rows carried \
                             for {lost} resources are gone; SELECT fencing_unprotect('{}', 'reason') keeps their marks as \
                             last written to fencing_fences (lower than they were) and records the loss ({why})",
                            label.replace('\'', "''")
                        ))
                    })?;
                    s.resetting(Resetting::CarrierLost(label.clone()), || {
                        reset::record_carrier_lost(&db, &label, &reason)?;
                        fence_in_row::forget_carrier(&db, &label)
                    })?
                } else {
                    0
                }
            }
        };
        forget(&db, &label)?;
        Ok(folded)
    })?;
    Ok(match (table, out) {
        (Some(t), 0) => format!("unprotected {t}"),
        (Some(t), n) => format!("unprotected {t}: {n} marks its rows carried moved into fencing_fences"),
        (None, n) => format!(
            "unprotected {label} (no longer exists): {n} marks stay as last written to fencing_fences (recorded in fencing_resets)"
        ),
    })
}

/// The name and type of a schema object, found without regard to case.
fn schema_entry(db: &Connection, name: &str) -> Result<Option<(String, String)>> {
    db.query_row("SELECT name, type FROM main.sqlite_schema WHERE name = ?1 COLLATE NOCASE", [name], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .optional()
}
