//! The history checker is itself tested: a clean history passes, and each
//! doctored history (a stale write marked admitted, a lost acknowledged write,
//! a non-monotonic lock token, a wrong final state, ...) is reported with the
//! violation kind that names it.

use fencing_api::wire::storage::Mutation;
use fencing_chaos::check::{Report, check};
use fencing_chaos::history::{
    Header, NemesisEvent, NemesisKind, Op, OpKind, Outcome, Phase, Record, RestartEvent, parse_lines,
};

fn op(client: &str, kind: OpKind, start: u64, end: u64, outcome: Outcome) -> Op {
    Op {
        client: client.into(),
        op: kind,
        resource: "r".into(),
        lock: Some("r".into()),
        token: None,
        sequence: None,
        lock_token: None,
        file_path: None,
        mutation: None,
        value: None,
        phase: None,
        start_us: start,
        end_us: end,
        outcome,
        reason: None,
        high_water: None,
    }
}

fn acquire(client: &str, token: u64, start: u64, end: u64) -> Record {
    let mut o = op(client, OpKind::Acquire, start, end, Outcome::Ok);
    o.token = Some(token);
    o.lock_token = Some(format!("lease-{client}-{token}"));
    Record::Op(o)
}

fn append(client: &str, token: u64, seq: u64, start: u64, end: u64, outcome: Outcome) -> Record {
    let mut o = op(client, OpKind::Write, start, end, outcome);
    o.token = Some(token);
    o.sequence = Some(seq);
    o.file_path = Some("log".into());
    o.mutation = Some(Mutation::Append);
    o.value = Some(format!("{client}/{token}/{seq}\n"));
    if outcome == Outcome::Fail {
        o.reason = Some("stale_token".into());
    } else {
        o.high_water = Some(token);
    }
    Record::Op(o)
}

fn put(client: &str, token: u64, seq: u64, start: u64, end: u64, outcome: Outcome) -> Record {
    let mut o = op(client, OpKind::Write, start, end, outcome);
    o.token = Some(token);
    o.sequence = Some(seq);
    o.file_path = Some("value".into());
    o.mutation = Some(Mutation::Put);
    o.value = Some(format!("{client}/{token}/{seq}"));
    if outcome == Outcome::Fail {
        o.reason = Some("stale_token".into());
    }
    Record::Op(o)
}

fn read(file: &str, value: Option<&str>, start: u64, phase: Phase, high_water: Option<u64>) -> Record {
    let mut o = op("campaign", OpKind::Read, start, start + 5, Outcome::Ok);
    o.file_path = Some(file.into());
    o.value = value.map(str::to_string);
    o.phase = Some(phase);
    o.high_water = high_water;
    Record::Op(o)
}

fn header(policy: &str) -> Record {
    Record::Header(Header { seed: 7, fencing: true, policy: policy.into(), started_us: 0, replication: None })
}

/// The GC-pause story, fenced correctly: c1 (token 1) is paused, c2 (token 2)
/// writes, c1's late write is rejected; the storage restarts and keeps everything.
fn clean() -> Vec<Record> {
    vec![
        header("non_decreasing"),
        acquire("c1", 1, 0, 10),
        append("c1", 1, 1, 20, 30, Outcome::Ok),
        put("c1", 1, 2, 40, 50, Outcome::Ok),
        Record::Nemesis(NemesisEvent { at_us: 55, kind: NemesisKind::Pause, target: "c1".into(), detail: None }),
        acquire("c2", 2, 100, 110),
        append("c2", 2, 1, 120, 130, Outcome::Ok),
        put("c2", 2, 2, 140, 150, Outcome::Ok),
        Record::Nemesis(NemesisEvent { at_us: 160, kind: NemesisKind::Resume, target: "c1".into(), detail: None }),
        append("c1", 1, 3, 170, 180, Outcome::Fail),
        put("c1", 1, 4, 185, 190, Outcome::Fail),
        append("c2", 2, 3, 200, 260, Outcome::Info),
        Record::Nemesis(NemesisEvent { at_us: 210, kind: NemesisKind::Kill, target: "storage".into(), detail: None }),
        Record::Restart(RestartEvent { at_us: 300, server: "storage".into() }),
        read("log", Some("c1/1/1\nc2/2/1\n"), 310, Phase::AfterRestart, Some(2)),
        read("value", Some("c2/2/2"), 310, Phase::AfterRestart, Some(2)),
        acquire("c1", 3, 400, 410),
        append("c1", 3, 1, 420, 430, Outcome::Ok),
        read("log", Some("c1/1/1\nc2/2/1\nc1/3/1\n"), 500, Phase::Final, Some(3)),
        read("value", Some("c2/2/2"), 500, Phase::Final, Some(3)),
    ]
}

