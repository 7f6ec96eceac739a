//! The SQL of a protected table's triggers (and, when its rows carry their
//! marks, the view the extension reads them through), generated from
//! validated identifiers, every one quoted.
//!
//! Each protected table gets `BEFORE INSERT`, `BEFORE UPDATE` and `BEFORE
//! DELETE` row triggers. A trigger's `WHEN` asks `fencing_check_row` about
//! the row against its resource's mark (the row of `fencing_fences`, raised
//! by a carrier row: `fence_in_row.rs`); a refusal fails the statement, so
//! SQLite undoes every row the statement had changed and no fence moves. An
//! admission whose row does not carry the new mark runs the trigger's body:
//! it sets the fence row to the presented lock, token and sequence (inserts
//! it, for the resource's first).
//!
//! Names: a trigger lives in the table's schema, and SQLite binds every
//! table a trigger or view of `main` reads to `main` itself, so a TEMP table
//! or an attached database's table of the same name cannot stand in for
//! `fencing_fences` or the protected table; the SQL says `main.` anyway where
//! SQLite allows it. The triggers and the view are named after the name the
//! table was protected under (its *label*); `ALTER TABLE .. RENAME` (of the
//! table or a column) rewrites their bodies and keeps their names, so the
//! protection follows the rename, and the extension finds a label's table
//! again through its INSERT trigger (`fence_in_row::table_of`).
//!
//! What a row presents:
//! - token: INSERT: the token column, else `fencing_present`'s token;
//!   UPDATE: the token column when the UPDATE changes it, else the presented
//!   token (a trigger cannot see whether the SET list named the column, so an
//!   unchanged token column is never taken as presented: a stale writer must
//!   not inherit the current holder's token); DELETE: the presented token;
//! - lock: the presented lock, else the lock column, else the resource;
//! - sequence: like the token, from the sequence column or the presented one.

use crate::args::{ident, literal};
use crate::schema::Shape;

/// The columns a protection uses, checked to exist.
pub struct Columns {
    pub resource: String,
    pub token: String,
    pub lock: Option<String>,
    pub sequence: Option<String>,
}

/// The names of a label's triggers.
pub fn trigger_names(label: &str) -> [String; 4] {
    ["insert", "update", "delete", "resource"].map(|op| format!("fencing_{label}_{op}"))
}

/// The name of the view a carrying table's marks are read through.
pub fn carried_view(label: &str) -> String {
    format!("fencing_{label}_carried")
}

/// The SQL that removes a label's triggers and view.
pub fn drop_sql(label: &str) -> String {
    let mut sql: String =
        trigger_names(label).iter().map(|n| format!("DROP TRIGGER IF EXISTS main.{};\n", ident(n))).collect();
    sql.push_str(&format!("DROP VIEW IF EXISTS main.{};\n", ident(&carried_view(label))));
    sql
}

impl Columns {
    /// `row."col"` for `row` NEW or OLD.
    fn at(row: &str, col: &str) -> String {
        format!("{row}.{}", ident(col))
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
                "(SELECT {tok} FROM main.{on} WHERE {res} = NEW.{res})",
                tok = ident(&self.token),
                on = ident(table),
                res = ident(&self.resource)
            ),
            _ => Self::at("OLD", &self.token),
        }
    }

    /// The trigger of one operation on `table`, protected as `label`.
    ///
    /// The check is the trigger's `WHEN`: it fails the statement on a
    /// refusal, and is true when the fence row must be written, so a write
    /// whose row carries the new mark runs no statement of its own. The
    /// aggregate reads the fence row in one lookup and yields one row (of
    /// NULLs) when there is none.
    pub fn trigger(&self, label: &str, table: &str, op: &str, policy: &str, shape: &Shape) -> String {
        let row = if op == "delete" { "OLD" } else { "NEW" };
        let resource = Self::at(row, &self.resource);
        let name = format!("CAST({resource} AS TEXT)");
        let lock = self.lock(row);
        let token = Self::presented(op, Some(&self.token));
        let sequence = Self::presented(op, self.sequence.as_deref());
        let (carried, row_token) = match (shape.in_row, op) {
            (true, "delete") => (self.carried(table, op), "NULL".to_string()),
            (true, _) => (self.carried(table, op), Self::at("NEW", &self.token)),
            (false, _) => ("NULL".to_string(), "NULL".to_string()),
        };
        let conflict = shape.conflict_sql(op, table, &self.resource);
        // An INSERT into a table keyed by its INTEGER PRIMARY KEY resource
        // sees an auto-assigned key as -1: `fencing_check_row` refuses it.
        let kind = literal(if op == "insert" && shape.rowid_key { "insert-rowid" } else { op });
        let t = literal(label);
        let check = |fence: &str| {
            format!(
                "fencing_check_row({t}, {kind}, {resource}, {lock}, {token}, {sequence}, {policy}, {fence}, {carried}, {row_token}, {conflict})",
                policy = literal(policy)
            )
        };
        // The body updates the fence row, or inserts it when there is none:
        // the INSERT's guard (which an INSERT OR REPLACE meets) runs only
        // for a resource's first fence row.
        let values = format!(
            "fencing_pending({name}, 'lock'), fencing_pending({name}, 'high_water'), \
             fencing_pending({name}, 'sequence'), CASE fencing_pending({name}, 'carrier') WHEN 2 THEN {t} END"
        );
        format!(
            "CREATE TRIGGER main.{trigger} BEFORE {when} ON {on} FOR EACH ROW\n\
             WHEN coalesce((SELECT {with_fence} FROM main.fencing_fences f WHERE f.resource = {name}), {without_fence}) > 0 BEGIN\n\
             UPDATE fencing_fences SET (lock, high_water, sequence, carrier) = ({values}) WHERE resource = {name};\n\
             INSERT INTO fencing_fences(resource, lock, high_water, sequence, carrier) SELECT {name}, {values} \
             WHERE NOT EXISTS (SELECT 1 FROM main.fencing_fences WHERE resource = {name});\n\
             END;\n",
            trigger = ident(&format!("fencing_{label}_{op}")),
            when = op.to_uppercase(),
            on = ident(table),
            with_fence = check("f.lock, f.high_water, f.sequence, f.carrier"),
            without_fence = check("NULL, NULL, NULL, NULL"),
        )
    }

    /// The trigger that keeps a protected row's resource.
    pub fn resource_trigger(&self, label: &str, table: &str) -> String {
        format!(
            "CREATE TRIGGER main.{name} BEFORE UPDATE OF {col} ON {on} FOR EACH ROW \
             WHEN NEW.{col} IS NOT OLD.{col} COLLATE BINARY BEGIN\n\
             SELECT RAISE(ABORT, 'fencing: the resource column of a protected table cannot change; delete the row and insert it anew');\n\
             END;\n",
            name = ident(&format!("fencing_{label}_resource")),
            col = ident(&self.resource),
            on = ident(table),
        )
    }

    /// The view a carrying table's marks are read through: SQLite rewrites
    /// it when the table or a column is renamed, so the extension reads the
    /// right column of the right table without knowing either name.
    pub fn carried_view(&self, label: &str, table: &str) -> String {
        format!(
            "CREATE VIEW main.{view} AS SELECT {res} AS resource, {tok} AS token FROM main.{on};\n",
            view = ident(&carried_view(label)),
            res = ident(&self.resource),
            tok = ident(&self.token),
            on = ident(table),
        )
    }
}
