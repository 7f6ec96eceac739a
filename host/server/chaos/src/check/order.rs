//! Order properties: admitted writes never go below an admitted token, and
//! lock tokens strictly increase per lock.
//!
//! Both use one sweep per resource: operations sorted by start time, and for
//! each one the maximum key among operations acknowledged (ended) before it
//! started. Only such real-time-separated pairs are compared, so overlapping
//! requests, whose order the servers may pick freely, are never judged.

use super::{Report, admission_key};
use crate::history::{Op, OpKind, Outcome};
use std::collections::{BTreeMap, HashMap};

/// Groups the `ok` operations of one kind by resource (or lock).
fn acknowledged<'a>(ops: &[&'a Op], kind: OpKind, by_lock: bool) -> BTreeMap<String, Vec<&'a Op>> {
    let mut groups: BTreeMap<String, Vec<&Op>> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.op == kind && op.outcome == Outcome::Ok && op.token.is_some()) {
        let key = if by_lock { op.lock.clone().unwrap_or_else(|| op.resource.clone()) } else { op.resource.clone() };
        groups.entry(key).or_default().push(op);
    }
    groups
}

/// Calls `judge(op, max)` for each op with the op of greatest `key` among those that ended before it started.
fn sweep<'a, K: Ord + Copy>(
    group: &[&'a Op],
    key: impl Fn(&Op) -> K,
    mut judge: impl FnMut(&'a Op, Option<(K, &'a Op)>),
) {
    let mut by_start = group.to_vec();
    by_start.sort_by_key(|op| (op.start_us, op.end_us));
    let mut by_end = group.to_vec();
    by_end.sort_by_key(|op| op.end_us);
    let mut next = 0;
    let mut max: Option<(K, &Op)> = None;
    for op in by_start {
        while next < by_end.len() && by_end[next].end_us < op.start_us {
            let done = by_end[next];
            if max.is_none_or(|(k, _)| key(done) > k) {
                max = Some((key(done), done));
            }
            next += 1;
        }
        judge(op, max);
    }
}

fn describe(op: &Op) -> String {
    let seq = op.sequence.map(|s| format!(" seq {s}")).unwrap_or_default();
    format!("{} token {}{} [{}..{}us]", op.client, op.token.unwrap_or(0), seq, op.start_us, op.end_us)
}

/// Admitted writes: no token below (strict: or equal to) one already admitted; sequences advance within a token.
pub fn check_writes(ops: &[&Op], strict: bool, report: &mut Report) {
    for (resource, group) in acknowledged(ops, OpKind::Write, false) {
        sweep(&group, admission_key, |op, max| {
            let Some(((high, last_seq), prev)) = max else { return };
            let (token, seq) = admission_key(op);
            if token < high {
                report.violate(
                    "stale_admitted",
                    &resource,
                    &[prev, op],
                    format!("write by {} admitted after write by {} was acknowledged", describe(op), describe(prev)),
                );
            } else if token == high && strict {
                report.violate(
                    "token_reused",
                    &resource,
                    &[prev, op],
                    format!("strict policy: {} admitted after {}", describe(op), describe(prev)),
                );
            } else if token == high && op.sequence.is_some() && prev.sequence.is_some() && seq <= last_seq {
                report.violate(
                    "sequence_regressed",
                    &resource,
                    &[prev, op],
                    format!("{} admitted after {} was acknowledged", describe(op), describe(prev)),
                );
            }
        });
    }
}

/// Granted lock tokens: unique per lock, and increasing in real time, across restarts.
pub fn check_lock_tokens(ops: &[&Op], report: &mut Report) {
    for (lock, group) in acknowledged(ops, OpKind::Acquire, true) {
        let mut seen: HashMap<u64, &Op> = HashMap::new();
        for op in &group {
            let token = op.token.unwrap_or(0);
            if let Some(first) = seen.insert(token, op) {
                report.violate(
                    "duplicate_lock_token",
                    &lock,
                    &[first, op],
                    format!("token {token} granted to {} and to {}", describe(first), describe(op)),
                );
            }
        }
        sweep(
            &group,
            |op| op.token.unwrap_or(0),
            |op, max| {
                if let Some((high, prev)) = max
                    && op.token.unwrap_or(0) <= high
                {
                    report.violate(
                        "lock_token_regressed",
                        &lock,
                        &[prev, op],
                        format!("{} granted after {} was granted", describe(op), describe(prev)),
                    );
                }
            },
        );
    }
}
