//! What fencing a SQLite table costs per write: one UPDATE per transaction of
//! a 1,000-row table, three ways, on one WAL database file:
//! - `plain`: `UPDATE plain SET body, token WHERE id` (no check at all);
//! - `conditional`: the same with `AND token <= ?` (the usual hand-written
//!   check, which keeps no fence and knows no lock);
//! - `protected`: the same UPDATE on table `fenced`, under `fencing_protect`, so the
//!   extension's trigger reads the fence, asks the component and raises it.
//!
//! Under `synchronous=NORMAL` (no fsync per commit, so the CPU cost is all
//! there is) and `synchronous=FULL` (an fsync per commit, as a durable
//! application runs). Needs the extension built:
//! `cargo build --release --manifest-path host/sqlite/Cargo.toml`, then
//! `cargo bench -p fencing-host --bench sqlite_extension`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rusqlite::{Connection, LoadExtensionGuard, params};
use std::path::PathBuf;

const ROWS: i64 = 1000;

fn open(dir: &std::path::Path, sync: &str) -> Connection {
    let lib = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../host/sqlite/target/release/libfencing_sqlite.so");
    assert!(lib.exists(), "{} missing: cargo build --release --manifest-path host/sqlite/Cargo.toml", lib.display());
    let db = Connection::open(dir.join(format!("bench-{sync}.db"))).unwrap();
    // SAFETY: this repository's extension.
    unsafe {
        let _guard = LoadExtensionGuard::new(&db).unwrap();
        db.load_extension(lib, None::<&str>).unwrap();
    }
    db.execute_batch(&format!("PRAGMA journal_mode=WAL; PRAGMA synchronous={sync};")).unwrap();
    for table in ["plain", "fenced"] {
        db.execute_batch(&format!("CREATE TABLE {table}(id TEXT PRIMARY KEY, body TEXT, token INTEGER NOT NULL)"))
            .unwrap();
        for i in 0..ROWS {
            db.execute(&format!("INSERT INTO {table} VALUES (?1, 'x', 0)"), [format!("doc-{i}")]).unwrap();
        }
    }
    db.query_row("SELECT fencing_protect('fenced', 'id', 'token')", [], |_| Ok(())).unwrap();
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
        let mut plain = db.prepare("UPDATE plain SET body = 'y', token = ?2 WHERE id = ?1").unwrap();
        group.bench_function(BenchmarkId::new("plain", sync), |b| {
            b.iter(|| {
                let (id, t) = next();
                assert_eq!(plain.execute(params![id, t]).unwrap(), 1);
            })
        });
        let mut conditional =
            db.prepare("UPDATE plain SET body = 'y', token = ?2 WHERE id = ?1 AND token <= ?2").unwrap();
        group.bench_function(BenchmarkId::new("conditional", sync), |b| {
            b.iter(|| {
                let (id, t) = next();
                assert_eq!(conditional.execute(params![id, t]).unwrap(), 1);
            })
        });
        let mut protected = db.prepare("UPDATE fenced SET body = 'y', token = ?2 WHERE id = ?1").unwrap();
        group.bench_function(BenchmarkId::new("protected", sync), |b| {
            b.iter(|| {
                let (id, t) = next();
                assert_eq!(protected.execute(params![id, t]).unwrap(), 1);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
