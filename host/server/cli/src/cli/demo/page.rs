//! The demo's page, `demo.html`: the runs side by side, each drawn as the
//! story it tells (the campaign's `timeline.html` is for campaigns).
//!
//! One column per run: a time axis with a lane per client and one for the
//! storage. A client's lane carries its lease, with the token written on it,
//! and the pause; each write is a numbered marker with an arrow into the
//! storage, which takes it (arrowhead) or refuses it (a wall with its HTTP
//! status). The storage's lane shows whose data the file holds over time,
//! stale data in red. Under the chart, each write with its token and the
//! storage's answer (a refusal with its reason and evidence), then the data
//! that survived.
//!
//! Invariants:
//! - self-contained: inline CSS and SVG, no script, nothing fetched;
//! - every text taken from the records is escaped;
//! - both runs share one time scale, so their columns compare at a glance;
//! - what the page shows is marked for tests: each run is a `<section
//!   data-run="fenced|unfenced">`; each lease a `<g class="lease"
//!   data-client data-token>`, each write a `<tr class="write" data-client
//!   data-token data-status>`, the surviving data `<pre class="survived">`.

use super::story::{Answer, Lease, Story, Write};
use fencing_chaos::report::esc;
use std::fmt::Write as _;

/// The page's file name inside the report directory.
pub const PAGE: &str = "demo.html";

/// One column: a title and its story.
pub struct Column<'a> {
    pub title: &'a str,
    pub story: &'a Story,
}

/// Width of a column's chart, and where its time axis starts and ends.
const W: f64 = 600.0;
const LEFT: f64 = 86.0;
const RIGHT: f64 = 20.0;
/// The lanes: client-1 on top, the storage in the middle, client-2 below
/// (arrows from both clients meet the storage without crossing a lane).
const LANE_H: f64 = 56.0;
const STORAGE_H: f64 = 44.0;
const GAP: f64 = 22.0;
const TOP: f64 = 10.0;

const CLIENT_COLORS: [&str; 4] = ["#3f51b5", "#00838f", "#6a1b9a", "#5d4037"];
const OK: &str = "#2e7d32";
const REFUSED: &str = "#e65100";
const LOST: &str = "#c62828";
const UNKNOWN: &str = "#757575";

/// The whole page.
pub fn render(title: &str, columns: &[Column<'_>]) -> String {
    let span = columns.iter().map(|c| c.story.end_us).max().unwrap_or(0).max(1);
    let scale = Scale::new(span);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = esc(title)
    );
    out.push_str(
        "<p class=\"lede\"><b>client-1</b> takes the lock, then stops (<code>SIGSTOP</code>) past its lease; \
         <b>client-2</b> takes the lock and writes; client-1 wakes up, still sure it holds the lock, and writes \
         with its old token.</p>",
    );
    legend(&mut out);
    out.push_str("<div class=\"runs\">");
    for column in columns {
        section(&mut out, column, &scale);
    }
    out.push_str("</div></body></html>\n");
    out
}

fn legend(out: &mut String) {
    let _ = write!(
        out,
        "<p class=\"legend\"><span class=\"sw\" style=\"background:{c}\"></span>lease, its token written on it \
         <span class=\"sw hatch\"></span>client paused \
         <span class=\"dot\" style=\"background:{OK}\">1</span>a write the storage took \
         <span class=\"dot\" style=\"background:{REFUSED}\">2</span>a write it refused \
         <span class=\"dot\" style=\"background:{LOST}\">2</span>a stale write it took \
         <span class=\"sw stale\"></span>stale data in the file</p>",
        c = CLIENT_COLORS[0]
    );
}

/// Microseconds to x, shared by every column.
struct Scale {
    span_us: u64,
    tick_us: u64,
}

impl Scale {
    fn new(end_us: u64) -> Scale {
        let tick_us = [100_000, 250_000, 500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 30_000_000]
            .into_iter()
            .find(|t| end_us.div_ceil(*t) <= 8)
            .unwrap_or(60_000_000);
        Scale { span_us: end_us.div_ceil(tick_us) * tick_us, tick_us }
    }

