//! The timeline: one lane per client, each operation a bar from invocation to
//! completion colored by its outcome, fault windows as bands across the lanes.
//!
//! Drawn as two SVG elements: the lane names (fixed at the left) and the lanes
//! themselves (scrolled horizontally; a ten-minute run is tens of thousands of
//! pixels wide at the scale that keeps a 10 ms request visible).

use super::faults::Window;
use super::{esc, fmt_s};
use crate::history::{Op, OpKind, Outcome};
use std::collections::HashSet;
use std::fmt::Write;

const LANE: f64 = 22.0;
const BAR: f64 = 16.0;
/// The strip above the lanes with the time axis and the fault labels.
const TOP: f64 = 34.0;

/// Maps times to pixels.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub t0_us: u64,
    pub px_per_s: f64,
}

impl Scale {
    /// A run of up to half a minute fits 1,100 px; longer runs get 40 px/s
    /// (the page zooms out to fit and in to read tokens).
    pub fn for_span(span_us: u64) -> Scale {
        let secs = (span_us as f64 / 1e6).max(0.001);
        Scale { t0_us: 0, px_per_s: (1100.0 / secs).clamp(40.0, 2000.0) }
    }

    pub fn x(&self, us: u64) -> f64 {
        us.saturating_sub(self.t0_us) as f64 / 1e6 * self.px_per_s
    }
}

/// The lanes, in the order drawn: clients by name (numbers in numeric order), the campaign's own reads last.
pub fn lanes(ops: &[&Op]) -> Vec<String> {
    let mut names: Vec<String> = ops.iter().map(|op| op.client.clone()).collect::<HashSet<_>>().into_iter().collect();
    let key = |n: &String| {
        let digits = n.trim_start_matches(|c: char| !c.is_ascii_digit());
        let prefix = &n[..n.len() - digits.len()];
        (n == "campaign", prefix.to_string(), digits.parse::<u64>().unwrap_or(0), n.clone())
    };
    names.sort_by_key(key);
    names
}

/// The label drawn on a bar: what the request was and the token it carried.
pub fn bar_label(op: &Op) -> String {
    let token = op.token.map(|t| t.to_string()).unwrap_or_default();
    match op.op {
        OpKind::Acquire => format!("acq {token}"),
        OpKind::Renew => "renew".into(),
        OpKind::Release => "release".into(),
        OpKind::Write => match op.sequence {
            Some(s) => format!("w {token}.{s}"),
            None => format!("w {token}"),
        },
        OpKind::Read => "read".into(),
    }
}

/// The CSS class of an operation's outcome; refusals are colored by reason.
pub fn outcome_class(op: &Op) -> String {
    match op.outcome {
        Outcome::Ok => "ok".into(),
        Outcome::Info => "info".into(),
        Outcome::Fail => format!("fail r-{}", reason_class(op.reason.as_deref().unwrap_or("unknown"))),
    }
}

/// A reason reduced to a class name.
pub fn reason_class(reason: &str) -> String {
    reason.chars().take(40).map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect()
}

fn tooltip(op: &Op, t0_us: u64) -> String {
    let mut t = format!("{} {:?} {}", op.client, op.op, op.resource).to_lowercase();
    if let Some(token) = op.token {
        let _ = write!(t, "\ntoken {token}");
    }
    if let Some(s) = op.sequence {
        let _ = write!(t, " sequence {s}");
    }
    if let Some(f) = &op.file_path {
        let _ = write!(t, "\n{} {}", f, op.mutation.map(|m| format!("{m:?}").to_lowercase()).unwrap_or_default());
    }
    let _ = write!(
        t,
        "\n{} .. {} ({:.1} ms)\noutcome {:?}",
        fmt_s(op.start_us.saturating_sub(t0_us)),
        fmt_s(op.end_us.saturating_sub(t0_us)),
        op.end_us.saturating_sub(op.start_us) as f64 / 1e3,
        op.outcome
    );
    if let Some(r) = &op.reason {
        let _ = write!(t, ": {r}");
    }
    if let Some(h) = op.high_water {
        let _ = write!(t, "\nhigh-water {h}");
    }
    t
}

