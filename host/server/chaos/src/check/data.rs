//! Data properties: nothing acknowledged is lost, nothing rejected is visible,
//! and the final state is the replay of admitted writes in admission order.
//!
//! The campaign uses two file shapes, told apart by their writes:
//! - an append log (every write `APPEND`s one line `client/token/sequence`):
//!   its contents are a list of write values;
//! - a register (writes `PUT` a unique value or `DELETE`): its contents are the
//!   value of one write, or absent.
//!
//! Each stored value is traced back to the write that produced it; values are
//! unique per file, which the campaign guarantees by construction.

use super::{Report, admission_key};
use crate::history::{Op, OpKind, Outcome, Phase};
use fencing_api::wire::storage::Mutation;
use std::collections::{BTreeMap, HashMap, HashSet};

struct File<'a> {
    writes: Vec<&'a Op>,
    by_value: HashMap<&'a str, &'a Op>,
    append_log: bool,
}

fn files<'a>(ops: &[&'a Op]) -> BTreeMap<(String, String), File<'a>> {
    let mut files: BTreeMap<(String, String), File<'a>> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.op == OpKind::Write) {
        let key = (op.resource.clone(), op.file_path.clone().unwrap_or_default());
        let file =
            files.entry(key).or_insert_with(|| File { writes: vec![], by_value: HashMap::new(), append_log: true });
        file.append_log &= op.mutation == Some(Mutation::Append);
        if let Some(v) = op.value.as_deref() {
            file.by_value.insert(v.trim_end_matches('\n'), op);
        }
        file.writes.push(op);
    }
    files
}

fn describe(op: &Op) -> String {
    format!(
        "{} {:?} token {} seq {} ({:?})",
        op.client,
        op.mutation.unwrap_or(Mutation::Put),
        op.token.unwrap_or(0),
        op.sequence.unwrap_or(0),
        op.outcome
    )
}

/// Traces each line of an append log to its write; reports unknown and rejected lines.
fn trace_lines<'a>(file: &File<'a>, read: &Op, resource: &str, report: Option<&mut Report>) -> Vec<(&'a Op, String)> {
    let mut traced = vec![];
    let mut problems = vec![];
    for line in read.value.as_deref().unwrap_or("").lines().filter(|l| !l.is_empty()) {
        match file.by_value.get(line) {
            None => problems.push(("unknown_data", None, format!("line {line:?} was written by no write"))),
            Some(w) if w.outcome == Outcome::Fail => {
                problems.push(("rejected_write_visible", Some(*w), format!("rejected write {} is stored", describe(w))))
            }
            Some(w) => traced.push((*w, line.to_string())),
        }
    }
    if let Some(report) = report {
        for (kind, write, msg) in problems {
            let evidence: Vec<&Op> = write.into_iter().chain([read]).collect();
            report.violate(
                kind,
                resource,
                &evidence,
                format!("{msg} (read by {} at {}us)", read.client, read.start_us),
            );
        }
    }
    traced
}

fn reads<'a>(ops: &[&'a Op]) -> impl Iterator<Item = &'a Op> {
    ops.iter().copied().filter(|op| op.op == OpKind::Read && op.outcome == Outcome::Ok)
}

