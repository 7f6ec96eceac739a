//! One run of the demo as the story a newcomer follows: who held which token
//! when, the pause, each write with its token and the storage's answer, and
//! the data that survived. Read from the run's records (the history the
//! demo keeps in the campaign's format), so the page draws what happened,
//! not what the demo meant to happen.
//!
//! Invariants:
//! - every time is in microseconds since the run's header (`t0`), never
//!   negative: a record older than the header is drawn at 0;
//! - a lease is drawn from the moment its holder had the grant (the
//!   acquire's answer) for the lease's duration: the lock service counts the
//!   lease from the grant, which came no later than that;
//! - writes are numbered in the order they were sent (`start_us`), the
//!   order the page lists them in;
//! - a write's answer is the storage's: admitted (HTTP 200), refused (HTTP
//!   409 with its reason and the high-water mark it reported), or unknown
//!   (any other answer, with its error).

use fencing_chaos::history::{NemesisKind, Op, OpKind, Outcome, Phase, Record};

/// One client's lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub client: String,
    pub token: u64,
    pub from_us: u64,
    pub to_us: u64,
}

/// A client stopped (SIGSTOP) and resumed (SIGCONT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pause {
    pub client: String,
    pub from_us: u64,
    pub to_us: u64,
}

/// What the storage answered a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Applied: HTTP 200.
    Admitted,
    /// Refused: HTTP 409 with its reason and the high-water mark it reported.
    Refused { reason: String, high_water: Option<u64> },
    /// Neither (a 5xx, a timeout): the error as recorded.
    Unknown { error: String },
}

/// One write, numbered from 1 in the order it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub n: usize,
    pub client: String,
    pub token: u64,
    pub at_us: u64,
    pub answer: Answer,
    /// The bytes it carried, as text.
    pub data: String,
}

/// One run: fenced or not, drawn as one column of the page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    /// Whether the storage checked tokens.
    pub fenced: bool,
    pub file: String,
    pub leases: Vec<Lease>,
    pub pauses: Vec<Pause>,
    pub writes: Vec<Write>,
    /// The file's contents read back at the end (`None`: absent).
    pub survived: Option<String>,
    /// The last moment anything happened (a lease's end included).
    pub end_us: u64,
}

impl Story {
    /// The story of one run's records, its leases `lease_ms` long.
    pub fn of(records: &[Record], lease_ms: u64) -> Story {
        let t0 = records
            .iter()
            .find_map(|r| match r {
                Record::Header(h) => Some(h.started_us),
                _ => None,
            })
            .unwrap_or_else(|| records.iter().map(Record::time_us).min().unwrap_or(0));
        let at = |us: u64| us.saturating_sub(t0);
        let mut ops: Vec<&Op> = records
            .iter()
            .filter_map(|r| match r {
                Record::Op(op) => Some(op),
                _ => None,
            })
            .collect();
        ops.sort_by_key(|op| op.start_us);
        let leases: Vec<Lease> = ops
            .iter()
            .filter(|op| op.op == OpKind::Acquire && op.outcome == Outcome::Ok)
            .filter_map(|op| {
                let from_us = at(op.end_us.max(op.start_us));
                Some(Lease { client: op.client.clone(), token: op.token?, from_us, to_us: from_us + lease_ms * 1000 })
            })
            .collect();
        let writes: Vec<Write> = ops
            .iter()
            .filter(|op| op.op == OpKind::Write)
            .enumerate()
            .map(|(i, op)| Write {
                n: i + 1,
                client: op.client.clone(),
                token: op.token.unwrap_or(0),
                at_us: at(op.start_us),
                answer: answer(op),
                data: op.value.clone().unwrap_or_default(),
            })
            .collect();
        let last_read = ops.iter().rev().find(|op| op.op == OpKind::Read && op.phase == Some(Phase::Final));
        let file = last_read
            .or_else(|| ops.iter().find(|op| op.op == OpKind::Write))
            .and_then(|op| op.file_path.clone())
            .unwrap_or_default();
        let fenced = records.iter().any(|r| matches!(r, Record::Header(h) if h.fencing));
        let end_us = records
            .iter()
            .map(|r| match r {
                Record::Op(op) => at(op.end_us.max(op.start_us)),
                r => at(r.time_us()),
            })
            .chain(leases.iter().map(|l| l.to_us))
            .max()
            .unwrap_or(0);
        Story {
            fenced,
            file,
            pauses: pauses(records, &at, end_us),
            leases,
            writes,
            survived: last_read.and_then(|op| op.value.clone()),
            end_us,
        }
    }

    /// The write whose data survived, if the surviving data is one write's.
    pub fn survivor(&self) -> Option<&Write> {
        let survived = self.survived.as_deref()?;
        // A refused write cannot have left its data; an unknown answer may have.
        self.writes.iter().rev().find(|w| w.data == survived && !matches!(w.answer, Answer::Refused { .. }))
    }

    /// The lease with the highest token: the lock's holder at the end.
    pub fn last_holder(&self) -> Option<&Lease> {
        self.leases.iter().max_by_key(|l| l.token)
    }

    /// True when the data that survived is the last holder's.
    pub fn holder_kept_its_data(&self) -> bool {
        match (self.survivor(), self.last_holder()) {
            (Some(w), Some(l)) => w.client == l.client && w.token == l.token,
            _ => false,
        }
    }
}