fn kinds(report: &Report) -> Vec<&'static str> {
    report.violations.iter().map(|v| v.kind).collect()
}

#[test]
fn a_clean_history_passes_and_is_counted() {
    let report = check(&clean());
    assert!(report.is_valid(), "{:?}", report.violations);
    let s = &report.summary;
    assert_eq!((s.writes, s.admitted, s.indeterminate), (8, 5, 1));
    assert_eq!(s.rejected.get("stale_token"), Some(&2));
    assert_eq!((s.pauses, s.kills, s.restarts, s.acquisitions), (1, 1, 1, 3));
}

#[test]
fn an_indeterminate_write_may_or_may_not_be_stored() {
    let mut h = clean();
    let last = h.len() - 2;
    h[last] = read("log", Some("c1/1/1\nc2/2/1\nc2/2/3\nc1/3/1\n"), 500, Phase::Final, Some(3));
    assert!(check(&h).is_valid(), "{:?}", check(&h).violations);
}

#[test]
fn a_stale_write_marked_admitted_is_reported() {
    let mut h = clean();
    // c1's late write with token 1 (after token 2 was acknowledged) got through.
    h[9] = append("c1", 1, 3, 170, 180, Outcome::Ok);
    let h: Vec<Record> = h
        .into_iter()
        .map(|r| match r {
            Record::Op(mut o) if o.op == OpKind::Read && o.file_path.as_deref() == Some("log") => {
                let v = o.value.take().unwrap().replace("c2/2/1\n", "c2/2/1\nc1/1/3\n");
                o.value = Some(v);
                Record::Op(o)
            }
            r => r,
        })
        .collect();
    let report = check(&h);
    assert!(kinds(&report).contains(&"stale_admitted"), "{:?}", report.violations);
    assert!(kinds(&report).contains(&"final_state_mismatch"), "{:?}", report.violations);
}

#[test]
fn a_lost_acknowledged_write_is_reported() {
    let mut h = clean();
    // After the restart, c2's acknowledged append is gone.
    h[14] = read("log", Some("c1/1/1\n"), 310, Phase::AfterRestart, Some(2));
    let report = check(&h);
    assert_eq!(kinds(&report), vec!["lost_write"], "{:?}", report.violations);
    assert!(report.violations[0].message.contains("c2"));
}

#[test]
fn a_register_rolled_back_to_an_older_value_is_a_lost_write() {
    let mut h = clean();
    h[15] = read("value", Some("c1/1/2"), 310, Phase::AfterRestart, Some(2));
    assert_eq!(kinds(&check(&h)), vec!["lost_write"]);
    h[15] = read("value", None, 310, Phase::AfterRestart, Some(2));
    assert_eq!(kinds(&check(&h)), vec!["lost_write"]);
}

#[test]
fn a_non_monotonic_lock_token_is_reported() {
    let mut h = clean();
    // After a lock-service restart, token 2 is handed out again.
    h[16] = acquire("c1", 2, 400, 410);
    let report = check(&h);
    assert!(kinds(&report).contains(&"lock_token_regressed"), "{:?}", report.violations);
    assert!(kinds(&report).contains(&"duplicate_lock_token"), "{:?}", report.violations);
}

#[test]
fn a_wrong_final_state_is_reported() {
    let mut h = clean();
    let last = h.len() - 1;
    // The final value is c1's first put, though c2's later put was admitted.
    h[last] = read("value", Some("c1/1/2"), 500, Phase::Final, Some(3));
    let report = check(&h);
    assert!(kinds(&report).contains(&"final_state_mismatch"), "{:?}", report.violations);
    // A log whose lines are out of admission order.
    let mut h = clean();
    h[last - 1] = read("log", Some("c2/2/1\nc1/1/1\nc1/3/1\n"), 500, Phase::Final, Some(3));
    assert_eq!(kinds(&check(&h)), vec!["final_state_mismatch"]);
}

#[test]
fn rejected_and_unknown_data_in_storage_are_reported() {
    let mut h = clean();
    let last = h.len() - 1;
    h[last] = read("value", Some("c1/1/4"), 500, Phase::Final, Some(3));
    assert!(kinds(&check(&h)).contains(&"rejected_write_visible"));
    h[last] = read("value", Some("garbage"), 500, Phase::Final, Some(3));
    assert!(kinds(&check(&h)).contains(&"unknown_data"));
}

