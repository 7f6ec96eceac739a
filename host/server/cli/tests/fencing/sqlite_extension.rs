//! The SQLite extension (host/engines/sqlite, built by `scripts/test-sqlite` or
//! `scripts/sqlite-extension --debug`; `FENCING_SQLITE_EXT` names another) loaded by
//! rusqlite into the SQLite this crate bundles: the GC-pause story and a
//! refused row undoing its statement. The Python suite
//! (host/engines/sqlite/tests/test_extension.py) covers the rest.

use rusqlite::{Connection, LoadExtensionGuard};
use std::path::PathBuf;

fn extension() -> PathBuf {
    let lib = match std::env::var_os("FENCING_SQLITE_EXT") {
        Some(named) => PathBuf::from(named).with_extension("so"),
        None => std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../target"))
            .join("debug/libfencing_sqlite.so"),
    };
    assert!(
        lib.exists(),
        "{} missing: run scripts/sqlite-extension --debug (or scripts/test-sqlite) first",
        lib.display()
    );
    lib
}

fn open(path: &std::path::Path) -> Connection {
    let db = Connection::open(path).unwrap();
    // SAFETY: the extension is this repository's, built for this test.
    unsafe {
        let _guard = LoadExtensionGuard::new(&db).unwrap();
        db.load_extension(extension(), None::<&str>).unwrap();
    }
    db
}

#[test]
fn the_gc_pause_story_through_rusqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("app.db"));
    db.execute_batch(
        "CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER);
         SELECT fencing_protect('docs', 'id', 'token');
         INSERT INTO docs VALUES ('invoice', 'v1', 1);",
    )
    .unwrap();
    for token in 2..=34 {
        db.execute("UPDATE docs SET body = ?1, token = ?2", rusqlite::params![format!("with {token}"), token]).unwrap();
    }
    let err = db.execute("UPDATE docs SET body = 'paused', token = 33", []).unwrap_err().to_string();
    assert!(err.contains("stale_token") && err.contains("presented token 33, high_water 34"), "{err}");
    let row: (String, i64) = db.query_row("SELECT body, token FROM docs", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(row, ("with 34".to_string(), 34));

    // A statement with one refused row changes nothing.
    db.execute_batch("INSERT INTO docs VALUES ('other', 'v', 40);").unwrap();
    let err = db.execute("UPDATE docs SET body = 'both', token = 35", []).unwrap_err().to_string();
    assert!(err.contains("stale_token") && err.contains("\"other\""), "{err}");
    let both: i64 = db.query_row("SELECT count(*) FROM docs WHERE body = 'both'", [], |r| r.get(0)).unwrap();
    assert_eq!(both, 0);
    let mark: i64 =
        db.query_row("SELECT json_extract(fencing_fence('invoice'), '$.high_water')", [], |r| r.get(0)).unwrap();
    assert_eq!(mark, 34);
}
