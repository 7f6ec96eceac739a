//! What fencing a SQLite table costs per write: one UPDATE per transaction of
//! a 1,000-row table, three ways, on one WAL database file:
//! - `plain`: `UPDATE plain SET body, token WHERE id` (no check at all);
//! - `conditional`: the same with `AND token <= ?` (the usual hand-written
//!   check, which keeps no fence and knows no lock);
//! - `protected`: the same UPDATE on table `fenced`, under `fencing_protect`,
//!   so the extension's trigger reads the fence and asks the component.
//!
//! Each on two table shapes: `keyed`, a `WITHOUT ROWID` table keyed by the
//! resource, whose rows carry their marks (the fence row is not written on
//! an UPDATE that sets the token), and `rowid`, a rowid table with the
//! resource as a `TEXT PRIMARY KEY`, where every write also writes the
//! fence row (a second B-tree page per commit).
//!
//! Under `synchronous=NORMAL` (no fsync per commit, so the CPU cost is all
//! there is) and `synchronous=FULL` (an fsync per commit, as a durable
//! application runs). Needs the extension built:
//! `cargo build --release --manifest-path host/engines/sqlite/Cargo.toml`, then
//! `cargo bench -p fencing --bench sqlite_extension`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rusqlite::{Connection, LoadExtensionGuard, params};
use std::path::PathBuf;

const ROWS: i64 = 1000;

/// The table shapes: name suffix and `CREATE TABLE` tail.
const SHAPES: [(&str, &str); 2] = [("keyed", " WITHOUT ROWID"), ("rowid", "")];

fn open(dir: &std::path::Path, sync: &str) -> Connection {
    let lib =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../engines/sqlite/target/release/libfencing_sqlite.so");
    assert!(
        lib.exists(),
        "{} missing: cargo build --release --manifest-path host/engines/sqlite/Cargo.toml",
        lib.display()
    );
    let db = Connection::open(dir.join(format!("bench-{sync}.db"))).unwrap();
    // SAFETY: this repository's extension.
    unsafe {
        let _guard = LoadExtensionGuard::new(&db).unwrap();
        db.load_extension(lib, None::<&str>).unwrap();
    }
    db.execute_batch(&format!("PRAGMA journal_mode=WAL; PRAGMA synchronous={sync};")).unwrap();
    for (shape, tail) in SHAPES {
        for table in ["plain", "fenced"] {
            db.execute_batch(&format!(
                "CREATE TABLE {table}_{shape}(id TEXT PRIMARY KEY, body TEXT, token INTEGER NOT NULL){tail}"
            ))
            .unwrap();
            for i in 0..ROWS {
                db.execute(&format!("INSERT INTO {table}_{shape} VALUES (?1, 'x', 0)"), [format!("doc-{i}")]).unwrap();
            }
        }
        let protected: String = db
            .query_row(&format!("SELECT fencing_protect('fenced_{shape}', 'id', 'token')"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(protected.ends_with("in the rows (fence in row)"), shape == "keyed", "{protected}");
    }
    db
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("sqlite_write");
    for sync in ["NORMAL", "FULL"] {
        let db = open(dir.path(), sync);
        let mut token = 0i64;
        let mut next = || {
            token += 1;
            (format!("doc-{}", token % ROWS), token)
        };
        for (shape, _) in SHAPES {
            let ways = [
                ("plain", format!("UPDATE plain_{shape} SET body = 'y', token = ?2 WHERE id = ?1")),
                (
                    "conditional",
                    format!("UPDATE plain_{shape} SET body = 'y', token = ?2 WHERE id = ?1 AND token <= ?2"),
                ),
                ("protected", format!("UPDATE fenced_{shape} SET body = 'y', token = ?2 WHERE id = ?1")),
            ];
            for (way, sql) in ways {
                let mut stmt = db.prepare(&sql).unwrap();
                group.bench_function(BenchmarkId::new(format!("{way}/{shape}"), sync), |b| {
                    b.iter(|| {
                        let (id, t) = next();
                        assert_eq!(stmt.execute(params![id, t]).unwrap(), 1);
                    })
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