    fn x(&self, us: u64) -> f64 {
        LEFT + (W - LEFT - RIGHT) * us.min(self.span_us) as f64 / self.span_us as f64
    }
}

/// Seconds, as few digits as the value needs (`1.3 s`, `0.25 s`, `2 s`).
fn secs(us: u64) -> String {
    let s = format!("{:.2}", us as f64 / 1e6);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} s")
}

fn color_of(story: &Story, client: &str) -> &'static str {
    let mut clients: Vec<&str> = story.leases.iter().map(|l| l.client.as_str()).collect();
    clients.extend(story.writes.iter().map(|w| w.client.as_str()));
    clients.sort_unstable();
    clients.dedup();
    let i = clients.iter().position(|c| *c == client).unwrap_or(0);
    CLIENT_COLORS[i % CLIENT_COLORS.len()]
}

/// The clients in the order their lanes are drawn: by the token of their first lease.
fn clients(story: &Story) -> Vec<&str> {
    let mut leases: Vec<&Lease> = story.leases.iter().collect();
    leases.sort_by_key(|l| l.token);
    let mut out: Vec<&str> = Vec::new();
    for name in leases.iter().map(|l| l.client.as_str()).chain(story.writes.iter().map(|w| w.client.as_str())) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// True when `w` was written although another client held a newer lease.
fn is_stale(story: &Story, w: &Write) -> bool {
    story.leases.iter().any(|l| l.token > w.token && l.from_us <= w.at_us)
}

fn write_color(story: &Story, w: &Write) -> &'static str {
    match &w.answer {
        Answer::Admitted if is_stale(story, w) => LOST,
        Answer::Admitted => OK,
        Answer::Refused { .. } => REFUSED,
        Answer::Unknown { .. } => UNKNOWN,
    }
}

fn section(out: &mut String, column: &Column<'_>, scale: &Scale) {
    let story = column.story;
    let run = if story.fenced { "fenced" } else { "unfenced" };
    let (badge, class) = if story.holder_kept_its_data() {
        ("✓ the lock holder's data survived", "good")
    } else {
        ("✗ the lock holder's data was lost", "bad")
    };
    let _ = write!(
        out,
        "<section class=\"run {run}\" data-run=\"{run}\"><h2>{}</h2><p class=\"verdict {class}\">{badge}</p>",
        esc(column.title)
    );
    chart(out, story, scale);
    writes(out, story);
    survived(out, story);
    out.push_str("</section>");
}

/// The chart: a lane per client around the storage's lane, and the axis.
fn chart(out: &mut String, story: &Story, scale: &Scale) {
    let names = clients(story);
    // Lane tops: the first client above the storage, the others below it.
    let storage_y = TOP + LANE_H + GAP;
    let lane_y = |i: usize| if i == 0 { TOP } else { storage_y + STORAGE_H + GAP + (i - 1) as f64 * (LANE_H + GAP) };
    let axis_y = lane_y(names.len().max(2) - 1) + LANE_H + 10.0;
    let height = axis_y + 26.0;
    let _ = write!(
        out,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {height}\" width=\"{W}\" height=\"{height}\" role=\"img\" aria-label=\"leases, pause and writes on a time axis\">{DEFS}"
    );
    axis(out, scale, axis_y, TOP);
    storage_lane(out, story, scale, storage_y);
    for (i, name) in names.iter().enumerate() {
        client_lane(out, story, scale, name, Rows::of(lane_y(i), i == 0));
    }
    for w in &story.writes {
        let i = names.iter().position(|n| *n == w.client).unwrap_or(0);
        marker(out, story, scale, w, Rows::of(lane_y(i), i == 0), storage_y);
    }
    out.push_str("</svg>");
}

fn axis(out: &mut String, scale: &Scale, y: f64, top: f64) {
    let _ = write!(out, "<line class=\"axis\" x1=\"{LEFT}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>", W - RIGHT);
    let mut t = 0;
    while t <= scale.span_us {
        let x = scale.x(t);
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{y}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{}\">{}</text>",
            y + 15.0,
            secs(t)
        );
        t += scale.tick_us;
    }
}