/// Draws the lane names and the lanes. `bad` holds the indexes (into `ops`) of
/// operations a violation names; `id(i)` is the element id of operation `i`.
pub fn draw(
    out: &mut String,
    ops: &[&Op],
    windows: &[Window],
    bad: &HashSet<usize>,
    scale: Scale,
    end_us: u64,
    id: impl Fn(usize) -> String,
) {
    let _ = write!(
        out,
        r#"<div class="zoom">zoom <button data-z="0.5">&minus;</button><button data-z="2">+</button><button data-z="0">fit</button> <span class="zl">{:.0} px/s</span> (hover a bar for its request)</div>"#,
        scale.px_per_s
    );
    let lanes = lanes(ops);
    let height = TOP + LANE * lanes.len() as f64 + 4.0;
    let width = scale.x(end_us).ceil() + 40.0;
    let lane_of = |client: &str| lanes.iter().position(|l| l == client).unwrap_or(0);
    let lane_y = |i: usize| TOP + LANE * i as f64;

    let _ = write!(out, r#"<div class="tl"><svg class="names" width="90" height="{height}">"#);
    for (i, name) in lanes.iter().enumerate() {
        let _ = write!(out, r#"<text x="86" y="{}" text-anchor="end">{}</text>"#, lane_y(i) + 15.0, esc(name));
    }
    let _ = write!(
        out,
        r#"</svg><div class="scroll"><svg class="lanes" width="{width:.0}" height="{height}" data-pps="{:.3}">"#,
        scale.px_per_s
    );
    for i in 0..lanes.len() {
        if i % 2 == 1 {
            let _ = write!(out, r#"<rect class="stripe" x="0" y="{}" width="{width:.0}" height="{LANE}"/>"#, lane_y(i));
        }
    }
    // Time axis: a tick at a round step at least 80 px apart.
    let span_s = end_us.saturating_sub(scale.t0_us) as f64 / 1e6;
    let step = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0]
        .into_iter()
        .find(|s| s * scale.px_per_s >= 80.0)
        .unwrap_or(600.0);
    for k in 0..=(span_s / step).floor() as u64 {
        let t = k as f64 * step;
        let x = t * scale.px_per_s;
        let _ = write!(
            out,
            r#"<line class="grid" x1="{x:.1}" x2="{x:.1}" y1="12" y2="{height}"/><text class="tick" x="{:.1}" y="10">{}s</text>"#,
            x + 2.0,
            trim_float(t)
        );
    }
    let mut label_rows = [f64::MIN; 2];
    for w in windows {
        let (x1, x2) = (scale.x(w.start_us), scale.x(w.end_us));
        let title = format!(
            "{} {} .. {}{}",
            w.label(),
            fmt_s(w.start_us.saturating_sub(scale.t0_us)),
            fmt_s(w.end_us.saturating_sub(scale.t0_us)),
            if w.healed { "" } else { " (not healed)" }
        );
        let _ = write!(
            out,
            r#"<g class="fault {}"><title>{}</title><rect class="band" x="{x1:.1}" y="14" width="{:.1}" height="{:.1}"/>"#,
            w.class(),
            esc(&title),
            (x2 - x1).max(2.0),
            height - 14.0
        );
        if let Some(lane) = lanes.iter().position(|l| *l == w.target) {
            let _ = write!(
                out,
                r#"<rect class="hit" x="{x1:.1}" y="{}" width="{:.1}" height="{LANE}"/>"#,
                lane_y(lane),
                (x2 - x1).max(2.0)
            );
        }
        // Labels take the first of two rows where they do not overlap the
        // previous one; a label with no room is left to the tooltip.
        let label = w.label();
        if let Some(row) = label_rows.iter().position(|end| *end <= x1) {
            label_rows[row] = x1 + 2.0 + label.len() as f64 * 5.0 + 6.0;
            let y = 23.0 + 9.0 * row as f64;
            let _ = write!(out, r#"<text class="flabel" x="{:.1}" y="{y}">{}</text>"#, x1 + 2.0, esc(&label));
        }
        out.push_str("</g>");
    }
    for (i, op) in ops.iter().enumerate() {
        let (x1, x2) = (scale.x(op.start_us), scale.x(op.end_us.max(op.start_us)));
        let w = (x2 - x1).max(1.5);
        let y = lane_y(lane_of(&op.client)) + (LANE - BAR) / 2.0;
        let class = if bad.contains(&i) { format!("{} bad", outcome_class(op)) } else { outcome_class(op) };
        let kind = format!("{:?}", op.op).to_lowercase();
        let _ = write!(
            out,
            r#"<g class="op {class} k-{kind}" id="{}"><title>{}</title><rect x="{x1:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" rx="2"/>"#,
            id(i),
            esc(&tooltip(op, scale.t0_us))
        );
        // Every bar carries its label; it is shown when the bar is wide enough
        // (the page's zoom shows it on the narrow ones).
        let label = bar_label(op);
        let hidden = if w >= label_width(&label) { "" } else { r#" display="none""# };
        let _ = write!(out, r#"<text x="{:.1}" y="{:.1}"{hidden}>{}</text>"#, x1 + 2.0, y + 12.0, esc(&label));
        out.push_str("</g>");
    }
    out.push_str("</svg></div></div>");
}

/// The width a bar needs to show `label` (the page's script uses the same rule).
pub fn label_width(label: &str) -> f64 {
    label.len() as f64 * 6.2 + 4.0
}

fn trim_float(t: f64) -> String {
    let s = format!("{t:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}
