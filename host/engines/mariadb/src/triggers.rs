//! The triggers of a protected table, generated from names `fencing.protect`
//! has checked against the catalog.
//!
//! MariaDB calls no UDF for a table by itself: `fencing.protect` asks
//! `fencing_trigger_sql(..)` for each trigger's `CREATE TRIGGER` and runs it
//! (a procedure may run a prepared `CREATE TRIGGER`). The triggers run as
//! their definer (the account `fencing.protect` runs as), read the
//! resource's fence with the fence row locked, ask `fencing_check` for the
//! component's verdict and on a refusal `CALL fencing.refuse(code,
//! fencing_refusal(..))`, which raises the message with the code's SQLSTATE;
//! an admission writes the new fence in the writing transaction.
//!
//! Two places for a resource's mark:
//! - **fence rows** (the default): `fencing.fences` holds every mark (by
//!   schema and resource: a schema's tables share their resources). Every
//!   INSERT, UPDATE and DELETE is decided in a `BEFORE` trigger against the
//!   fence row, read `FOR UPDATE`, and raises it.
//! - **fence in the row** (`fence_in_row`): a table with one row per
//!   resource (the resource column is its primary key) keeps the mark in the
//!   row: the token column is the high-water mark, the lock column (else the
//!   resource) its lock, the sequence column its last sequence. An UPDATE is
//!   decided against the old row, which the UPDATE holds locked, and writes
//!   nothing else. An INSERT is decided in an `AFTER INSERT` trigger (so that
//!   `REPLACE`, whose DELETE half runs between, and `INSERT .. ON DUPLICATE
//!   KEY UPDATE`, whose insert half never happens, are decided once against
//!   what is there) against the fence row, which it then marks as *carried*
//!   by the table; a DELETE gives the mark back to the fence row.
//!
//! What a row presents: the token column when the statement sets it (INSERT:
//! not NULL; UPDATE: changed), else `@fencing_token`, written into the row;
//! the lock `@fencing_lock`, else the lock column, else the resource; the
//! sequence column when set, else `@fencing_sequence`. A DELETE presents the
//! session's values only. A resource column never changes (delete and insert).

use std::fmt::Write as _;

/// A protected table, as `fencing.protect` checked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub schema: String,
    pub table: String,
    pub resource: String,
    /// Whether the resource column is a string type (its bytes are the
    /// name); other types are named by `CAST(.. AS CHAR)`.
    pub resource_is_text: bool,
    pub token: String,
    pub lock: Option<String>,
    pub sequence: Option<String>,
    /// `non-decreasing` or `strictly-increasing`, checked by the caller.
    pub policy: String,
    pub fence_in_row: bool,
}

/// The events a table's triggers answer; `ai` only with the fence in the row.
pub const EVENTS: [&str; 4] = ["bi", "bu", "bd", "ai"];

