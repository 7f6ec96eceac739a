//! `fencing demo --report DIR`: the demo's own page (`demo.html`), checked
//! against the records of the run that drew it. The page is loaded in
//! headless Chromium (what a browser parses, not the bytes written) and
//! must show, for the fenced and the unfenced run: each client's lease with
//! the token the lock service granted it, the pause, each write with its
//! token and the storage's answer (the refusal with its reason, the token
//! presented and the high-water mark), and the data the final read found.
//! The runs' histories it writes beside the page are judged by the
//! campaign's checker as any history is.

use fencing_chaos::history::{Op, OpKind, Outcome, Phase, Record, read_history};
use std::path::Path;
use std::process::Command;

const FENCING: &str = env!("CARGO_BIN_EXE_fencing");

/// The page as headless Chromium parsed it.
fn dom(page: &Path) -> String {
    let browser = std::env::var("FENCING_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let out = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|e| panic!("run {browser} (scripts/setup --all installs it): {e}"));
    let dom = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(dom.contains("</section>"), "Chromium drew no run: {}", String::from_utf8_lossy(&out.stderr));
    dom
}

/// The part of `dom` inside the section of `run`.
fn section<'a>(dom: &'a str, run: &str) -> &'a str {
    let at = dom.find(&format!("data-run=\"{run}\"")).unwrap_or_else(|| panic!("no {run} run on the page"));
    let rest = &dom[at..];
    &rest[..rest.find("</section>").expect("the section ends")]
}

/// Text as the DOM serializes it.
fn html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

fn ops(records: &[Record]) -> Vec<&Op> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Op(op) => Some(op),
            _ => None,
        })
        .collect()
}

/// Checks that `part` shows what `records` hold; returns the final contents.
fn shows_its_run(part: &str, records: &[Record], fenced: bool) -> String {
    let ops = ops(records);
    let acquires: Vec<&&Op> = ops.iter().filter(|op| op.op == OpKind::Acquire).collect();
    assert_eq!(acquires.len(), 2, "two clients took the lock");
    for a in &acquires {
        let token = a.token.expect("a grant's token");
        let lease = format!("<g class=\"lease\" data-client=\"{}\" data-token=\"{token}\">", a.client);
        let at = part.find(&lease).unwrap_or_else(|| panic!("no lease of {} with token {token}: {part}", a.client));
        let drawn = &part[at..at + part[at..].find("</g>").unwrap()];
        assert!(drawn.contains(&format!(">token {token}")), "the token is written on the lease: {drawn}");
    }
    assert!(part.contains("<g class=\"pause\" data-client=\"client-1\">") && part.contains("paused (SIGSTOP)"));
    let writes: Vec<&&Op> = ops.iter().filter(|op| op.op == OpKind::Write).collect();
    assert_eq!(writes.len(), 2);
    for w in &writes {
        let token = w.token.expect("a write's token");
        let status = if w.outcome == Outcome::Fail { "409" } else { "200" };
        let row = format!(
            "<tr class=\"write\" data-client=\"{}\" data-token=\"{token}\" data-status=\"{status}\">",
            w.client
        );
        let at = part.find(&row).unwrap_or_else(|| panic!("no row for {}'s write: {part}", w.client));
        let drawn = &part[at..at + part[at..].find("</tr>").unwrap()];
        if w.outcome == Outcome::Fail {
            let (reason, high_water) = (w.reason.as_deref().expect("a reason"), w.high_water.expect("the mark"));
            assert!(
                drawn.contains(&format!("<b>409 {reason}</b>: presented {token} &lt; high-water {high_water}")),
                "{drawn}"
            );
        } else {
            assert!(drawn.contains("<b>200</b> written"), "{drawn}");
        }
    }
    let refused: Vec<&&&Op> = writes.iter().filter(|w| w.outcome == Outcome::Fail).collect();
    if fenced {
        assert_eq!(refused.len(), 1, "the fenced storage refused the paused client");
        assert_eq!((refused[0].client.as_str(), refused[0].reason.as_deref()), ("client-1", Some("stale_token")));
        assert!(refused[0].high_water > refused[0].token);
    } else {
        assert!(refused.is_empty(), "storage without fencing takes every write");
    }
    let read = ops.iter().find(|op| op.op == OpKind::Read && op.phase == Some(Phase::Final)).expect("the final read");
    let value = read.value.clone().expect("the file is there");
    let shown = format!("<pre class=\"survived\">{}</pre>", html(value.trim_end()));
    assert!(part.contains(&shown), "the surviving data {shown}: {part}");
    value
}

#[test]
fn the_demo_page_shows_tokens_the_refusal_and_the_data_that_survived_in_both_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(FENCING).args(["demo", "--lease-ms", "300", "--report"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let page = dir.path().join("demo.html");
    let written = std::fs::read_to_string(&page).unwrap();
    for external in ["<script", "http://", "https://", " src=", "<link", "@import"] {
        assert!(!written.contains(external), "the page fetches or runs nothing: {external}");
    }
    let dom = dom(&page);
    assert_eq!(dom.matches("<section").count(), 2, "both runs, side by side");

    let fenced = read_history(&dir.path().join("fenced.jsonl")).unwrap();
    let kept = shows_its_run(section(&dom, "fenced"), &fenced, true);
    assert!(kept.contains("written by client-2"), "the fenced file keeps the holder's data: {kept}");
    assert!(section(&dom, "fenced").contains("✓ the lock holder's data survived"));

    let unfenced = read_history(&dir.path().join("unfenced.jsonl")).unwrap();
    let lost = shows_its_run(section(&dom, "unfenced"), &unfenced, false);
    assert!(lost.contains("written by client-1"), "without fencing the stale write replaced it: {lost}");
    let part = section(&dom, "unfenced");
    assert!(part.contains("✗ the lock holder's data was lost") && part.contains("took a stale token"));
    assert!(part.contains("data-stale=\"true\""), "the stale data is drawn as stale");

    // The histories beside the page are the campaign's format: its checker
    // finds the unfenced run's lost write and nothing wrong with the fenced one.
    let check = |file: &str| {
        Command::new(FENCING).args(["chaos", "check"]).arg(dir.path().join(file)).output().unwrap().status.code()
    };
    assert_eq!(check("fenced.jsonl"), Some(0));
    assert_eq!(check("unfenced.jsonl"), Some(1));
}
