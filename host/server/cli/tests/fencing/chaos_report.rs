//! The run report (`timeline.html`) in a real browser: headless Chromium loads
//! the page written by `fencing chaos --report` and `fencing chaos check
//! --report` (the demo has a page of its own: `demo_report`), runs its script
//! without an error, draws every operation of the history, links every listed
//! violation to a drawn bar, and zooms so that more bars show their tokens.

use std::path::Path;
use std::process::Command;

const FENCING: &str = env!("CARGO_BIN_EXE_fencing");

/// What the page's script states about itself, as attributes of `<body>`.
#[derive(Debug)]
struct Loaded {
    ops: u64,
    violation_ops: u64,
    faults: u64,
    broken_links: u64,
    labels: u64,
}

fn attr(dom: &str, name: &str) -> u64 {
    let key = format!("{name}=\"");
    let at = dom.find(&key).unwrap_or_else(|| panic!("no {name} in the rendered page"));
    let rest = &dom[at + key.len()..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

/// Loads the page in headless Chromium and reads back what its script drew.
fn load(page: &Path, query: &str) -> Loaded {
    let browser = std::env::var("FENCING_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let out = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}{query}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("run {browser} (scripts/setup --all installs it): {e}"));
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        dom.contains("data-ready=\"1\""),
        "the page's script did not finish: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dom.contains("data-errors="), "the page raised script errors");
    Loaded {
        ops: attr(&dom, "data-ops"),
        violation_ops: attr(&dom, "data-violation-ops"),
        faults: attr(&dom, "data-faults"),
        broken_links: attr(&dom, "data-broken-links"),
        labels: attr(&dom, "data-labels"),
    }
}

fn ops_in(history: &Path) -> u64 {
    std::fs::read_to_string(history).unwrap().lines().filter(|l| l.contains(r#""type":"op""#)).count() as u64
}

#[test]
fn a_campaign_report_shows_every_operation_and_links_its_violations() {
    let dir = tempfile::tempdir().unwrap();
    let (work, report, history) = (dir.path().join("work"), dir.path().join("report"), dir.path().join("h.jsonl"));
    let status = Command::new(FENCING)
        .args(["chaos", "--seconds", "6", "--seed", "11", "--no-fencing", "--dir"])
        .arg(&work)
        .arg("--history")
        .arg(&history)
        .arg("--report")
        .arg(&report)
        .status()
        .unwrap();
    assert!(status.success(), "the unfenced campaign should find violations");
    let page = report.join("timeline.html");
    let loaded = load(&page, "");
    assert_eq!(loaded.ops, ops_in(&history), "{loaded:?}");
    assert!(loaded.violation_ops > 0, "violations are drawn in red: {loaded:?}");
    assert!(loaded.faults > 0, "the nemesis's faults are drawn: {loaded:?}");
    assert_eq!(loaded.broken_links, 0);
    let zoomed = load(&page, "?zoom=64");
    assert_eq!(zoomed.ops, loaded.ops);
    assert!(zoomed.labels > loaded.labels, "zooming in shows more tokens: {} -> {}", loaded.labels, zoomed.labels);

    // The checker on the saved history draws the same page.
    let again = dir.path().join("again");
    let status =
        Command::new(FENCING).args(["chaos", "check"]).arg(&history).arg("--report").arg(&again).status().unwrap();
    assert_eq!(status.code(), Some(1), "the history has violations");
    let (first, second) = (std::fs::read(&page).unwrap(), std::fs::read(again.join("timeline.html")).unwrap());
    assert!(first == second, "chaos check --report drew a different page");
}