/// Every read sees all writes acknowledged before it was sent, and no rejected or unknown data.
pub fn check_reads(ops: &[&Op], fencing: bool, report: &mut Report) {
    let files = files(ops);
    for read in reads(ops) {
        let resource = read.resource.as_str();
        if fencing && let Some(high_water) = read.high_water {
            let acked = ops
                .iter()
                .filter(|w| w.op == OpKind::Write && w.resource == read.resource)
                .filter(|w| w.outcome == Outcome::Ok && w.end_us < read.start_us)
                .max_by_key(|w| w.token);
            if let Some(w) = acked.filter(|w| w.token.unwrap_or(0) > high_water) {
                report.violate(
                    "high_water_regressed",
                    resource,
                    &[w, read],
                    format!(
                        "read at {}us shows high-water {high_water} below acknowledged {}",
                        read.start_us,
                        describe(w)
                    ),
                );
            }
        }
        let Some(file) = files.get(&(read.resource.clone(), read.file_path.clone().unwrap_or_default())) else {
            continue;
        };
        let before = file.writes.iter().filter(|w| w.outcome == Outcome::Ok && w.end_us < read.start_us);
        if file.append_log {
            let present: HashSet<String> =
                trace_lines(file, read, resource, Some(report)).into_iter().map(|(_, l)| l).collect();
            for w in before {
                if !present.contains(w.value.as_deref().unwrap_or("").trim_end_matches('\n')) {
                    report.violate(
                        "lost_write",
                        resource,
                        &[w, read],
                        format!("acknowledged {} missing from read at {}us", describe(w), read.start_us),
                    );
                }
            }
            continue;
        }
        let last = before.max_by_key(|w| (admission_key(w), w.start_us));
        match (&read.value, last) {
            (Some(v), last) => match file.by_value.get(v.trim_end_matches('\n')) {
                None => {
                    report.violate("unknown_data", resource, &[read], format!("value {v:?} was written by no write"))
                }
                Some(w) if w.outcome == Outcome::Fail => report.violate(
                    "rejected_write_visible",
                    resource,
                    &[w, read],
                    format!("rejected write {} is stored", describe(w)),
                ),
                Some(w) => {
                    if let Some(last) = last.filter(|l| admission_key(w) < admission_key(l)) {
                        report.violate(
                            "lost_write",
                            resource,
                            &[last, w, read],
                            format!(
                                "read at {}us shows {} over acknowledged {}",
                                read.start_us,
                                describe(w),
                                describe(last)
                            ),
                        );
                    }
                }
            },
            (None, Some(last)) if last.mutation != Some(Mutation::Delete) => {
                let deleted_later = file.writes.iter().any(|d| {
                    d.mutation == Some(Mutation::Delete)
                        && d.outcome != Outcome::Fail
                        && admission_key(d) >= admission_key(last)
                        && d.start_us < read.end_us
                });
                if !deleted_later {
                    report.violate(
                        "lost_write",
                        resource,
                        &[last, read],
                        format!("read at {}us finds nothing after acknowledged {}", read.start_us, describe(last)),
                    );
                }
            }
            (None, _) => {}
        }
    }
}

/// The final reads equal the replay of admitted writes in `(token, sequence)` order.
pub fn check_final(ops: &[&Op], report: &mut Report) {
    let files = files(ops);
    let mut finals: BTreeMap<(String, String), &Op> = BTreeMap::new();
    for read in reads(ops).filter(|r| r.phase == Some(Phase::Final)) {
        let key = (read.resource.clone(), read.file_path.clone().unwrap_or_default());
        if finals.get(&key).is_none_or(|r| r.start_us < read.start_us) {
            finals.insert(key, read);
        }
    }
    for (key, read) in finals {
        let Some(file) = files.get(&key) else { continue };
        let resource = key.0.as_str();
        if file.append_log {
            let traced = trace_lines(file, read, resource, None);
            for pair in traced.windows(2) {
                let ((a, _), (b, _)) = (&pair[0], &pair[1]);
                if admission_key(b) <= admission_key(a) {
                    report.violate(
                        "final_state_mismatch",
                        resource,
                        &[*a, *b, read],
                        format!("{}: {} stored after {}, not in admission order", key.1, describe(b), describe(a)),
                    );
                }
            }
            continue;
        }
        let mut replay: Vec<&Op> = file.writes.iter().copied().filter(|w| w.outcome != Outcome::Fail).collect();
        replay.sort_by_key(|w| (admission_key(w), w.start_us));
        let last_ok = replay.iter().rposition(|w| w.outcome == Outcome::Ok);
        // The last admitted write, or any later write of unknown outcome, may be the final state.
        let mut allowed: Vec<Option<&str>> = replay[last_ok.unwrap_or(0)..].iter().map(|w| outcome_value(w)).collect();
        if last_ok.is_none() {
            allowed.push(None);
        }
        if !allowed.contains(&read.value.as_deref()) {
            let expected = last_ok.map(|i| describe(replay[i])).unwrap_or_else(|| "absent".into());
            let evidence: Vec<&Op> = last_ok.map(|i| replay[i]).into_iter().chain([read]).collect();
            report.violate(
                "final_state_mismatch",
                resource,
                &evidence,
                format!("{}: final value {:?}, replay gives {expected}", key.1, read.value),
            );
        }
    }
}

fn outcome_value(w: &Op) -> Option<&str> {
    match w.mutation {
        Some(Mutation::Delete) => None,
        _ => w.value.as_deref(),
    }
}
