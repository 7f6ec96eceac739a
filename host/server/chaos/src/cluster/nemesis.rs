//! The distributed campaign's nemesis. At seeded random moments it pauses a
//! client (SIGSTOP) for longer than any lease the lock service grants, and,
//! one at a time, injects one of:
//! - partitions (nftables in the nodes' namespaces): the etcd leader isolated
//!   from every other node; a minority (one etcd member and one fencing server)
//!   split from the majority; a client cut off from its lock service but not
//!   from its storage; a fencing server cut off from every etcd member;
//! - kill -9 of the etcd leader or of a follower, of a database node, or of a
//!   fencing server, each restarted on its own data after a while;
//! - with a standby, a failover ([`super::replicas`]): the primary killed and the
//!   standby promoted, the old primary rebuilt as the new standby when it ends;
//!   half the time the standby is first cut off from the primary for 1-3 s, so
//!   it lags behind whatever the primary acknowledges without it.
//!   The first fault of a run with a standby is a failover, so even a short run
//!   has one.
//!
//! Every fault ends (heal or restart) before the next one starts, so a restart
//! always finds a cluster it can join; pauses overlap everything. After each
//! database restart and failover every file is read back so the checker sees that nothing
//! acknowledged was lost. At the deadline everything is healed and resumed.

use super::procs::{Proc, etcd_leader};
use super::replicas::Database;
use crate::history::{HistoryWriter, NemesisKind, Record, RestartEvent, now_us};
use crate::nemesis::{record, signal};
use crate::netns::Net;
use nix::sys::signal::Signal;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use std::time::{Duration, Instant};

/// Everything the nemesis may break.
pub struct Targets<'a> {
    pub net: &'a Net,
    pub etcd: &'a mut [Proc],
    pub database: &'a mut Database,
    pub servers: &'a mut [Proc],
    /// `(client id, pid, node of the fencing server it takes locks from)`.
    pub clients: Vec<(String, u32, String)>,
    /// How long pauses last (ms): longer than any lease the lock service grants.
    pub pause_ms: (u64, u64),
}

/// The fault in place, ended before the next one starts.
enum Active {
    Partition,
    Etcd(usize),
    /// A database node killed, restarted in place.
    Database(usize),
    /// The primary (this node) killed and the standby promoted.
    Failover(usize),
    Server(usize),
}

fn restarted(history: &HistoryWriter, server: &str) -> anyhow::Result<()> {
    history.write(&Record::Restart(RestartEvent { at_us: now_us(), server: server.to_string() }))?;
    Ok(())
}