/// A client lane's two rows: its leases and writes in one, its pauses in
/// the other. A lane below the storage is the mirror of one above it, so
/// that a write's arrow leaves from the row nearest the storage side it is
/// drawn from and crosses no lease.
#[derive(Clone, Copy)]
struct Rows {
    /// Top of the row of leases and writes.
    lease: f64,
    /// Top of the row of pauses.
    pause: f64,
    /// True for the lane above the storage.
    above: bool,
}

impl Rows {
    fn of(lane_y: f64, above: bool) -> Rows {
        let (upper, lower) = (lane_y + 2.0, lane_y + LANE_H / 2.0 + 2.0);
        if above { Rows { lease: upper, pause: lower, above } } else { Rows { lease: lower, pause: upper, above } }
    }
}

/// Height of a lane's row.
const ROW_H: f64 = 22.0;

fn client_lane(out: &mut String, story: &Story, scale: &Scale, client: &str, rows: Rows) {
    let color = color_of(story, client);
    let _ = write!(
        out,
        "<text class=\"lane\" x=\"6\" y=\"{:.1}\" fill=\"{color}\">{}</text>",
        rows.lease + ROW_H / 2.0 + 4.5,
        esc(client)
    );
    for lease in story.leases.iter().filter(|l| l.client == client) {
        let (x1, x2) = (scale.x(lease.from_us), scale.x(lease.to_us));
        let w = (x2 - x1).max(2.0);
        let label = if w > 150.0 {
            format!("token {} · lease {}", lease.token, secs(lease.to_us - lease.from_us))
        } else {
            format!("token {}", lease.token)
        };
        let inside = w > 8.0 * label.chars().count() as f64;
        let (tx, anchor, fill) = if inside { (x1 + w / 2.0, "middle", "#fff") } else { (x2 + 4.0, "start", color) };
        let _ = write!(
            out,
            "<g class=\"lease\" data-client=\"{c}\" data-token=\"{t}\"><title>{c} holds the lock with token {t} from {} to {}</title>\
             <rect x=\"{x1:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{ROW_H}\" rx=\"4\" fill=\"{color}\"/>\
             <text class=\"token\" x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" fill=\"{fill}\">{}</text></g>",
            secs(lease.from_us),
            secs(lease.to_us),
            rows.lease,
            rows.lease + 15.5,
            esc(&label),
            c = esc(client),
            t = lease.token,
        );
        // Written after the lease ended: the client did not know it had.
        let late = story.writes.iter().filter(|w| w.client == client && w.at_us > lease.to_us).map(|w| w.at_us).max();
        if let Some(at) = late {
            let xw = scale.x(at);
            let _ = write!(
                out,
                "<line class=\"expired\" x1=\"{x2:.1}\" y1=\"{yl:.1}\" x2=\"{xw:.1}\" y2=\"{yl:.1}\" stroke=\"{color}\"><title>{} still believes it holds the lock</title></line>",
                esc(client),
                yl = rows.lease + ROW_H / 2.0,
            );
            if xw - x2 > 75.0 {
                let _ = write!(
                    out,
                    "<text class=\"note\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">lease expired</text>",
                    x2 + 5.0,
                    rows.lease + ROW_H / 2.0 - 4.0,
                );
            }
        }
    }
    for p in story.pauses.iter().filter(|p| p.client == client) {
        let (x1, x2) = (scale.x(p.from_us), scale.x(p.to_us));
        let _ = write!(
            out,
            "<g class=\"pause\" data-client=\"{c}\"><title>{c} stopped from {} to {}</title>\
             <rect x=\"{x1:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{ROW_H}\" fill=\"url(#hatch)\" stroke=\"#616161\"/>\
             <text class=\"pausetxt\" x=\"{:.1}\" y=\"{:.1}\">paused (SIGSTOP) {}</text></g>",
            secs(p.from_us),
            secs(p.to_us),
            rows.pause,
            (x2 - x1).max(2.0),
            x1 + 6.0,
            rows.pause + 15.5,
            secs(p.to_us - p.from_us),
            c = esc(client),
        );
    }
}

