//! The extension's own tables, created together: the fences
//! (`fences.rs`), the registry of fences carried in rows (`fence_in_row.rs`)
//! and the reset records (defined here, guarded as `reset.rs` describes);
//! and the savepoint every change to them runs in, so that each change
//! happens whole or not at all.

use crate::args::{fail, ident};
use crate::fence_in_row::{self, exists};
use crate::fences::FENCES;
use rusqlite::{Connection, Result};

/// The reset records and their guards.
pub const RESETS: &str = r#"
CREATE TABLE IF NOT EXISTS main.fencing_resets (
    id       INTEGER PRIMARY KEY,
    at       TEXT NOT NULL,
    resource TEXT NOT NULL,
    who      TEXT NOT NULL,
    reason   TEXT NOT NULL,
    before   TEXT,
    after    TEXT
);
DROP TRIGGER IF EXISTS main.fencing_resets_new;
CREATE TRIGGER main.fencing_resets_new BEFORE INSERT ON fencing_resets WHEN fencing_recording() = 0
BEGIN
    SELECT RAISE(ABORT, 'fencing: reset records are written by fencing_reset and fencing_unprotect only');
END;
DROP TRIGGER IF EXISTS main.fencing_resets_kept;
CREATE TRIGGER main.fencing_resets_kept BEFORE DELETE ON fencing_resets
BEGIN
    SELECT RAISE(ABORT, 'fencing: reset records are kept');
END;
DROP TRIGGER IF EXISTS main.fencing_resets_fixed;
CREATE TRIGGER main.fencing_resets_fixed BEFORE UPDATE ON fencing_resets
BEGIN
    SELECT RAISE(ABORT, 'fencing: reset records are kept');
END;
"#;

/// The fence table, the registry of protected tables and the reset records,
/// with their current guards. Refuses to create `fencing_fences` afresh while
/// tables are registered as protected: their marks were in the one that is
/// gone (dropped, or renamed), and a new empty one would forget them.
pub fn ensure_tables(db: &Connection) -> Result<()> {
    if !exists(db, "fencing_fences")? && exists(db, "fencing_protected")? {
        let n: i64 = db.query_row("SELECT count(*) FROM main.fencing_protected", [], |r| r.get(0))?;
        if n > 0 {
            return Err(fail(format!(
                "fencing: fencing_fences is missing while {n} tables are registered as protected: their marks were in \
                 it; restore it (ALTER TABLE .. RENAME TO fencing_fences, or from a backup) before protecting or resetting"
            )));
        }
    }
    db.execute_batch(FENCES)?;
    db.execute_batch(fence_in_row::REGISTRY)?;
    db.execute_batch(RESETS)
}

/// Runs `f` inside a savepoint: all of it happens, or none of it.
pub fn in_savepoint<T>(db: &Connection, name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    db.execute_batch(&format!("SAVEPOINT {}", ident(name)))?;
    match f() {
        Ok(v) => {
            db.execute_batch(&format!("RELEASE {}", ident(name)))?;
            Ok(v)
        }
        Err(e) => {
            let _ = db.execute_batch(&format!("ROLLBACK TO {n}; RELEASE {n}", n = ident(name)));
            Err(e)
        }
    }
}