impl Targets<'_> {
    fn etcd_members(&self) -> Vec<(String, String)> {
        self.etcd
            .iter()
            .filter_map(|p| self.net.node(&p.node).ok().map(|n| (p.node.clone(), super::procs::etcd_url(n.ip))))
            .collect()
    }

    /// The member the etcd cluster agrees leads, asked from a blocking thread
    /// (`etcdctl` takes up to a second).
    async fn etcd_leader(&self) -> anyhow::Result<Option<String>> {
        let members = self.etcd_members();
        Ok(tokio::task::spawn_blocking(move || etcd_leader(&members)).await?)
    }

    fn all_nodes(&self) -> Vec<String> {
        self.net.nodes().iter().map(|n| n.name.clone()).collect()
    }

    fn partition(&self, history: &HistoryWriter, a: &[String], b: &[String], what: &str) -> anyhow::Result<()> {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        self.net.partition(&a, &b)?;
        record(history, NemesisKind::Partition, "net", Some(format!("{what}: {} | {}", a.join(" "), b.join(" "))))
    }

    /// Starts one fault; `None` when it could not (no agreed etcd leader right now).
    async fn inject(&mut self, roll: u32, rng: &mut StdRng, history: &HistoryWriter) -> anyhow::Result<Option<Active>> {
        let etcd_names: Vec<String> = self.etcd.iter().map(|p| p.node.clone()).collect();
        let server_names: Vec<String> = self.servers.iter().map(|p| p.node.clone()).collect();
        let active = match roll {
            0..16 => {
                let Some(leader) = self.etcd_leader().await? else { return Ok(None) };
                let rest: Vec<String> = self.all_nodes().into_iter().filter(|n| *n != leader).collect();
                self.partition(history, &[leader], &rest, "etcd leader isolated")?;
                Active::Partition
            }
            16..30 => {
                let member = etcd_names.choose(rng).expect("three members").clone();
                let server = server_names.choose(rng).expect("three servers").clone();
                let mut majority: Vec<String> = etcd_names.iter().chain(&server_names).cloned().collect();
                majority.retain(|n| *n != member && *n != server);
                majority.extend(self.database.nodes.iter().map(|p| p.node.clone()));
                self.partition(history, &[member, server], &majority, "minority | majority")?;
                Active::Partition
            }
            30..44 => {
                let (client, _, lock_server) = self.clients.choose(rng).expect("at least one client").clone();
                self.partition(history, &[client], &[lock_server], "client cut off from its lock service")?;
                Active::Partition
            }
            44..58 => {
                let server = server_names.choose(rng).expect("three servers").clone();
                self.partition(history, &[server], &etcd_names, "fencing server cut off from etcd")?;
                Active::Partition
            }
            58..80 => {
                let leader = self.etcd_leader().await?;
                let leading = roll < 69;
                let pick = if leading {
                    let Some(leader) = leader else { return Ok(None) };
                    leader
                } else {
                    let followers: Vec<&String> = etcd_names.iter().filter(|n| Some(*n) != leader.as_ref()).collect();
                    (*followers.choose(rng).expect("a follower")).clone()
                };
                let i = etcd_names.iter().position(|n| *n == pick).expect("a member");
                self.etcd[i].kill(self.net)?;
                record(history, NemesisKind::Kill, &pick, Some(if leading { "leader" } else { "follower" }.into()))?;
                Active::Etcd(i)
            }
            80..85 if let Some(standby) = self.database.standby() => {
                let old = self.database.primary();
                // Half the time the standby is cut off from the primary for a
                // while first, as when the network fails before the machine:
                // what the primary acknowledges meanwhile, the standby lacks.
                let lag_ms = rng.random_bool(0.5).then(|| rng.random_range(1000..3000u64));
                if let Some(ms) = lag_ms {
                    let (primary, standby) =
                        (self.database.nodes[old].node.clone(), self.database.nodes[standby].node.clone());
                    self.partition(history, &[primary], &[standby], "standby cut off from the primary")?;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                let (old_name, new_name) = self.database.fail_over(self.net).await?;
                record(history, NemesisKind::Failover, &old_name, Some(format!("{new_name} promoted")))?;
                if lag_ms.is_some() {
                    self.net.heal()?;
                    record(history, NemesisKind::Heal, "net", None)?;
                }
                Active::Failover(old)
            }
            80..90 => {
                let i = rng.random_range(0..self.database.nodes.len());
                let role = if i == self.database.primary() { "primary" } else { "standby" };
                let node = &mut self.database.nodes[i];
                node.kill(self.net)?;
                record(history, NemesisKind::Kill, &node.node, Some(role.into()))?;
                Active::Database(i)
            }
            _ => {
                let i = rng.random_range(0..self.servers.len());
                self.servers[i].kill(self.net)?;
                record(history, NemesisKind::Kill, &self.servers[i].node, None)?;
                Active::Server(i)
            }
        };
        Ok(Some(active))
    }

    /// Ends a fault: heals the net, or restarts what was killed.
    async fn end<F, Fut>(&mut self, active: Active, history: &HistoryWriter, readback: &mut F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>>,
    {
        match active {
            Active::Partition => {
                self.net.heal()?;
                record(history, NemesisKind::Heal, "net", None)?;
            }
            Active::Etcd(i) => {
                self.etcd[i].start(self.net).await?;
                restarted(history, &self.etcd[i].node)?;
            }
            Active::Database(i) => {
                self.database.nodes[i].start(self.net).await?;
                restarted(history, &self.database.nodes[i].node)?;
                readback().await?;
            }
            Active::Failover(old) => {
                self.database.rebuild_standby(self.net, old).await?;
                restarted(history, &self.database.nodes[old].node)?;
                readback().await?;
            }
            Active::Server(i) => {
                self.servers[i].start(self.net).await?;
                restarted(history, &self.servers[i].node)?;
            }
        }
        Ok(())
    }
}

/// Injects faults until `deadline`, then heals everything and resumes every client.
/// `after_database_restart` reads every file back and records the reads.
pub async fn run<F, Fut>(
    mut t: Targets<'_>,
    rng: &mut StdRng,
    history: &HistoryWriter,
    deadline: Instant,
    mut after_database_restart: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut paused: Vec<(usize, Instant)> = vec![];
    let mut active: Option<(Active, Instant)> = None;
    let mut failover_due = t.database.standby().is_some();
    while Instant::now() < deadline {
        let now = Instant::now();
        for &(i, _) in paused.iter().filter(|(_, at)| *at <= now) {
            signal(t.clients[i].1, Signal::SIGCONT);
            record(history, NemesisKind::Resume, &t.clients[i].0, None)?;
        }
        paused.retain(|(_, at)| *at > now);
        if active.as_ref().is_some_and(|(_, until)| *until <= now) {
            let (fault, _) = active.take().expect("checked");
            t.end(fault, history, &mut after_database_restart).await?;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..600))).await;
        if Instant::now() >= deadline {
            break;
        }
        // Per wake-up (every 0.1-0.6 s): 12% a pause, 48% a fault when none is in
        // place, otherwise quiet, so work gets done between faults.
        let roll = rng.random_range(0..100u32);
        if roll < 12 {
            let free: Vec<usize> = (0..t.clients.len()).filter(|i| paused.iter().all(|(p, _)| p != i)).collect();
            let Some(&i) = free.choose(rng) else { continue };
            let ms = rng.random_range(t.pause_ms.0..=t.pause_ms.1);
            signal(t.clients[i].1, Signal::SIGSTOP);
            record(history, NemesisKind::Pause, &t.clients[i].0, Some(format!("{ms}ms")))?;
            paused.push((i, Instant::now() + Duration::from_millis(ms)));
        } else if roll < 60 && active.is_none() {
            // Spread over the faults in proportion to `inject`'s ranges.
            let kind = if std::mem::take(&mut failover_due) { 80 } else { (roll - 12) * 100 / 48 };
            if let Some(fault) = t.inject(kind, rng, history).await? {
                let hold = match fault {
                    Active::Partition => rng.random_range(1500..6000),
                    _ => rng.random_range(300..3000),
                };
                active = Some((fault, Instant::now() + Duration::from_millis(hold)));
            }
        }
    }
    if let Some((fault, _)) = active {
        t.end(fault, history, &mut after_database_restart).await?;
    }
    for (i, _) in paused {
        signal(t.clients[i].1, Signal::SIGCONT);
        record(history, NemesisKind::Resume, &t.clients[i].0, None)?;
    }
    Ok(())
}