/// Whose data the file holds over time; stale data (a write under a token
/// older than a lease already granted) in red.
fn storage_lane(out: &mut String, story: &Story, scale: &Scale, y: f64) {
    let check = if story.fenced { "checks tokens" } else { "no token check" };
    let _ = write!(
        out,
        "<text class=\"lane\" x=\"6\" y=\"{:.1}\">storage</text><text class=\"sub\" x=\"6\" y=\"{:.1}\">{check}</text>\
         <rect class=\"store\" x=\"{LEFT}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{STORAGE_H}\" rx=\"3\"/>",
        y + 18.0,
        y + 33.0,
        W - LEFT - RIGHT
    );
    let taken: Vec<&Write> = story.writes.iter().filter(|w| w.answer == Answer::Admitted).collect();
    let first = taken.first().map_or(story.end_us, |w| w.at_us);
    if scale.x(first) - LEFT > 60.0 {
        let _ = write!(
            out,
            "<text class=\"empty\" x=\"{:.1}\" y=\"{:.1}\">{} empty</text>",
            LEFT + 8.0,
            y + STORAGE_H / 2.0 + 4.0,
            esc(&story.file)
        );
    }
    let mut high_water: Option<u64> = None;
    for (i, w) in taken.iter().enumerate() {
        let to = taken.get(i + 1).map_or(scale.span_us, |n| n.at_us);
        let (x1, x2) = (scale.x(w.at_us), scale.x(to));
        let stale = is_stale(story, w);
        high_water = high_water.max(Some(w.token));
        let (fill, label) = if stale {
            ("url(#stale)".to_string(), format!("{}'s stale data (token {})", w.client, w.token))
        } else if story.fenced {
            (
                format!("{}33", color_of(story, &w.client)),
                format!("{}'s data · high-water {}", w.client, w.token.max(high_water.unwrap_or(0))),
            )
        } else {
            (format!("{}33", color_of(story, &w.client)), format!("{}'s data (token {})", w.client, w.token))
        };
        let _ = write!(
            out,
            "<g class=\"content\" data-client=\"{}\" data-stale=\"{stale}\"><rect x=\"{x1:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"/>",
            esc(&w.client),
            y + 2.0,
            (x2 - x1).max(1.0),
            STORAGE_H - 4.0
        );
        if x2 - x1 > 7.0 * label.chars().count() as f64 {
            let _ = write!(
                out,
                "<text class=\"{}\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                if stale { "stalelabel" } else { "datalabel" },
                x1 + 16.0,
                y + STORAGE_H / 2.0 + 4.0,
                esc(&label)
            );
        }
        out.push_str("</g>");
    }
}

/// A write: its number on the writer's lane and an arrow into the storage,
/// ending in an arrowhead (taken) or a wall with the HTTP status (refused).
fn marker(out: &mut String, story: &Story, scale: &Scale, w: &Write, rows: Rows, storage_y: f64) {
    let color = write_color(story, w);
    let x = scale.x(w.at_us);
    let cy = rows.lease + ROW_H / 2.0;
    let (from, to) = if rows.above { (cy + 10.0, storage_y - 1.0) } else { (cy - 10.0, storage_y + STORAGE_H + 1.0) };
    let _ = write!(out, "<g class=\"write\" data-n=\"{}\"><title>{}</title>", w.n, esc(&describe(w)));
    match &w.answer {
        Answer::Refused { .. } => {
            let wall = if rows.above { to - 4.0 } else { to + 4.0 };
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{from:.1}\" x2=\"{x:.1}\" y2=\"{wall:.1}\" stroke=\"{color}\" stroke-width=\"2\"/>\
                 <line x1=\"{:.1}\" y1=\"{wall:.1}\" x2=\"{:.1}\" y2=\"{wall:.1}\" stroke=\"{color}\" stroke-width=\"4\"/>\
                 <text class=\"status\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{color}\">409</text>",
                x - 9.0,
                x + 9.0,
                x + 12.0,
                if rows.above { wall - 3.0 } else { wall + 12.0 },
            );
        }
        _ => {
            let _ = write!(
                out,
                "<line x1=\"{x:.1}\" y1=\"{from:.1}\" x2=\"{x:.1}\" y2=\"{to:.1}\" stroke=\"{color}\" stroke-width=\"2\" marker-end=\"url(#head-{})\"/>",
                color.trim_start_matches('#')
            );
        }
    }
    let _ = write!(
        out,
        "<circle cx=\"{x:.1}\" cy=\"{cy:.1}\" r=\"10\" fill=\"{color}\" stroke=\"#fff\" stroke-width=\"1.5\"/><text class=\"num\" x=\"{x:.1}\" y=\"{:.1}\">{}</text></g>",
        cy + 4.5,
        w.n
    );
}

