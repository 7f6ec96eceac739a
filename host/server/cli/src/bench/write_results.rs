//! What a `bench writes` run measured ([`RunResult`], one per store and
//! writer count, fencing's and SQLite's alike) and the Markdown tables
//! `fencing bench writes` prints from them.

use hdrhistogram::Histogram;
use std::time::Duration;

/// One measured run.
pub struct RunResult {
    pub store: &'static str,
    pub writers: usize,
    /// Writes in flight per writer.
    pub inflight: usize,
    pub elapsed: Duration,
    /// Per-write latency in microseconds.
    pub hist: Histogram<u64>,
    /// Guard time / write latency, summed over the run.
    pub guard_share: Option<f64>,
    /// With readers beside the writers: how many, and each read's latency in microseconds.
    pub reads: Option<(usize, Histogram<u64>)>,
}

impl RunResult {
    pub fn per_second(&self) -> f64 {
        self.hist.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// Reads per second, with readers.
    pub fn reads_per_second(&self) -> Option<f64> {
        self.reads.as_ref().map(|(_, h)| h.len() as f64 / self.elapsed.as_secs_f64())
    }
}

/// The results as a Markdown table; runs with readers add a second table of their reads.
pub fn table(results: &[RunResult]) -> String {
    let mut out = writes_table(results);
    let with_reads: Vec<_> = results.iter().filter(|r| r.reads.is_some()).collect();
    if !with_reads.is_empty() {
        out.push_str(
            "\n| store | writers | readers | reads/s | p50 read latency | p99 read latency |\n|---|---:|---:|---:|---:|---:|\n",
        );
        for r in with_reads {
            let (readers, h) = r.reads.as_ref().expect("filtered");
            let ms = |q| h.value_at_quantile(q) as f64 / 1000.0;
            out.push_str(&format!(
                "| {} | {} | {} | {:.0} | {:.3} ms | {:.3} ms |\n",
                r.store,
                r.writers,
                readers,
                r.reads_per_second().unwrap_or(0.0),
                ms(0.5),
                ms(0.99)
            ));
        }
    }
    out
}

fn writes_table(results: &[RunResult]) -> String {
    let mut out = String::from(
        "| store | writers | in flight each | durable writes/s | p50 latency | p99 latency | guard share of latency |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in results {
        let ms = |q| r.hist.value_at_quantile(q) as f64 / 1000.0;
        let share = r.guard_share.map_or("n/a".to_owned(), |s| format!("{:.3}%", s * 100.0));
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms | {} |\n",
            r.store,
            r.writers,
            r.inflight,
            r.per_second(),
            ms(0.5),
            ms(0.99),
            share
        ));
    }
    out
}
