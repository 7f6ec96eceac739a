//! The run report: `timeline.html`, one self-contained page (inline CSS, SVG
//! and a little script; nothing fetched) that shows a history as a person
//! reads it: a lane per client with every request as a bar from invocation to
//! completion, colored by outcome and labelled with its token; fault windows
//! as bands across the lanes; violations in red, listed with links to the
//! operations that are their evidence; throughput and latency over time with
//! the fault windows marked.
//!
//! Written by `fencing chaos --report DIR` and `fencing chaos check FILE
//! --report DIR` (one page, one section per run given).
//!
//! # Layout
//! - [`faults`]: pairs each fault with its heal into a window.
//! - [`timeline`]: the lanes and bars.
//! - [`plot`]: throughput and latency over time.
//! - this file: the page, the summary and the violation list.

pub mod faults;
pub mod plot;
pub mod timeline;

use super::check::{OpRef, Report};
use super::history::{Op, Outcome, Record};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The page's file name inside the report directory.
pub const PAGE: &str = "timeline.html";

/// One history and its verdict, drawn as one section of the page.
pub struct Run<'a> {
    pub title: String,
    pub records: &'a [Record],
    pub report: &'a Report,
}

/// Writes `dir/timeline.html` (creating `dir`) and returns its path.
pub fn write(dir: &Path, title: &str, runs: &[Run<'_>]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(PAGE);
    std::fs::write(&path, render(title, runs))?;
    Ok(path)
}

/// Escapes text for HTML and SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A duration in microseconds as seconds, to the millisecond.
pub fn fmt_s(us: u64) -> String {
    format!("{:.3}s", us as f64 / 1e6)
}

/// Refusal colors, assigned to reasons in the order they first appear.
const REFUSED: [&str; 6] = ["#ef6c00", "#f9a825", "#8d6e63", "#ffb74d", "#6d4c41", "#c0a000"];

/// The whole page.
pub fn render(title: &str, runs: &[Run<'_>]) -> String {
    let mut reasons: BTreeSet<String> = BTreeSet::new();
    for run in runs {
        for r in run.records {
            if let Record::Op(op) = r
                && op.outcome == Outcome::Fail
            {
                reasons.insert(timeline::reason_class(op.reason.as_deref().unwrap_or("unknown")));
            }
        }
    }
    let mut css = String::from(STYLE);
    for (i, reason) in reasons.iter().enumerate() {
        let color = REFUSED[i % REFUSED.len()];
        let _ = writeln!(css, ".r-{reason} rect {{ fill: {color}; }} .sw.r-{reason} {{ background: {color}; }}");
    }
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><script>{ERRORS}</script><style>{css}</style></head><body data-ops=\"0\"><h1>{}</h1>",
        esc(title),
        esc(title)
    );
    legend(&mut out, &reasons);
    for (n, run) in runs.iter().enumerate() {
        section(&mut out, n, run);
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

fn legend(out: &mut String, reasons: &BTreeSet<String>) {
    out.push_str(
        r#"<p class="legend"><span class="sw ok"></span>admitted / done <span class="sw info"></span>outcome unknown "#,
    );
    for r in reasons {
        let _ = write!(out, r#"<span class="sw r-{r}"></span>refused: {} "#, esc(r));
    }
    out.push_str(
        r#"<span class="sw badsw"></span>evidence of a violation <span class="sw f-pause"></span>client paused <span class="sw f-kill"></span>server killed <span class="sw f-failover"></span>database failover <span class="sw f-net"></span>network fault</p>"#,
    );
}

fn section(out: &mut String, n: usize, run: &Run<'_>) {
    let mut ops: Vec<&Op> = run
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Op(op) => Some(op),
            _ => None,
        })
        .collect();
    ops.sort_by_key(|op| (op.start_us, op.end_us));
    let t0 = run.records.iter().map(Record::time_us).filter(|t| *t > 0).min().unwrap_or(0);
    let end = run
        .records
        .iter()
        .map(|r| match r {
            Record::Op(op) => op.end_us,
            r => r.time_us(),
        })
        .max()
        .unwrap_or(t0)
        .max(t0);
    let id = |i: usize| format!("r{n}-op{i}");
    let index: HashMap<OpRef, usize> = ops.iter().enumerate().rev().map(|(i, op)| (OpRef::of(op), i)).collect();
    let bad: HashSet<usize> =
        run.report.violations.iter().flat_map(|v| v.ops.iter().filter_map(|r| index.get(r).copied())).collect();
    let windows = faults::windows(run.records, end);
    let s = &run.report.summary;
    let verdict = if s.violations == 0 {
        r#"<span class="good">0 violations</span>"#.to_string()
    } else {
        let plural = if s.violations == 1 { "" } else { "s" };
        format!(r#"<span class="badtxt">{} violation{plural}</span>"#, s.violations)
    };
    let _ = write!(out, r#"<section id="run{n}"><h2>{} &middot; {verdict}</h2>"#, esc(&run.title));
    if let Some(Record::Header(h)) = run.records.iter().find(|r| matches!(r, Record::Header(_))) {
        let _ = write!(
            out,
            "<p>seed {} &middot; storage fencing {} &middot; policy {} &middot; {} of history &middot; {} operations</p>",
            h.seed,
            if h.fencing { "on" } else { "off" },
            esc(&h.policy),
            fmt_s(end - t0),
            ops.len()
        );
    }
    let summary = serde_json::to_value(s).unwrap_or_default();
    out.push_str(r#"<table class="summary"><tr>"#);
    if let Some(map) = summary.as_object() {
        for (k, v) in map {
            let v = match v {
                serde_json::Value::Object(m) if m.is_empty() => "0".to_string(),
                serde_json::Value::Object(m) => {
                    m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
                }
                serde_json::Value::String(text) => text.clone(),
                v => v.to_string(),
            };
            let _ = write!(out, "<td><b>{}</b><br>{}</td>", esc(&k.replace('_', " ")), esc(&v));
        }
    }
    out.push_str("</tr></table>");
    let scale = timeline::Scale { t0_us: t0, ..timeline::Scale::for_span(end - t0) };
    out.push_str(r#"<div class="timeline">"#);
    timeline::draw(out, &ops, &windows, &bad, scale, end, id);
    out.push_str("</div>");
    out.push_str("<h3>Throughput and latency</h3>");
    plot::draw(out, &ops, &windows, t0, end);
    violations(out, run, &index, &id, t0);
    out.push_str("</section>");
}

fn violations(out: &mut String, run: &Run<'_>, index: &HashMap<OpRef, usize>, id: &dyn Fn(usize) -> String, t0: u64) {
    let total = run.report.summary.violations;
    if total == 0 {
        out.push_str("<h3>Violations</h3><p>None: every property held.</p>");
        return;
    }
    let _ = write!(out, r#"<h3 class="badtxt">Violations ({total})</h3><ol class="violations">"#);
    for v in &run.report.violations {
        let _ = write!(out, "<li><b>{}</b> on {}: {}", esc(v.kind), esc(&v.resource), esc(&v.message));
        for r in &v.ops {
            if let Some(i) = index.get(r) {
                let _ = write!(
                    out,
                    r##" <a class="oplink" href="#{}">{} at {}</a>"##,
                    id(*i),
                    esc(&r.client),
                    fmt_s(r.start_us.saturating_sub(t0))
                );
            }
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
    let listed = run.report.violations.len() as u64;
    if listed < total {
        let _ = write!(out, "<p>{} more of the same kinds are counted in the summary, not listed.</p>", total - listed);
    }
}

/// Counts script errors on the page (the page test asserts there are none).
const ERRORS: &str = "window.pageErrors=0;window.addEventListener('error',function(){window.pageErrors++;document.documentElement.dataset.errors=window.pageErrors;});";

/// Follows links to operations (scrolls the lane to the bar and outlines it)
/// and states what was drawn as attributes of `<body>`, for the page test.
const SCRIPT: &str = r#"
(function () {
  var body = document.body;
  var ops = document.querySelectorAll('g.op');
  var broken = 0;
  document.querySelectorAll('a.oplink').forEach(function (a) {
    if (!document.getElementById(a.getAttribute('href').slice(1))) broken++;
  });
  function focus() {
    document.querySelectorAll('g.focus').forEach(function (g) { g.classList.remove('focus'); });
    var el = location.hash && document.getElementById(location.hash.slice(1));
    if (el && el.classList.contains('op')) {
      el.classList.add('focus');
      el.scrollIntoView({ block: 'center', inline: 'center' });
    }
  }
  // Zoom: scales every horizontal coordinate of one timeline's lanes from the
  // values it was drawn with; a bar's label shows when the bar is wide enough.
  function zoom(box, factor) {
    var svg = box.querySelector('svg.lanes'), scroll = box.querySelector('.scroll');
    if (!svg.base) {
      svg.base = { width: +svg.getAttribute('width'), pps: +svg.dataset.pps, z: 1 };
      svg.querySelectorAll('rect, line, text').forEach(function (el) {
        el.base = {};
        ['x', 'x1', 'x2', 'width'].forEach(function (a) {
          if (el.hasAttribute(a)) el.base[a] = +el.getAttribute(a);
        });
      });
    }
    // Zoomed out no further than the whole run in view; `fit` shows the whole run.
    var least = Math.min(1, scroll.clientWidth / svg.base.width);
    var old = svg.base.z, z = factor === 0 ? least : Math.min(512, Math.max(least, old * factor));
    var centre = (scroll.scrollLeft + scroll.clientWidth / 2) / old;
    svg.base.z = z;
    svg.setAttribute('width', (svg.base.width * z).toFixed(0));
    svg.querySelectorAll('rect, line, text').forEach(function (el) {
      var b = el.base;
      if (b.x1 !== undefined) { el.setAttribute('x1', b.x1 * z); el.setAttribute('x2', b.x2 * z); }
      if (b.width !== undefined) { el.setAttribute('x', b.x * z); el.setAttribute('width', Math.max(b.width * z, el.parentNode.classList.contains('op') ? 1.5 : 2)); }
      else if (b.x !== undefined) {
        var bar = el.parentNode.classList.contains('op') && el.parentNode.querySelector('rect');
        if (bar) {
          el.setAttribute('x', +bar.getAttribute('x') + 2);
          var fits = +bar.getAttribute('width') >= el.textContent.length * 6.2 + 4;
          if (fits) el.removeAttribute('display'); else el.setAttribute('display', 'none');
        } else el.setAttribute('x', (b.x - 2) * z + 2);
      }
    });
    box.querySelector('.zl').textContent = (svg.base.pps * z).toFixed(0) + ' px/s';
    scroll.scrollLeft = centre * z - scroll.clientWidth / 2;
  }
  document.querySelectorAll('.zoom button').forEach(function (b) {
    b.addEventListener('click', function () { zoom(b.closest('.timeline'), +b.dataset.z); });
  });
  // `timeline.html?zoom=8` opens every timeline zoomed in.
  var asked = +new URLSearchParams(location.search).get('zoom');
  if (asked > 1) document.querySelectorAll('.timeline').forEach(function (t) { zoom(t, asked); });
  window.addEventListener('hashchange', focus);
  focus();
  body.dataset.labels = document.querySelectorAll('g.op text:not([display])').length;
  body.dataset.ops = ops.length;
  body.dataset.violationOps = document.querySelectorAll('g.op.bad').length;
  body.dataset.faults = document.querySelectorAll('svg.lanes g.fault').length;
  body.dataset.brokenLinks = broken;
  body.dataset.ready = '1';
})();
"#;

const STYLE: &str = r#"
body { font: 14px system-ui, sans-serif; margin: 20px; color: #222; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; } h3 { font-size: 15px; }
section { border-top: 1px solid #ccc; }
.good { color: #2e7d32; } .badtxt { color: #c62828; }
table.summary { border-collapse: collapse; font-size: 12px; }
table.summary td { border: 1px solid #ddd; padding: 3px 6px; vertical-align: top; }
.legend { font-size: 12px; line-height: 22px; }
.sw { display: inline-block; width: 14px; height: 12px; margin: 0 3px 0 10px; vertical-align: middle; border-radius: 2px; }
.sw.ok { background: #43a047; } .sw.info { background: #9e9e9e; } .sw.badsw { background: #e53935; outline: 2px solid #b71c1c; }
.sw.f-pause { background: rgba(33,150,243,.35); } .sw.f-kill { background: rgba(60,60,60,.35); } .sw.f-net { background: rgba(156,39,176,.3); }
.sw.f-failover { background: rgba(255,143,0,.4); }
.tl { display: flex; border: 1px solid #ddd; }
.zoom { font-size: 12px; margin: 6px 0; } .zoom button { min-width: 28px; margin-right: 2px; }
.tl .scroll { overflow-x: auto; flex: 1; }
svg text { font: 11px system-ui, sans-serif; }
svg.names text { fill: #333; }
.stripe { fill: #f6f6f6; }
.grid { stroke: #e2e2e2; } .tick { fill: #666; font-size: 10px; }
.fault .band { opacity: .16; } .fault .hit { opacity: .35; } .flabel { font-size: 9px; fill: #444; }
.f-pause .band, .f-pause .hit, rect.band.f-pause { fill: #2196f3; }
.f-kill .band, .f-kill .hit, rect.band.f-kill { fill: #333; }
.f-net .band, .f-net .hit, rect.band.f-net { fill: #9c27b0; }
.f-failover .band, .f-failover .hit, rect.band.f-failover { fill: #ff8f00; }
rect.band { opacity: .14; }
.op rect { stroke: rgba(0,0,0,.25); stroke-width: .5; }
.op.ok rect { fill: #43a047; } .op.info rect { fill: #9e9e9e; }
.op.k-acquire rect, .op.k-renew rect, .op.k-release rect { opacity: .7; }
.op.bad rect { fill: #e53935; stroke: #b71c1c; stroke-width: 2; opacity: 1; }
.op.focus rect { stroke: #000; stroke-width: 3; }
.op text { fill: #fff; font-size: 10px; pointer-events: none; }
.op.info text, .op.fail text { fill: #111; }
svg.plot { display: block; max-width: 100%; height: auto; }
.axis { stroke: #999; } .ctitle { font-size: 12px; fill: #333; }
polyline { fill: none; stroke-width: 1.5; }
.l-all { stroke: #555; } .l-ok { stroke: #43a047; } .l-fail { stroke: #ef6c00; } .l-p50 { stroke: #1e88e5; } .l-p99 { stroke: #c62828; }
tspan.l-all { fill: #555; } tspan.l-ok { fill: #2e7d32; } tspan.l-fail { fill: #ef6c00; } tspan.l-p50 { fill: #1e88e5; } tspan.l-p99 { fill: #c62828; }
tspan { stroke: none; }
ol.violations li { margin: 4px 0; } a.oplink { font-size: 12px; }
"#;

#[cfg(test)]
mod tests;