/// A write and its answer in one line (the marker's tooltip).
/// Plain text, escaped once where it is written.
fn describe(w: &Write) -> String {
    let answer = match &w.answer {
        Answer::Admitted => "200 written".to_string(),
        Answer::Refused { reason, high_water: Some(hw) } => {
            format!("409 {reason}: presented {} < high-water {hw}", w.token)
        }
        Answer::Refused { reason, high_water: None } => format!("409 {reason}"),
        Answer::Unknown { error } => format!("no answer: {error}"),
    };
    format!("{}: {} writes with token {}: {answer}", w.n, w.client, w.token)
}

/// The storage's answer as the table shows it (HTML).
fn answer_text(w: &Write) -> String {
    match &w.answer {
        Answer::Admitted => "<b>200</b> written".to_string(),
        Answer::Refused { reason, high_water } => {
            let evidence = match high_water {
                Some(hw) => format!(": presented {} &lt; high-water {hw}", w.token),
                None => String::new(),
            };
            format!("<b>409 {}</b>{evidence}", esc(reason))
        }
        Answer::Unknown { error } => format!("no answer: {}", esc(error)),
    }
}

fn writes(out: &mut String, story: &Story) {
    out.push_str("<table class=\"writes\"><tr><th>#</th><th>who</th><th>token</th><th>the storage's answer</th></tr>");
    for w in &story.writes {
        let color = write_color(story, w);
        let (status, note) = match &w.answer {
            Answer::Admitted if is_stale(story, w) => ("200", " <span class=\"badtxt\">took a stale token</span>"),
            Answer::Admitted => ("200", ""),
            Answer::Refused { .. } => ("409", " <span class=\"refusal\">refused</span>"),
            Answer::Unknown { .. } => ("unknown", ""),
        };
        let _ = write!(
            out,
            "<tr class=\"write\" data-client=\"{c}\" data-token=\"{t}\" data-status=\"{status}\"><td><span class=\"dot\" style=\"background:{color}\">{n}</span></td>\
             <td style=\"color:{cc}\"><b>{c}</b></td><td class=\"tok\">{t}</td><td>{a}{note}</td></tr>",
            n = w.n,
            c = esc(&w.client),
            cc = color_of(story, &w.client),
            t = w.token,
            a = answer_text(w),
        );
    }
    out.push_str("</table>");
}

fn survived(out: &mut String, story: &Story) {
    let good = story.holder_kept_its_data();
    let _ = write!(
        out,
        "<div class=\"after {}\"><p>{} holds at the end:</p><pre class=\"survived\">{}</pre>",
        if good { "good" } else { "bad" },
        esc(&story.file),
        esc(story.survived.as_deref().map_or("(no file)", str::trim_end))
    );
    let holder = story.last_holder();
    let line = match (story.survivor(), holder) {
        (Some(w), Some(_)) if good => format!("✓ {}'s write (token {}) survived.", esc(&w.client), w.token),
        (Some(w), Some(h)) => format!(
            "✗ {}'s stale write (token {}) replaced the data of {}, which held the lock (token {}).",
            esc(&w.client),
            w.token,
            esc(&h.client),
            h.token
        ),
        _ => "✗ the data is not the lock holder's.".to_string(),
    };
    let _ = write!(out, "<p class=\"line\">{line}</p></div>");
}

