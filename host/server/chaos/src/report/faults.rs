//! Fault windows: the nemesis records a fault and, later, its heal as separate
//! events; a report draws the interval between them. A pause ends at the
//! target's resume, a proxy fault or a partition at its heal, a kill at the
//! killed server's restart, a failover at the old primary's restart as a standby. A fault never healed (a history cut short) lasts to the
//! end of the run.

use crate::history::{NemesisKind, Record};

/// One fault, from injection to heal, in microseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    pub kind: NemesisKind,
    pub target: String,
    pub detail: Option<String>,
    pub start_us: u64,
    pub end_us: u64,
    /// False when the history holds no heal for it.
    pub healed: bool,
}

impl Window {
    /// A short label, for example `pause c3 (900ms)` or `kill storage`.
    pub fn label(&self) -> String {
        let kind = match self.kind {
            NemesisKind::Pause => "pause",
            NemesisKind::Kill => "kill",
            NemesisKind::Delay => "delay",
            NemesisKind::Drop => "drop",
            NemesisKind::Resume => "resume",
            NemesisKind::Heal => "heal",
            NemesisKind::Partition => "partition",
            NemesisKind::Failover => "failover",
        };
        match &self.detail {
            Some(d) => format!("{kind} {} ({d})", self.target),
            None => format!("{kind} {}", self.target),
        }
    }

    /// The CSS class the report colors this kind of fault with.
    pub fn class(&self) -> &'static str {
        match self.kind {
            NemesisKind::Pause | NemesisKind::Resume => "f-pause",
            NemesisKind::Kill => "f-kill",
            NemesisKind::Failover => "f-failover",
            NemesisKind::Delay | NemesisKind::Drop | NemesisKind::Heal | NemesisKind::Partition => "f-net",
        }
    }
}

/// Pairs every fault with the event that ends it; `end_us` closes the ones never healed.
pub fn windows(records: &[Record], end_us: u64) -> Vec<Window> {
    let mut events: Vec<&Record> =
        records.iter().filter(|r| matches!(r, Record::Nemesis(_) | Record::Restart(_))).collect();
    events.sort_by_key(|r| r.time_us());
    let mut open: Vec<Window> = vec![];
    let mut closed: Vec<Window> = vec![];
    let mut close = |open: &mut Vec<Window>, target: &str, ends: &[NemesisKind], at: u64| {
        if let Some(i) = open.iter().position(|w| w.target == target && ends.contains(&w.kind)) {
            let mut w = open.remove(i);
            w.end_us = at.max(w.start_us);
            w.healed = true;
            closed.push(w);
        }
    };
    for r in events {
        match r {
            Record::Nemesis(n) => match n.kind {
                NemesisKind::Resume => close(&mut open, &n.target, &[NemesisKind::Pause], n.at_us),
                // A heal of the net removes every partition in place at once.
                NemesisKind::Heal => loop {
                    let ends = [NemesisKind::Delay, NemesisKind::Drop, NemesisKind::Partition];
                    close(&mut open, &n.target, &ends, n.at_us);
                    if !open.iter().any(|w| w.target == n.target && w.kind == NemesisKind::Partition) {
                        break;
                    }
                },
                kind => open.push(Window {
                    kind,
                    target: n.target.clone(),
                    detail: n.detail.clone(),
                    start_us: n.at_us,
                    end_us: n.at_us,
                    healed: false,
                }),
            },
            Record::Restart(r) => close(&mut open, &r.server, &[NemesisKind::Kill, NemesisKind::Failover], r.at_us),
            _ => {}
        }
    }
    for mut w in open {
        w.end_us = end_us.max(w.start_us);
        closed.push(w);
    }
    closed.sort_by_key(|w| (w.start_us, w.end_us));
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{NemesisEvent, RestartEvent};

    fn nemesis(at_us: u64, kind: NemesisKind, target: &str) -> Record {
        Record::Nemesis(NemesisEvent { at_us, kind, target: target.into(), detail: None })
    }

    #[test]
    fn faults_pair_with_their_heals_and_unhealed_ones_run_to_the_end() {
        let records = vec![
            nemesis(10, NemesisKind::Pause, "c1"),
            nemesis(12, NemesisKind::Kill, "storage"),
            nemesis(15, NemesisKind::Delay, "locks"),
            nemesis(20, NemesisKind::Resume, "c1"),
            Record::Restart(RestartEvent { at_us: 30, server: "storage".into() }),
            nemesis(40, NemesisKind::Pause, "c2"),
            // A heal of something never faulted is ignored.
            nemesis(41, NemesisKind::Heal, "storage"),
        ];
        let w = windows(&records, 100);
        let spans: Vec<(&str, u64, u64, bool)> =
            w.iter().map(|w| (w.target.as_str(), w.start_us, w.end_us, w.healed)).collect();
        assert_eq!(
            spans,
            vec![("c1", 10, 20, true), ("storage", 12, 30, true), ("locks", 15, 100, false), ("c2", 40, 100, false)]
        );
        assert_eq!(w[1].label(), "kill storage");
        assert_eq!(w[0].class(), "f-pause");
    }

    #[test]
    fn a_heal_of_the_net_ends_every_partition_and_a_restart_ends_a_member_kill() {
        let records = vec![
            nemesis(10, NemesisKind::Partition, "net"),
            nemesis(12, NemesisKind::Partition, "net"),
            nemesis(14, NemesisKind::Kill, "e2"),
            nemesis(20, NemesisKind::Heal, "net"),
            Record::Restart(RestartEvent { at_us: 25, server: "e2".into() }),
            nemesis(30, NemesisKind::Partition, "net"),
        ];
        let w = windows(&records, 100);
        let spans: Vec<(&str, u64, u64)> = w.iter().map(|w| (w.target.as_str(), w.start_us, w.end_us)).collect();
        assert_eq!(spans, vec![("net", 10, 20), ("net", 12, 20), ("e2", 14, 25), ("net", 30, 100)]);
        assert_eq!(w[0].class(), "f-net");
        assert_eq!(w[0].label(), "partition net");
    }

    #[test]
    fn a_failover_lasts_until_the_old_primary_serves_again_as_the_standby() {
        let mut failover = nemesis(10, NemesisKind::Failover, "pg1");
        if let Record::Nemesis(n) = &mut failover {
            n.detail = Some("pg2 promoted".into());
        }
        let records = vec![
            failover,
            nemesis(12, NemesisKind::Kill, "pg2"),
            Record::Restart(RestartEvent { at_us: 15, server: "pg2".into() }),
            Record::Restart(RestartEvent { at_us: 40, server: "pg1".into() }),
        ];
        let w = windows(&records, 100);
        let spans: Vec<(&str, u64, u64, bool)> =
            w.iter().map(|w| (w.target.as_str(), w.start_us, w.end_us, w.healed)).collect();
        assert_eq!(spans, vec![("pg1", 10, 40, true), ("pg2", 12, 15, true)]);
        assert_eq!(w[0].label(), "failover pg1 (pg2 promoted)");
        assert_eq!(w[0].class(), "f-failover");
    }
}
