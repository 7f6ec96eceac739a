//! The comparison workload: a fenced write as one conditional `UPDATE` on SQLite.
//!
//! One connection per writer on a shared database file in WAL mode with
//! `synchronous=FULL`, so every committed write is fsynced before it returns
//! (SQLite has no cross-connection group commit). The fence is the
//! `last_token` column: `UPDATE .. WHERE resource_id = ? AND last_token <= ?`.

use super::write_results::RunResult;
use anyhow::Context;
use hdrhistogram::Histogram;
use rusqlite::{Connection, params};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn open(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open(path).with_context(|| format!("open {}", path.display()))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.busy_timeout(Duration::from_secs(30))?;
    Ok(conn)
}

/// Runs `writers` threads for `duration`, each fencing writes to its own row.
pub fn run(dir: &Path, writers: usize, duration: Duration, payload: usize) -> anyhow::Result<RunResult> {
    let path = dir.join(format!("sqlite-{writers}.db"));
    let _ = std::fs::remove_file(&path);
    {
        let conn = open(&path)?;
        conn.execute_batch(
            "CREATE TABLE resource_records (resource_id TEXT PRIMARY KEY, resource_data BLOB NOT NULL, last_fencing_token INTEGER NOT NULL DEFAULT 0);",
        )?;
        for w in 0..writers {
            conn.execute(
                "INSERT INTO resource_records (resource_id, resource_data) VALUES (?1, x'')",
                params![format!("bench-{w}")],
            )?;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let path = path.clone();
            let stop = stop.clone();
            std::thread::spawn(move || -> anyhow::Result<Histogram<u64>> {
                let conn = open(&path)?;
                let mut stmt = conn.prepare(
                    "UPDATE resource_records SET resource_data = ?1, last_fencing_token = ?2
                     WHERE resource_id = ?3 AND last_fencing_token <= ?2",
                )?;
                let id = format!("bench-{w}");
                let data = vec![0x5a_u8; payload];
                let mut hist = Histogram::<u64>::new(3)?;
                let mut token: i64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    token += 1;
                    let t0 = Instant::now();
                    let changed = stmt.execute(params![data, token, id])?;
                    anyhow::ensure!(changed == 1, "conditional update refused an increasing token");
                    hist.record(t0.elapsed().as_micros() as u64)?;
                }
                Ok(hist)
            })
        })
        .collect();
    std::thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let mut hist = Histogram::<u64>::new(3)?;
    for h in handles {
        hist.add(h.join().map_err(|_| anyhow::anyhow!("sqlite writer panicked"))??)?;
    }
    let elapsed = start.elapsed();
    let _ = std::fs::remove_file(&path);
    Ok(RunResult {
        store: "sqlite (conditional UPDATE)",
        writers,
        inflight: 1,
        elapsed,
        hist,
        guard_share: None,
        reads: None,
    })
}
