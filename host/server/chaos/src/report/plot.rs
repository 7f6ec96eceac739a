//! Throughput and latency over time, as one SVG with the fault windows shaded:
//! the overview that shows what each fault did to the clients.
//!
//! Operations are counted in the bucket where they completed. Throughput is
//! per second; latency is the median and the 99th percentile of the requests
//! completed in the bucket (the final read-back by the campaign is left out).

use super::faults::Window;
use super::{esc, fmt_s};
use crate::history::{Op, OpKind, Outcome};
use std::fmt::Write;

const WIDTH: f64 = 1100.0;
const CHART: f64 = 130.0;
const LEFT: f64 = 56.0;
const GAP: f64 = 34.0;

/// Per-bucket figures.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Bucket {
    pub completed: u64,
    pub admitted: u64,
    pub refused: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The bucket width: a round step giving at most 150 buckets, at least 100 ms.
pub fn bucket_us(span_us: u64) -> u64 {
    [100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 30_000_000]
        .into_iter()
        .find(|b| span_us / b < 150)
        .unwrap_or(60_000_000)
}

/// Groups the operations that completed in `[t0_us, end_us]` into buckets.
pub fn buckets(ops: &[&Op], t0_us: u64, end_us: u64, width_us: u64) -> Vec<Bucket> {
    let n = (end_us.saturating_sub(t0_us) / width_us + 1) as usize;
    let mut latencies: Vec<Vec<u64>> = vec![vec![]; n];
    let mut out = vec![Bucket::default(); n];
    for op in ops.iter().filter(|op| op.phase.is_none() && op.end_us >= t0_us) {
        let i = (((op.end_us - t0_us) / width_us) as usize).min(n - 1);
        out[i].completed += 1;
        latencies[i].push(op.end_us.saturating_sub(op.start_us));
        if op.op == OpKind::Write {
            match op.outcome {
                Outcome::Ok => out[i].admitted += 1,
                Outcome::Fail => out[i].refused += 1,
                Outcome::Info => {}
            }
        }
    }
    for (b, mut l) in out.iter_mut().zip(latencies) {
        l.sort_unstable();
        if !l.is_empty() {
            let at = |q: f64| l[((l.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
            b.p50_ms = at(0.5);
            b.p99_ms = at(0.99);
        }
    }
    out
}

struct Chart<'a> {
    top: f64,
    /// SVG text content (trusted markup: the colored names of the lines).
    title: &'a str,
    unit: &'a str,
    max: f64,
}

impl Chart<'_> {
    fn y(&self, v: f64) -> f64 {
        self.top + CHART - (v / self.max).min(1.0) * CHART
    }

    fn frame(&self, out: &mut String) {
        let (top, bottom) = (self.top, self.top + CHART);
        let _ = write!(
            out,
            r#"<text class="ctitle" x="{LEFT}" y="{:.0}">{}</text><line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{top}" y2="{bottom}"/><line class="axis" x1="{LEFT}" x2="{WIDTH}" y1="{bottom}" y2="{bottom}"/><text class="tick" x="{:.0}" y="{:.0}" text-anchor="end">{} {}</text><text class="tick" x="{:.0}" y="{bottom}" text-anchor="end">0</text>"#,
            top - 6.0,
            self.title,
            LEFT - 4.0,
            top + 8.0,
            trim(self.max),
            self.unit,
            LEFT - 4.0
        );
    }

    fn line(&self, out: &mut String, class: &str, xs: &[f64], values: impl Iterator<Item = f64>) {
        let points: Vec<String> = xs.iter().zip(values).map(|(x, v)| format!("{x:.1},{:.1}", self.y(v))).collect();
        let _ = write!(out, r#"<polyline class="{class}" points="{}"/>"#, points.join(" "));
    }
}

fn trim(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

fn nice_max(v: f64) -> f64 {
    let v = v.max(1.0);
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * mag).find(|m| *m >= v).unwrap_or(10.0 * mag)
}

/// Draws both charts over `[t0_us, end_us]`.
pub fn draw(out: &mut String, ops: &[&Op], windows: &[Window], t0_us: u64, end_us: u64) {
    let width_us = bucket_us(end_us.saturating_sub(t0_us));
    let b = buckets(ops, t0_us, end_us, width_us);
    let span = (end_us.saturating_sub(t0_us)).max(1) as f64;
    let x = |us: u64| LEFT + us.saturating_sub(t0_us) as f64 / span * (WIDTH - LEFT);
    let xs: Vec<f64> = (0..b.len()).map(|i| x(t0_us + i as u64 * width_us + width_us / 2)).collect();
    let per_s = 1e6 / width_us as f64;
    let rate = Chart {
        top: 20.0,
        title: r#"operations completed per second: <tspan class="l-all">all</tspan>, <tspan class="l-ok">admitted writes</tspan>, <tspan class="l-fail">refused writes</tspan>"#,
        unit: "/s",
        max: nice_max(b.iter().map(|b| b.completed as f64 * per_s).fold(0.0, f64::max)),
    };
    let latency = Chart {
        top: 20.0 + CHART + GAP + 6.0,
        title: r#"latency of completed requests: <tspan class="l-p50">median</tspan>, <tspan class="l-p99">99th percentile</tspan>"#,
        unit: "ms",
        max: nice_max(b.iter().map(|b| b.p99_ms).fold(0.0, f64::max)),
    };
    let height = latency.top + CHART + 22.0;
    let _ = write!(out, r#"<svg class="plot" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">"#);
    for w in windows {
        let (x1, x2) = (x(w.start_us), x(w.end_us));
        for chart in [&rate, &latency] {
            let _ = write!(
                out,
                r#"<rect class="band {}" x="{x1:.1}" y="{}" width="{:.1}" height="{CHART}"><title>{}</title></rect>"#,
                w.class(),
                chart.top,
                (x2 - x1).max(1.0),
                esc(&w.label())
            );
        }
    }
    rate.frame(out);
    rate.line(out, "l-all", &xs, b.iter().map(|b| b.completed as f64 * per_s));
    rate.line(out, "l-ok", &xs, b.iter().map(|b| b.admitted as f64 * per_s));
    rate.line(out, "l-fail", &xs, b.iter().map(|b| b.refused as f64 * per_s));
    latency.frame(out);
    latency.line(out, "l-p50", &xs, b.iter().map(|b| b.p50_ms));
    latency.line(out, "l-p99", &xs, b.iter().map(|b| b.p99_ms));
    let bottom = latency.top + CHART + 14.0;
    let _ = write!(
        out,
        r#"<text class="tick" x="{LEFT}" y="{bottom}">0s</text><text class="tick" x="{WIDTH}" y="{bottom}" text-anchor="end">{}</text><text class="tick" x="{:.0}" y="{bottom}" text-anchor="middle">buckets of {}</text></svg>"#,
        fmt_s(end_us.saturating_sub(t0_us)),
        (LEFT + WIDTH) / 2.0,
        fmt_s(width_us)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::new_op;

    fn op(kind: OpKind, start_us: u64, end_us: u64, outcome: Outcome) -> Op {
        Op { token: Some(1), start_us, end_us, outcome, ..new_op("c0", kind, "r") }
    }

    #[test]
    fn operations_count_where_they_complete() {
        let ops = [
            op(OpKind::Write, 0, 1_000, Outcome::Ok),
            op(OpKind::Write, 50_000, 150_000, Outcome::Fail),
            op(OpKind::Acquire, 120_000, 130_000, Outcome::Ok),
            op(OpKind::Write, 180_000, 190_000, Outcome::Info),
        ];
        let refs: Vec<&Op> = ops.iter().collect();
        let b = buckets(&refs, 0, 199_999, 100_000);
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].completed, b[0].admitted, b[0].refused), (1, 1, 0));
        assert_eq!((b[1].completed, b[1].admitted, b[1].refused), (3, 0, 1));
        assert_eq!((b[1].p50_ms, b[1].p99_ms), (10.0, 100.0));
        assert_eq!(bucket_us(10_000_000), 100_000);
        assert_eq!(bucket_us(600_000_000), 5_000_000);
    }
}