#[test]
fn a_regressed_high_water_is_reported() {
    let mut h = clean();
    h[14] = read("log", Some("c1/1/1\nc2/2/1\n"), 310, Phase::AfterRestart, Some(1));
    assert_eq!(kinds(&check(&h)), vec!["high_water_regressed"]);
}

#[test]
fn sequences_within_a_token_never_regress() {
    let mut h = clean();
    h.push(append("c1", 3, 1, 440, 450, Outcome::Ok));
    assert!(kinds(&check(&h)).contains(&"sequence_regressed"));
}

#[test]
fn the_strict_policy_rejects_equal_tokens() {
    let mut h = clean();
    assert!(check(&h).is_valid());
    h[0] = header("strictly_increasing");
    assert!(kinds(&check(&h)).contains(&"token_reused"));
}

#[test]
fn concurrent_writes_are_not_judged_by_arrival() {
    // Token 1's write overlaps token 2's: the fence may have admitted it first.
    let h = vec![
        header("non_decreasing"),
        acquire("c1", 1, 0, 0),
        acquire("c2", 2, 0, 5),
        append("c1", 1, 1, 0, 100, Outcome::Ok),
        append("c2", 2, 1, 10, 20, Outcome::Ok),
        read("log", Some("c1/1/1\nc2/2/1\n"), 200, Phase::Final, Some(2)),
    ];
    assert!(check(&h).is_valid(), "{:?}", check(&h).violations);
}

#[test]
fn a_write_under_a_token_its_writer_was_never_granted_is_forged() {
    let mut h = clean();
    assert!(check(&h).is_valid());
    // A forger writes above every granted token and is refused: nothing to report.
    h.push(append("forger", 99, 0, 500, 510, Outcome::Fail));
    assert!(check(&h).is_valid(), "{:?}", check(&h).violations);
    // Admitted, it is: the storage took a token the lock service never gave it.
    let last = h.len() - 1;
    h[last] = append("forger", 99, 0, 500, 510, Outcome::Ok);
    assert!(kinds(&check(&h)).contains(&"forged_token_admitted"), "{:?}", check(&h).violations);
    // A client's own granted token under another client's name is forged too.
    let mut h = clean();
    h.push(append("c9", 1, 5, 900, 910, Outcome::Ok));
    assert!(kinds(&check(&h)).contains(&"forged_token_admitted"));
}

#[test]
fn histories_round_trip_through_json_lines() {
    let lines: Vec<String> = clean().iter().map(|r| serde_json::to_string(r).unwrap()).collect();
    let mut with_torn_tail = lines.clone();
    with_torn_tail.push("{\"type\":\"op\",\"cli".into());
    assert_eq!(parse_lines(&with_torn_tail).unwrap(), clean());
    let mut corrupt = lines;
    corrupt.insert(3, "not json".into());
    assert!(parse_lines(&corrupt).is_err());
}

/// What an asynchronous standby can do at a failover: c2's acknowledged
/// write (and the fence it raised to 2) never reached the standby, so the
/// promoted database admits paused c1's token-1 write, and the read-back
/// misses c2's data. The summary counts the failover and names the replication.
#[test]
fn a_failover_that_lost_an_acknowledged_fence_is_reported_twice() {
    let mut header = header("non_decreasing");
    if let Record::Header(h) = &mut header {
        h.replication = Some("asynchronous".into());
    }
    let nemesis = |at_us, kind, target: &str, detail: Option<&str>| {
        Record::Nemesis(NemesisEvent { at_us, kind, target: target.into(), detail: detail.map(str::to_string) })
    };
    let h = vec![
        header,
        acquire("c1", 1, 0, 10),
        append("c1", 1, 1, 20, 30, Outcome::Ok),
        nemesis(35, NemesisKind::Pause, "c1", None),
        acquire("c2", 2, 100, 110),
        append("c2", 2, 1, 120, 130, Outcome::Ok),
        nemesis(135, NemesisKind::Failover, "pg1", Some("pg2 promoted")),
        nemesis(150, NemesisKind::Resume, "c1", None),
        append("c1", 1, 3, 170, 180, Outcome::Ok),
        Record::Restart(RestartEvent { at_us: 300, server: "pg1".into() }),
        read("log", Some("c1/1/1\nc1/1/3\n"), 310, Phase::AfterRestart, Some(1)),
    ];
    let report = check(&h);
    assert!(kinds(&report).contains(&"stale_admitted"), "{:?}", report.violations);
    assert!(kinds(&report).contains(&"lost_write"), "{:?}", report.violations);
    let s = &report.summary;
    assert_eq!((s.failovers, s.database_restarts, s.restarts), (1, 1, 1));
    assert_eq!(s.replication.as_deref(), Some("asynchronous"));
}