const DEFS: &str = concat!(
    "<defs>",
    "<pattern id=\"hatch\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"#eeeeee\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#9e9e9e\" stroke-width=\"3\"/></pattern>",
    "<pattern id=\"stale\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"#ffcdd2\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#e57373\" stroke-width=\"3\"/></pattern>",
    "<marker id=\"head-2e7d32\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#2e7d32\"/></marker>",
    "<marker id=\"head-c62828\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#c62828\"/></marker>",
    "<marker id=\"head-757575\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#757575\"/></marker>",
    "</defs>"
);

const STYLE: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:18px 24px;color:#212121;background:#fafafa}\
h1{font-size:21px;margin:0 0 4px}h2{font-size:17px;margin:0}\
.lede{margin:0 0 6px;max-width:1220px}.legend{color:#424242;font-size:13px;margin:0 0 12px}\
.sw{display:inline-block;width:22px;height:12px;border-radius:2px;vertical-align:-1px;margin:0 4px 0 12px}\
.sw.hatch{background:repeating-linear-gradient(45deg,#eee 0 3px,#9e9e9e 3px 6px);border:1px solid #616161}\
.sw.stale{background:repeating-linear-gradient(45deg,#ffcdd2 0 3px,#e57373 3px 6px)}\
.dot{display:inline-block;min-width:20px;height:20px;border-radius:10px;color:#fff;font-weight:700;font-size:12px;text-align:center;line-height:20px;margin:0 4px 0 12px}\
td .dot{margin:0}\
.runs{display:flex;flex-wrap:wrap;gap:20px}\
.run{background:#fff;border:1px solid #e0e0e0;border-radius:8px;padding:12px 14px;width:600px}\
.verdict{font-size:16px;font-weight:700;margin:2px 0 6px}.good{color:#2e7d32}.bad{color:#c62828}\
svg text{font-family:system-ui,-apple-system,'Segoe UI',sans-serif}\
.lane{font-size:13px;font-weight:700}.sub{font-size:11px;fill:#616161}\
.token{font-size:13px;font-weight:700}.note{font-size:11px;font-style:italic}\
.pausetxt{font-size:12px;font-weight:600;fill:#212121;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.expired{stroke-width:2;stroke-dasharray:4 3}\
.store{fill:#f5f5f5;stroke:#9e9e9e}.empty{font-size:12px;fill:#757575;font-style:italic}\
.datalabel,.stalelabel{font-size:12px;font-weight:700;fill:#212121;paint-order:stroke;stroke:#fff;stroke-width:3px}\
.stalelabel{fill:#b71c1c}\
.status{font-size:12px;font-weight:700}\
.num{font-size:12px;font-weight:700;fill:#fff;text-anchor:middle}\
.axis{stroke:#616161}.grid{stroke:#eeeeee}.tick{font-size:11px;fill:#616161;text-anchor:middle}\
.writes{border-collapse:collapse;margin:8px 0;width:100%}\
.writes th{text-align:left;font-size:12px;color:#616161;font-weight:600;border-bottom:1px solid #e0e0e0;padding:3px 6px}\
.writes td{padding:5px 6px;border-bottom:1px solid #f0f0f0}.tok{font-weight:700;font-size:15px}\
.refusal{background:#fff3e0;color:#e65100;border-radius:3px;padding:0 5px;font-weight:600}\
.badtxt{background:#ffebee;color:#c62828;border-radius:3px;padding:0 5px;font-weight:600}\
.after{border-radius:6px;padding:8px 10px;margin-top:6px}.after p{margin:0}\
.after.good{background:#e8f5e9;border:1px solid #a5d6a7}.after.bad{background:#ffebee;border:1px solid #ef9a9a}\
.survived{font-size:14px;font-weight:700;margin:4px 0;white-space:pre-wrap;word-break:break-all}\
.line{font-weight:700}.after.good .line{color:#2e7d32}.after.bad .line{color:#c62828}";

#[cfg(test)]
mod tests {
    use super::super::story::tests::run;
    use super::*;
    use fencing_chaos::history::{OpKind, Record};

    fn page() -> String {
        let (fenced, unfenced) = (Story::of(&run(true), 1000), Story::of(&run(false), 1000));
        render(
            "the demo",
            &[
                Column { title: "storage checks tokens", story: &fenced },
                Column { title: "storage without fencing", story: &unfenced },
            ],
        )
    }

    /// The text of the part of `page` from `start` to the next `end`.
    fn part<'a>(page: &'a str, start: &str, end: &str) -> &'a str {
        let at = page.find(start).unwrap_or_else(|| panic!("no {start}"));
        let rest = &page[at..];
        &rest[..rest.find(end).unwrap_or(rest.len())]
    }

    #[test]
    fn each_run_shows_its_tokens_the_refusal_and_the_surviving_data() {
        let page = page();
        let fenced = part(&page, "data-run=\"fenced\"", "</section>");
        assert!(fenced.contains("<g class=\"lease\" data-client=\"client-1\" data-token=\"33\">"));
        assert!(fenced.contains(">token 33 · lease 1 s</text>"), "the token is written on the lease");
        assert!(fenced.contains(">token 34 · lease 1 s</text>"));
        assert!(fenced.contains("paused (SIGSTOP) 1.32 s"));
        assert!(fenced.contains("<b>409 stale_token</b>: presented 33 &lt; high-water 34"));
        assert!(
            fenced.contains(
                "<title>2: client-1 writes with token 33: 409 stale_token: presented 33 &lt; high-water 34</title>"
            ),
            "the marker's tooltip, escaped once"
        );
        assert!(fenced.contains("data-client=\"client-1\" data-token=\"33\" data-status=\"409\""));
        assert!(fenced.contains("<pre class=\"survived\">written by client-2 with token 34</pre>"));
        assert!(fenced.contains("✓ the lock holder's data survived"));
        let unfenced = part(&page, "data-run=\"unfenced\"", "</section>");
        assert!(unfenced.contains("data-client=\"client-1\" data-token=\"33\" data-status=\"200\""));
        assert!(unfenced.contains("took a stale token"));
        assert!(unfenced.contains("<pre class=\"survived\">written by client-1 with token 33</pre>"));
        assert!(unfenced.contains("data-stale=\"true\""), "the stale data is drawn as such");
        assert!(unfenced.contains("replaced the data of client-2, which held the lock (token 34)"));
        assert!(!unfenced.contains("409"));
    }

    #[test]
    fn the_page_fetches_nothing_and_runs_no_script() {
        let page = page();
        for needle in ["<script", "http://", "https://", " src=", "<link", "@import", "url(http"] {
            assert!(!page.contains(needle), "{needle}");
        }
    }

    #[test]
    fn text_from_the_records_is_escaped() {
        let mut records = run(true);
        for r in &mut records {
            if let Record::Op(op) = r {
                op.client = op.client.replace("client-1", "<img onerror=x>");
                if op.op == OpKind::Read {
                    op.value = Some("</pre><script>alert(1)</script>".into());
                }
            }
        }
        let story = Story::of(&records, 1000);
        let page = render("<b>", &[Column { title: "\"quoted\"", story: &story }]);
        // (A client's name in a bold cell reads `<b>&lt;img`: the markup is the page's, the name escaped.)
        assert!(page.contains("<h1>&lt;b&gt;</h1>") && page.contains("<h2>&quot;quoted&quot;</h2>"));
        for raw in ["<img", "<script", "<h1><b>"] {
            let at = page.find(raw).map(|i| &page[i.saturating_sub(80)..(i + 40).min(page.len())]);
            assert!(at.is_none(), "{raw} unescaped: {at:?}");
        }
        assert!(page.contains("&lt;img onerror=x&gt;") && page.contains("&lt;/pre&gt;&lt;script&gt;"));
    }

    #[test]
    fn both_runs_share_one_time_scale() {
        let scale = Scale::new(2_304_000);
        assert_eq!((scale.span_us, scale.tick_us), (2_500_000, 500_000));
        assert_eq!(scale.x(0), LEFT);
        assert_eq!(scale.x(10_000_000), W - RIGHT, "past the end stays on the chart");
        assert_eq!(secs(1_300_000), "1.3 s");
        assert_eq!(secs(2_000_000), "2 s");
    }
}