/// `name` as an identifier.
fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` as a string literal (names with a backslash are refused by
/// `fencing.protect`, so no escape depends on `NO_BACKSLASH_ESCAPES`).
pub fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Why a name cannot be used in generated SQL.
pub fn unusable(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.contains('\\') {
        Some("contains a backslash")
    } else if name.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    }
}

impl Spec {
    /// `db.table`, as messages and carriers name the table.
    pub fn qualified(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }

    /// The trigger's name for `event` (trigger names are per schema).
    pub fn trigger_name(&self, event: &str) -> String {
        format!("fencing_{}_{event}", self.table)
    }

    fn col(&self, row: &str, name: &str) -> String {
        format!("{row}.{}", ident(name))
    }

    /// The resource's name in `row` (`NEW` or `OLD`).
    fn resource(&self, row: &str) -> String {
        let c = self.col(row, &self.resource);
        if self.resource_is_text { c } else { format!("CAST({c} AS CHAR)") }
    }

    fn lock_col(&self, row: &str) -> Option<String> {
        self.lock.as_ref().map(|l| self.col(row, l))
    }

    fn seq_col(&self, row: &str) -> Option<String> {
        self.sequence.as_ref().map(|s| self.col(row, s))
    }

    /// The presented lock: `@fencing_lock`, else the lock column of `row`.
    fn presented_lock(&self, row: &str) -> String {
        match self.lock_col(row) {
            Some(l) => format!("COALESCE(@fencing_lock, {l})"),
            None => "@fencing_lock".into(),
        }
    }

    /// The presented sequence of an INSERT or UPDATE.
    fn presented_seq(&self, update: bool) -> String {
        match (self.seq_col("NEW"), update) {
            (None, _) => "@fencing_sequence".into(),
            (Some(s), false) => format!("COALESCE({s}, @fencing_sequence)"),
            (Some(s), true) => {
                let old = self.seq_col("OLD").unwrap_or_default();
                format!("IF({s} <=> {old}, COALESCE(@fencing_sequence, {s}), {s})")
            }
        }
    }

    /// `CREATE TRIGGER` for `event` (one of [`EVENTS`]); `None` for `ai` with fence rows.
    pub fn trigger(&self, event: &str) -> Option<String> {
        let (timing, what) = match event {
            "bi" => ("BEFORE", "INSERT"),
            "bu" => ("BEFORE", "UPDATE"),
            "bd" => ("BEFORE", "DELETE"),
            "ai" if self.fence_in_row => ("AFTER", "INSERT"),
            _ => return None,
        };
        let body = match (event, self.fence_in_row) {
            ("bi", false) => self.fence_row_write("NEW", false),
            ("bu", false) => self.fence_row_write("NEW", true),
            ("bd", false) => self.fence_row_write("OLD", false),
            ("bi", true) => self.in_row_before_insert(),
            ("bu", true) => self.in_row_update(),
            ("bd", true) => self.in_row_delete(),
            _ => self.in_row_after_insert(),
        };
        Some(format!(
            "CREATE TRIGGER {}.{} {timing} {what} ON {}.{} FOR EACH ROW\nBEGIN\n{}{body}END",
            ident(&self.schema),
            ident(&self.trigger_name(event)),
            ident(&self.schema),
            ident(&self.table),
            DECLARATIONS
        ))
    }

    /// `fencing_check`'s arguments after the resource: fence, presented lock, token, sequence, and the settings.
    fn check_args(&self, resource: &str, fence: [&str; 3], lock: &str, token: &str, seq: &str) -> String {
        format!(
            "{resource}, {}, {}, {}, {lock}, {token}, {seq}, {}, k, @fencing_proof, pl",
            fence[0],
            fence[1],
            fence[2],
            literal(&self.policy)
        )
    }

    /// Decides with `fencing_check`, and refuses on anything but an admission.
    fn decide(&self, args: &str) -> String {
        self.decide_unless(args, "")
    }

    /// [`Spec::decide`], letting through what `unless` (a condition, `AND ..`) holds for.
    fn decide_unless(&self, args: &str, unless: &str) -> String {
        format!(
            "  SET c = fencing_check({args});\n  IF c <> 0{unless} THEN CALL fencing.refuse(c, fencing_refusal(c, {}, {args}, NULL)); END IF;\n",
            literal(&self.qualified())
        )
    }

    /// What lets an operator's reset (`fencing.reset_fence`) rewrite a row
    /// that carries its mark: its own uncommitted note, for this resource and
    /// the token being written, which no other transaction can see.
    fn unless_resetting(&self, token: &str) -> String {
        format!(
            " AND NOT EXISTS (SELECT 1 FROM fencing.resetting WHERE connection = CONNECTION_ID() AND schema_name = {} AND resource = {} AND high_water <=> {token})",
            literal(&self.schema),
            self.resource("NEW")
        )
    }

    /// Refuses with a fixed message (a static refusal of the table's own rules).
    fn refuse(&self, code: i64, reason: &str, text: &str) -> String {
        let message = format!("fencing: {reason}: table {}: {text}", self.qualified());
        format!("CALL fencing.refuse({code}, {})", literal(&message))
    }

    /// Refuses an UPDATE that changes the resource column.
    fn no_move(&self) -> String {
        format!(
            "  IF NOT ({} <=> {}) THEN {}; END IF;\n",
            self.col("NEW", &self.resource),
            self.col("OLD", &self.resource),
            self.refuse(
                20,
                "resource_moved",
                "a protected row cannot move to another resource (delete it and insert the new one)"
            )
        )
    }

    /// Decides the presented token, from the row (`row_token`) unless
    /// `from_session` holds, then from `@fencing_token`, which is written
    /// into the row once admitted; `unless` lets a refusal through (a reset).
    fn decide_token(
        &self,
        from_session: &str,
        row_token: &str,
        args_with: impl Fn(&str) -> String,
        unless: impl Fn(&str) -> String,
    ) -> String {
        let tok = self.col("NEW", &self.token);
        let session = self.decide_unless(&args_with("@fencing_token"), &unless("@fencing_token"));
        let row = self.decide_unless(&args_with(row_token), &unless(row_token));
        format!("  IF {from_session} THEN\n{session}    SET {tok} = @fencing_token;\n  ELSE\n{row}  END IF;\n")
    }

    /// Writes the presented lock and sequence into the new row (where it has the columns).
    fn write_lock_seq(&self, update: bool) -> String {
        let mut s = String::new();
        if let Some(l) = self.lock_col("NEW") {
            let _ = writeln!(s, "  SET {l} = {};", self.presented_lock("NEW"));
        }
        if let Some(q) = self.seq_col("NEW") {
            let _ = writeln!(s, "  SET {q} = {};", self.presented_seq(update));
        }
        s
    }

    /// Fence rows: decide the row's write against the resource's fence row
    /// (locked), then raise it. `row` is `NEW` (INSERT, UPDATE) or `OLD` (DELETE).
    fn fence_row_write(&self, row: &str, update: bool) -> String {
        let sch = literal(&self.schema);
        let delete = row == "OLD";
        let r = self.resource(row);
        let lock = self.presented_lock(row);
        let seq = if delete { "@fencing_sequence".to_string() } else { self.presented_seq(update) };
        let fence = ["IF(n = 0, NULL, f_lock)", "f_hw", "f_seq"];
        let mut s = String::new();
        if update {
            s.push_str(&self.no_move());
        }
        let _ = write!(
            s,
            "  SELECT COUNT(*), MAX(lock_name), MAX(high_water), MAX(sequence), MAX(carrier) INTO n, f_lock, f_hw, f_seq, f_car\n    FROM fencing.fences WHERE schema_name = {sch} AND resource = {r} FOR UPDATE;\n"
        );
        let _ = writeln!(
            s,
            "  IF f_car IS NOT NULL THEN CALL fencing.refuse(11, fencing_refusal(11, {}, {}, f_car)); END IF;",
            literal(&self.qualified()),
            self.check_args(&r, fence, &lock, "@fencing_token", &seq)
        );
        let args = |tok: &str| self.check_args(&r, fence, &lock, tok, &seq);
        let tok = self.col("NEW", &self.token);
        s.push_str(&match (delete, update) {
            (true, _) => self.decide(&args("@fencing_token")),
            (false, false) => self.decide_token(&format!("{tok} IS NULL"), &tok, args, |_| String::new()),
            (false, true) => {
                let old = self.col("OLD", &self.token);
                self.decide_token(&format!("{tok} <=> {old}"), &tok, args, |_| String::new())
            }
        });
        let token = if delete { "@fencing_token".to_string() } else { tok };
        if !delete {
            s.push_str(&self.write_lock_seq(update));
        }
        let (new_lock, new_seq) = if delete {
            (format!("COALESCE({lock}, {r})"), seq)
        } else {
            (
                format!("COALESCE({}, {r})", self.lock_col("NEW").unwrap_or_else(|| "@fencing_lock".into())),
                self.seq_col("NEW").unwrap_or_else(|| "@fencing_sequence".into()),
            )
        };
        let _ = write!(
            s,
            "  IF n = 0 THEN\n    INSERT INTO fencing.fences (schema_name, resource, lock_name, high_water, sequence) VALUES ({sch}, {r}, {new_lock}, {token}, {new_seq});\n    IF dup THEN {}; END IF;\n  ELSE\n    UPDATE fencing.fences SET lock_name = {new_lock}, high_water = {token}, sequence = {new_seq} WHERE schema_name = {sch} AND resource = {r};\n  END IF;\n",
            self.refuse(
                23,
                "busy",
                "another transaction wrote this resource's first fence at the same time; retry the write"
            )
        );
        s
    }

    /// The mark a row carries: its lock (else the resource), token and sequence; no fence while its token is NULL.
    fn carried(&self, row: &str) -> [String; 3] {
        let tok = self.col(row, &self.token);
        let lock = match self.lock_col(row) {
            Some(l) => format!("COALESCE({l}, {})", self.resource(row)),
            None => self.resource(row),
        };
        [format!("IF({tok} IS NULL, NULL, {lock})"), tok, self.seq_col(row).unwrap_or_else(|| "NULL".into())]
    }

    /// Fence in the row: what the row cannot carry is refused.
    fn carriable(&self, row: &str) -> String {
        let mut s = String::new();
        if self.lock.is_none() {
            let _ = writeln!(
                s,
                "  IF @fencing_lock IS NOT NULL AND NOT (CAST(@fencing_lock AS BINARY) <=> CAST({} AS BINARY)) THEN {}; END IF;",
                self.resource(row),
                self.refuse(20, "lock_not_carried", "its rows carry their resource's name as lock (no lock column): @fencing_lock must be unset or the resource")
            );
        }
        if self.sequence.is_none() {
            let _ = writeln!(
                s,
                "  IF @fencing_sequence IS NOT NULL THEN {}; END IF;",
                self.refuse(20, "sequence_not_carried", "its rows have no sequence column: unset @fencing_sequence")
            );
        }
        s
    }

    /// Fence in the row, BEFORE INSERT: fill in what the row presents from the
    /// session (checked as a first write would be); the decision is the AFTER trigger's.
    fn in_row_before_insert(&self) -> String {
        let r = self.resource("NEW");
        let tok = self.col("NEW", &self.token);
        let seq = self.presented_seq(false);
        let lock = self.presented_lock("NEW");
        let mut s = self.carriable("NEW");
        let args = self.check_args(&r, ["NULL", "NULL", "NULL"], &lock, "@fencing_token", &seq);
        let _ =
            write!(s, "  IF {tok} IS NULL THEN\n{}    SET {tok} = @fencing_token;\n  END IF;\n", self.decide(&args));
        s.push_str(&self.write_lock_seq(false));
        s
    }

    /// Fence in the row, AFTER INSERT: decide the new row against the fence
    /// row (locked) and mark it carried by this table.
    fn in_row_after_insert(&self) -> String {
        let sch = literal(&self.schema);
        let r = self.resource("NEW");
        let table = literal(&self.qualified());
        let [_, tok, seq] = self.carried("NEW");
        let lock = format!("COALESCE({}, {r})", self.lock_col("NEW").unwrap_or_else(|| "NULL".into()));
        let fence = ["IF(n = 0, NULL, f_lock)", "f_hw", "f_seq"];
        let args = self.check_args(&r, fence, &lock, &tok, &seq);
        format!(
            "  SELECT COUNT(*), MAX(lock_name), MAX(high_water), MAX(sequence), MAX(carrier) INTO n, f_lock, f_hw, f_seq, f_car\n    FROM fencing.fences WHERE schema_name = {sch} AND resource = {r} FOR UPDATE;\n  IF f_car IS NOT NULL THEN CALL fencing.refuse(11, fencing_refusal(11, {table}, {args}, IF(f_car = {table}, NULL, f_car))); END IF;\n{}  IF n = 0 THEN\n    INSERT INTO fencing.fences (schema_name, resource, lock_name, high_water, sequence, carrier) VALUES ({sch}, {r}, {lock}, {tok}, {seq}, {table});\n    IF dup THEN {}; END IF;\n  ELSE\n    UPDATE fencing.fences SET lock_name = {lock}, high_water = {tok}, sequence = {seq}, carrier = {table} WHERE schema_name = {sch} AND resource = {r};\n  END IF;\n",
            self.decide(&args),
            self.refuse(
                23,
                "busy",
                "another transaction wrote this resource's first fence at the same time; retry the write"
            )
        )
    }

    /// Fence in the row, BEFORE UPDATE: decide against the old row (which
    /// the UPDATE holds locked); nothing else is read or written.
    fn in_row_update(&self) -> String {
        let r = self.resource("NEW");
        let [fl, fh, fs] = self.carried("OLD");
        let lock = self.presented_lock("NEW");
        let seq = self.presented_seq(true);
        let tok = self.col("NEW", &self.token);
        let old = self.col("OLD", &self.token);
        let mut s = self.no_move();
        s.push_str(&self.carriable("NEW"));
        let args = |t: &str| self.check_args(&r, [&fl, &fh, &fs], &lock, t, &seq);
        let unless = |t: &str| self.unless_resetting(t);
        s.push_str(&self.decide_token(&format!("{tok} <=> {old}"), &tok, args, unless));
        s.push_str(&self.write_lock_seq(true));
        s
    }

    /// Fence in the row, BEFORE DELETE: decide against the row, then give its
    /// mark (raised by this write) back to the fence row.
    fn in_row_delete(&self) -> String {
        let sch = literal(&self.schema);
        let r = self.resource("OLD");
        let [fl, fh, fs] = self.carried("OLD");
        let lock = self.presented_lock("OLD");
        let mut s = self.carriable("OLD");
        s.push_str(&self.decide(&self.check_args(&r, [&fl, &fh, &fs], &lock, "@fencing_token", "@fencing_sequence")));
        let _ = write!(
            s,
            "  INSERT INTO fencing.fences (schema_name, resource, lock_name, high_water, sequence, carrier) VALUES ({sch}, {r}, COALESCE({lock}, {r}), @fencing_token, @fencing_sequence, NULL)\n    ON DUPLICATE KEY UPDATE lock_name = VALUES(lock_name), high_water = VALUES(high_water), sequence = VALUES(sequence), carrier = NULL;\n"
        );
        s
    }
}

/// What every trigger declares: the fence row as read, the settings, the
/// verdict, and whether a first fence's INSERT met another's.
const DECLARATIONS: &str = "  DECLARE n INT DEFAULT 0;
  DECLARE f_lock VARBINARY(1024) DEFAULT NULL;
  DECLARE f_hw BIGINT DEFAULT NULL;
  DECLARE f_seq BIGINT DEFAULT NULL;
  DECLARE f_car VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL;
  DECLARE k TEXT DEFAULT NULL;
  DECLARE pl TEXT DEFAULT NULL;
  DECLARE c INT DEFAULT 0;
  DECLARE dup INT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET dup = 1;
  SELECT MAX(verify_keys), MAX(plugin) INTO k, pl FROM fencing.settings;
";

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(in_row: bool) -> Spec {
        Spec {
            schema: "app".into(),
            table: "orders".into(),
            resource: "id".into(),
            resource_is_text: true,
            token: "token".into(),
            lock: None,
            sequence: Some("seq".into()),
            policy: "non-decreasing".into(),
            fence_in_row: in_row,
        }
    }

    #[test]
    fn each_mode_has_its_triggers() {
        let rows = spec(false);
        assert!(rows.trigger("ai").is_none());
        let bu = rows.trigger("bu").unwrap();
        assert!(
            bu.starts_with("CREATE TRIGGER `app`.`fencing_orders_bu` BEFORE UPDATE ON `app`.`orders` FOR EACH ROW")
        );
        assert!(bu.contains("FROM fencing.fences WHERE schema_name = 'app' AND resource = NEW.`id` FOR UPDATE"));
        assert!(bu.contains("IF NEW.`token` <=> OLD.`token` THEN"));
        let in_row = spec(true);
        let hot = in_row.trigger("bu").unwrap();
        assert!(!hot.contains("fencing.fences"), "an UPDATE of a row that carries its mark reads no fence row");
        assert!(in_row.trigger("ai").unwrap().contains("carrier = 'app.orders'"));
        assert!(in_row.trigger("bd").unwrap().contains("carrier = NULL"));
        assert!(in_row.trigger("xx").is_none());
    }

    #[test]
    fn names_are_quoted_and_odd_ones_refused() {
        assert_eq!(ident("a`b"), "`a``b`");
        assert_eq!(literal("it's"), "'it''s'");
        assert!(unusable("a\\b").is_some());
        assert!(unusable("a\nb").is_some());
        assert!(unusable("orders").is_none());
        let mut s = spec(false);
        s.resource_is_text = false;
        assert!(s.trigger("bi").unwrap().contains("CAST(NEW.`id` AS CHAR)"));
    }
}
