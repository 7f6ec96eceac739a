//! The history checker: decides from a recorded history alone whether the
//! system kept fencing's promise. It knows nothing of the servers' code.
//!
//! Properties checked (each violation names its kind):
//! - **Admission order** ([`order`]): for two admitted writes to one resource
//!   where the first was acknowledged before the second was sent, the second's
//!   token is not below the first's (`stale_admitted`); under the strict policy
//!   it is not equal either (`token_reused`); with equal tokens, its sequence
//!   is greater (`sequence_regressed`).
//! - **Lock tokens** ([`order`]): no two granted acquisitions of a lock carry the
//!   same token (`duplicate_lock_token`), and an acquisition that began after
//!   another was granted carries a greater token (`lock_token_regressed`), across
//!   lock-service restarts.
//! - **Durability** ([`data`]): every read (in particular the ones the campaign
//!   makes after each restart and at the end) sees every write acknowledged
//!   before the read was sent (`lost_write`), never a rejected write
//!   (`rejected_write_visible`) nor bytes no write produced (`unknown_data`),
//!   and a fence high-water mark not below an acknowledged token (`high_water_regressed`).
//! - **Grants** ([`grants`]): every admitted write carries a token its writer
//!   was granted for that lock (`forged_token_admitted`): what a client that
//!   makes up tokens (the campaign's forger) gets through without signed tokens.
//! - **Final state** ([`data`]): the data read at the end equals replaying the
//!   admitted writes in admission order; writes with unknown outcome may or may
//!   not be included (`final_state_mismatch`).
//!
//! Admission order is the order of `(token, sequence)`: it is the only order a
//! correct fence admits, so a stored state that needs another order is evidence
//! of a violation. Data is identified by value: the campaign writes unique values
//! (`client/token/sequence`), appended to `log` files as lines and put to `value` files.
//!
//! Real-time comparisons only use pairs separated in time (one's `end_us` before
//! the other's `start_us`), so concurrent requests are never misjudged.

pub mod data;
pub mod grants;
pub mod order;

use super::history::{NemesisKind, Op, OpKind, Outcome, Record, is_database};
use serde::Serialize;
use std::collections::BTreeMap;

/// How many violations of one kind are described in full; the rest are counted.
pub const EXAMPLES_PER_KIND: usize = 20;

/// One broken property, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub kind: &'static str,
    pub resource: String,
    pub message: String,
    /// The operations that are the evidence, so a report can point at them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ops: Vec<OpRef>,
}

/// Names one operation of a history: a client's request that began at `start_us`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct OpRef {
    pub client: String,
    pub start_us: u64,
}

impl OpRef {
    pub fn of(op: &Op) -> OpRef {
        OpRef { client: op.client.clone(), start_us: op.start_us }
    }
}

/// The one-line summary printed last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub operations: u64,
    pub writes: u64,
    pub admitted: u64,
    pub rejected: BTreeMap<String, u64>,
    pub indeterminate: u64,
    pub acquisitions: u64,
    pub reads_checked: u64,
    pub pauses: u64,
    pub kills: u64,
    pub restarts: u64,
    pub proxy_faults: u64,
    /// Network partitions made (distributed campaign).
    pub partitions: u64,
    /// Faults healed: partitions removed, proxies forwarding faithfully again.
    pub heals: u64,
    /// Kills of the member that was the etcd leader at the time.
    pub leader_kills: u64,
    /// Restarts of a database node after a kill or a failover.
    pub database_restarts: u64,
    /// Database primaries killed and their standbys promoted.
    pub failovers: u64,
    /// The database's replication (distributed campaign): `none`, `synchronous`, `asynchronous`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication: Option<String>,
    pub violations: u64,
    pub violation_kinds: BTreeMap<String, u64>,
}

/// The checker's verdict.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub summary: Summary,
    /// Up to [`EXAMPLES_PER_KIND`] violations of each kind.
    pub violations: Vec<Violation>,
}

impl Report {
    /// True when no property was broken.
    pub fn is_valid(&self) -> bool {
        self.summary.violations == 0
    }

    /// Records a violation, keeping its description if its kind has room.
    pub fn violate(&mut self, kind: &'static str, resource: &str, evidence: &[&Op], message: String) {
        let count = self.summary.violation_kinds.entry(kind.to_string()).or_insert(0);
        *count += 1;
        self.summary.violations += 1;
        if *count as usize <= EXAMPLES_PER_KIND {
            let ops = evidence.iter().map(|op| OpRef::of(op)).collect();
            self.violations.push(Violation { kind, resource: resource.to_string(), message, ops });
        }
    }
}

/// Checks a history. The records may be in any order.
pub fn check(records: &[Record]) -> Report {
    let mut report = Report::default();
    let strict = records.iter().any(|r| matches!(r, Record::Header(h) if h.policy == "strictly_increasing"));
    let fencing = !records.iter().any(|r| matches!(r, Record::Header(h) if !h.fencing));
    let ops: Vec<&Op> = records
        .iter()
        .filter_map(|r| match r {
            Record::Op(op) => Some(op),
            _ => None,
        })
        .collect();
    count(records, &ops, &mut report.summary);
    order::check_writes(&ops, strict, &mut report);
    order::check_lock_tokens(&ops, &mut report);
    grants::check_grants(&ops, &mut report);
    data::check_reads(&ops, fencing, &mut report);
    data::check_final(&ops, &mut report);
    report
}

fn count(records: &[Record], ops: &[&Op], s: &mut Summary) {
    s.operations = ops.len() as u64;
    for op in ops {
        match (op.op, op.outcome) {
            (OpKind::Write, outcome) => {
                s.writes += 1;
                match outcome {
                    Outcome::Ok => s.admitted += 1,
                    Outcome::Fail => {
                        *s.rejected.entry(op.reason.clone().unwrap_or_else(|| "unknown".into())).or_insert(0) += 1
                    }
                    Outcome::Info => s.indeterminate += 1,
                }
            }
            (OpKind::Acquire, Outcome::Ok) => s.acquisitions += 1,
            (OpKind::Read, Outcome::Ok) => s.reads_checked += 1,
            _ => {}
        }
    }
    for r in records {
        match r {
            Record::Nemesis(n) => match n.kind {
                NemesisKind::Pause => s.pauses += 1,
                NemesisKind::Kill => {
                    s.kills += 1;
                    s.leader_kills += u64::from(n.detail.as_deref() == Some("leader"));
                }
                NemesisKind::Delay | NemesisKind::Drop => s.proxy_faults += 1,
                NemesisKind::Partition => s.partitions += 1,
                NemesisKind::Heal => s.heals += 1,
                NemesisKind::Failover => s.failovers += 1,
                NemesisKind::Resume => {}
            },
            Record::Restart(r) => {
                s.restarts += 1;
                s.database_restarts += u64::from(is_database(&r.server));
            }
            Record::Header(h) if h.replication.is_some() => s.replication = h.replication.clone(),
            _ => {}
        }
    }
}

/// A write's position in admission order: `(token, sequence or 0)`.
pub fn admission_key(op: &Op) -> (u64, u64) {
    (op.token.unwrap_or(0), op.sequence.unwrap_or(0))
}