/// Each pause paired with the resume of the same client (unresumed: to the end).
fn pauses(records: &[Record], at: &dyn Fn(u64) -> u64, end_us: u64) -> Vec<Pause> {
    let mut out: Vec<Pause> = Vec::new();
    for r in records {
        let Record::Nemesis(n) = r else { continue };
        match n.kind {
            NemesisKind::Pause => {
                out.push(Pause { client: n.target.clone(), from_us: at(n.at_us), to_us: end_us.max(at(n.at_us)) })
            }
            NemesisKind::Resume => {
                if let Some(p) = out.iter_mut().rev().find(|p| p.client == n.target) {
                    p.to_us = at(n.at_us).max(p.from_us);
                }
            }
            _ => {}
        }
    }
    out
}

fn answer(op: &Op) -> Answer {
    match op.outcome {
        Outcome::Ok => Answer::Admitted,
        Outcome::Fail => {
            Answer::Refused { reason: op.reason.clone().unwrap_or_else(|| "refused".into()), high_water: op.high_water }
        }
        Outcome::Info => Answer::Unknown { error: op.reason.clone().unwrap_or_else(|| "no answer".into()) },
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use fencing_api::wire::storage::Mutation;
    use fencing_chaos::client::new_op;
    use fencing_chaos::history::{Header, NemesisEvent};

    const T0: u64 = 1_700_000_000_000_000;

    fn op(client: &str, kind: OpKind, token: Option<u64>, ms: u64, outcome: Outcome) -> Op {
        Op {
            token,
            start_us: T0 + ms * 1000,
            end_us: T0 + ms * 1000 + 4000,
            outcome,
            file_path: Some("/uploads/orders.csv".into()),
            ..new_op(client, kind, "r")
        }
    }

    /// The demo's story with tokens 33 and 34: client-1 paused past its
    /// lease of 1000 ms, client-2's write, then client-1's stale one.
    pub(crate) fn run(fenced: bool) -> Vec<Record> {
        let nemesis = |ms: u64, kind| {
            Record::Nemesis(NemesisEvent { at_us: T0 + ms * 1000, kind, target: "client-1".into(), detail: None })
        };
        let write = |client: &str, token: u64, ms: u64, outcome| {
            let mut w = op(client, OpKind::Write, Some(token), ms, outcome);
            w.mutation = Some(Mutation::Put);
            w.value = Some(format!("written by {client} with token {token}\n"));
            if outcome == Outcome::Fail {
                w.reason = Some("stale_token".into());
                w.high_water = Some(34);
            }
            Record::Op(w)
        };
        let mut read = op("reader", OpKind::Read, None, 1400, Outcome::Ok);
        read.phase = Some(Phase::Final);
        read.value = Some(format!(
            "written by {} with token {}\n",
            if fenced { "client-2" } else { "client-1" },
            if fenced { 34 } else { 33 }
        ));
        vec![
            Record::Header(Header {
                seed: 0,
                fencing: fenced,
                policy: "non_decreasing".into(),
                started_us: T0,
                replication: None,
            }),
            Record::Op(op("client-1", OpKind::Acquire, Some(33), 0, Outcome::Ok)),
            nemesis(6, NemesisKind::Pause),
            Record::Op(op("client-2", OpKind::Acquire, Some(34), 1300, Outcome::Ok)),
            write("client-2", 34, 1310, Outcome::Ok),
            nemesis(1330, NemesisKind::Resume),
            write("client-1", 33, 1340, if fenced { Outcome::Fail } else { Outcome::Ok }),
            Record::Op(read),
        ]
    }

    #[test]
    fn the_fenced_run_reads_as_leases_a_pause_two_writes_and_the_holders_data() {
        let s = Story::of(&run(true), 1000);
        assert!(s.fenced);
        assert_eq!(s.file, "/uploads/orders.csv");
        assert_eq!(
            s.leases,
            [
                Lease { client: "client-1".into(), token: 33, from_us: 4_000, to_us: 1_004_000 },
                Lease { client: "client-2".into(), token: 34, from_us: 1_304_000, to_us: 2_304_000 },
            ]
        );
        assert_eq!(s.pauses, [Pause { client: "client-1".into(), from_us: 6_000, to_us: 1_330_000 }]);
        assert_eq!(s.writes.len(), 2);
        assert_eq!((s.writes[0].n, s.writes[0].client.as_str(), s.writes[0].token), (1, "client-2", 34));
        assert_eq!(s.writes[0].answer, Answer::Admitted);
        assert_eq!((s.writes[1].n, s.writes[1].token), (2, 33));
        assert_eq!(s.writes[1].answer, Answer::Refused { reason: "stale_token".into(), high_water: Some(34) });
        assert_eq!(s.survivor().map(|w| w.n), Some(1));
        assert!(s.holder_kept_its_data());
        assert_eq!(s.end_us, 2_304_000, "the axis reaches the end of client-2's lease");
    }

    #[test]
    fn the_unfenced_run_loses_the_holders_data() {
        let s = Story::of(&run(false), 1000);
        assert!(!s.fenced);
        assert_eq!(s.writes[1].answer, Answer::Admitted);
        assert_eq!(s.survivor().map(|w| (w.client.as_str(), w.token)), Some(("client-1", 33)));
        assert!(!s.holder_kept_its_data());
    }

    #[test]
    fn an_unresumed_pause_lasts_to_the_end_and_no_read_means_nothing_survived() {
        let records: Vec<Record> = run(true)
            .into_iter()
            .filter(|r| !matches!(r, Record::Nemesis(n) if n.kind == NemesisKind::Resume))
            .collect();
        let records: Vec<Record> =
            records.into_iter().filter(|r| !matches!(r, Record::Op(op) if op.op == OpKind::Read)).collect();
        let s = Story::of(&records, 1000);
        assert_eq!(s.pauses[0].to_us, s.end_us);
        assert_eq!(s.survived, None);
        assert!(s.survivor().is_none() && !s.holder_kept_its_data());
    }
}
