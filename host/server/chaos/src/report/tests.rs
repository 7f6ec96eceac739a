use super::*;
use crate::check;
use crate::client::new_op;
use crate::history::{Header, NemesisEvent, NemesisKind, OpKind, Phase, RestartEvent};
use fencing_api::wire::storage::Mutation;

const T0: u64 = 1_700_000_000_000_000;

fn op(client: &str, kind: OpKind, token: u64, at_ms: u64, ms: u64, outcome: Outcome) -> Record {
    Record::Op(Op {
        token: Some(token),
        file_path: (kind == OpKind::Write).then(|| "value".to_string()),
        mutation: (kind == OpKind::Write).then_some(Mutation::Put),
        value: (kind == OpKind::Write).then(|| format!("{client}/{token}")),
        start_us: T0 + at_ms * 1000,
        end_us: T0 + (at_ms + ms) * 1000,
        outcome,
        reason: (outcome == Outcome::Fail).then(|| "stale_token".to_string()),
        ..new_op(client, kind, "r")
    })
}

/// A history in which c1, paused past its lease, writes with token 1 after c2's token-2 write was acknowledged.
fn history(fencing: bool) -> Vec<Record> {
    let stale = if fencing { Outcome::Fail } else { Outcome::Ok };
    let mut records = vec![
        Record::Header(Header { seed: 7, fencing, policy: "non_decreasing".into(), started_us: T0, replication: None }),
        op("c1", OpKind::Acquire, 1, 0, 5, Outcome::Ok),
        Record::Nemesis(NemesisEvent {
            at_us: T0 + 10_000,
            kind: NemesisKind::Pause,
            target: "c1".into(),
            detail: Some("900ms".into()),
        }),
        op("c2", OpKind::Acquire, 2, 700, 5, Outcome::Ok),
        op("c2", OpKind::Write, 2, 710, 20, Outcome::Ok),
        Record::Nemesis(NemesisEvent {
            at_us: T0 + 910_000,
            kind: NemesisKind::Resume,
            target: "c1".into(),
            detail: None,
        }),
        op("c1", OpKind::Write, 1, 920, 15, stale),
        Record::Nemesis(NemesisEvent {
            at_us: T0 + 950_000,
            kind: NemesisKind::Kill,
            target: "storage".into(),
            detail: None,
        }),
        Record::Restart(RestartEvent { at_us: T0 + 1_050_000, server: "storage".into() }),
        op("c10", OpKind::Write, 3, 1_100, 2_000, Outcome::Info),
    ];
    let Record::Op(mut read) = op("campaign", OpKind::Read, 0, 3_200, 3, Outcome::Ok) else { unreachable!() };
    read.token = None;
    read.phase = Some(Phase::Final);
    read.file_path = Some("value".into());
    read.value = Some(if fencing { "c2/2" } else { "c1/1" }.into());
    records.push(Record::Op(read));
    records
}

fn page(records: &[Record]) -> (String, check::Report) {
    let report = check::check(records);
    let html = render("test <run>", &[Run { title: "the GC-pause scenario".into(), records, report: &report }]);
    (html, report)
}

fn attr_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    html.split(attr).skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect()
}

#[test]
fn every_operation_is_a_bar_and_every_violation_links_to_its_bars() {
    let records = history(false);
    let (html, report) = page(&records);
    assert!(!report.is_valid(), "the unfenced history must break a property");
    let ops = records.iter().filter(|r| matches!(r, Record::Op(_))).count();
    assert_eq!(html.matches(r#"<g class="op "#).count(), ops);
    let ids: HashSet<&str> = attr_values(&html, r#" id=""#).into_iter().collect();
    let links = attr_values(&html, r##"href="#"##);
    assert!(!links.is_empty(), "violations link to their operations");
    for link in &links {
        assert!(ids.contains(link), "link #{link} has no target");
    }
    // The stale write and the write it overtook are drawn as evidence.
    let bad = html.matches(" bad k-").count();
    assert!(bad >= 2, "{bad} bars marked as evidence");
    assert!(html.contains("stale_admitted"));
    assert!(html.contains("w 1") && html.contains("acq 2"), "tokens are drawn on the bars");
    // Two fault windows (the pause, the kill) as bands, labelled.
    assert_eq!(html.matches(r#"<g class="fault "#).count(), 2);
    assert!(html.contains("pause c1 (900ms)") && html.contains("kill storage"));
    // Lanes in numeric order, the campaign's reads last.
    let lanes = html.find(">c1<").unwrap() < html.find(">c2<").unwrap()
        && html.find(">c2<").unwrap() < html.find(">c10<").unwrap()
        && html.find(">c10<").unwrap() < html.find(">campaign<").unwrap();
    assert!(lanes, "lanes out of order");
}

#[test]
fn a_clean_history_has_no_red_and_names_the_refusal_reason() {
    let records = history(true);
    let (html, report) = page(&records);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(html.matches(" bad k-").count(), 0);
    assert!(html.contains("0 violations") && html.contains("None: every property held."));
    assert!(html.contains("fail r-stale_token"), "a refusal is colored by its reason");
    assert!(html.contains(".r-stale_token rect"), "and the reason has a color");
    assert!(html.contains("info"), "an unknown outcome is drawn");
}

#[test]
fn the_page_is_self_contained_and_escapes_what_the_history_says() {
    let mut records = history(true);
    if let Some(Record::Op(op)) = records.iter_mut().find(|r| matches!(r, Record::Op(o) if o.outcome == Outcome::Info))
    {
        op.reason = Some("<img onerror=alert(1)>".into());
        op.client = "c\"<iframe>".into();
    }
    let (html, _) = page(&records);
    assert!(!html.contains("<img"), "history text is escaped");
    assert!(!html.contains("<iframe"));
    assert!(html.contains("test &lt;run&gt;"));
    for fetch in ["src=", "http:", "https:", "@import", "url("] {
        assert!(!html.contains(fetch), "the page must not fetch anything ({fetch})");
    }
}

#[test]
fn a_failover_is_a_fault_band_and_the_replication_is_in_the_summary() {
    let mut records = history(true);
    if let Record::Header(h) = &mut records[0] {
        h.replication = Some("synchronous".into());
    }
    records.push(Record::Nemesis(NemesisEvent {
        at_us: T0 + 1_200_000,
        kind: NemesisKind::Failover,
        target: "pg1".into(),
        detail: Some("pg2 promoted".into()),
    }));
    records.push(Record::Restart(RestartEvent { at_us: T0 + 2_500_000, server: "pg1".into() }));
    let (html, report) = page(&records);
    assert!(report.is_valid(), "{:?}", report.violations);
    assert_eq!(report.summary.failovers, 1);
    assert!(html.contains("failover pg1 (pg2 promoted)"), "the band's label");
    assert!(html.contains(r#"<g class="fault f-failover">"#), "the band's class");
    assert!(html.contains("<td><b>replication</b><br>synchronous</td>"), "a string, unquoted");
    assert!(html.contains("<td><b>failovers</b><br>1</td>"));
}
