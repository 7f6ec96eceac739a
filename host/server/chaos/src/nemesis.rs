//! The nemesis: at seeded random moments it pauses a client with SIGSTOP for
//! longer than any lease (and resumes it with SIGCONT), SIGKILLs and restarts
//! the storage server or the lock service, and makes a proxy delay or drop
//! client requests for a while. Every fault and heal is recorded in the history.
//!
//! After each storage restart the campaign reads back every file (phase
//! `after_restart`) so the checker can verify nothing acknowledged was lost.
//! When the run ends, every fault is healed and every client resumed.

use super::history::{HistoryWriter, NemesisEvent, NemesisKind, Record, RestartEvent, now_us};
use super::proxy::{Fault, Proxy};
use super::servers::Server;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use rand::rngs::StdRng;
use std::time::{Duration, Instant};

/// Everything the nemesis may break.
pub struct Targets<'a> {
    pub storage: &'a mut Server,
    pub locks: &'a mut Server,
    /// `(client id, pid)` of each client process.
    pub clients: Vec<(String, u32)>,
    /// The proxies in front of the storage and the lock service.
    pub proxies: Vec<(&'static str, Proxy)>,
    /// The longest lease a client may ask for (ms): pauses last longer.
    pub max_lease_ms: u64,
}

/// Writes a fault or heal to the history, stamped now.
pub(super) fn record(
    history: &HistoryWriter,
    kind: NemesisKind,
    target: &str,
    detail: Option<String>,
) -> anyhow::Result<()> {
    history.write(&Record::Nemesis(NemesisEvent { at_us: now_us(), kind, target: target.to_string(), detail }))?;
    Ok(())
}

/// Sends `sig` to a client process (it may have exited already).
pub(super) fn signal(pid: u32, sig: Signal) {
    let _ = kill(Pid::from_raw(pid as i32), sig);
}

/// Injects faults until `deadline`, then heals everything.
/// `after_storage_restart` reads every file back and records the reads.
pub async fn run<F, Fut>(
    t: Targets<'_>,
    rng: &mut StdRng,
    history: &HistoryWriter,
    deadline: Instant,
    mut after_storage_restart: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let Targets { storage, locks, clients, proxies, max_lease_ms } = t;
    let mut paused: Vec<(usize, Instant)> = vec![];
    let mut faulted: Vec<(usize, Instant)> = vec![];
    while Instant::now() < deadline {
        let now = Instant::now();
        for &(i, _) in paused.iter().filter(|(_, at)| *at <= now) {
            signal(clients[i].1, Signal::SIGCONT);
            record(history, NemesisKind::Resume, &clients[i].0, None)?;
        }
        paused.retain(|(_, at)| *at > now);
        for &(i, _) in faulted.iter().filter(|(_, at)| *at <= now) {
            proxies[i].1.set(Fault::None);
            record(history, NemesisKind::Heal, proxies[i].0, None)?;
        }
        faulted.retain(|(_, at)| *at > now);
        tokio::time::sleep(Duration::from_millis(rng.random_range(100..600))).await;
        if Instant::now() >= deadline {
            break;
        }
        match rng.random_range(0..100) {
            0..35 => {
                let free: Vec<usize> = (0..clients.len()).filter(|i| paused.iter().all(|(p, _)| p != i)).collect();
                if free.is_empty() {
                    continue;
                }
                let i = free[rng.random_range(0..free.len())];
                let ms = max_lease_ms + rng.random_range(100..1500);
                signal(clients[i].1, Signal::SIGSTOP);
                record(history, NemesisKind::Pause, &clients[i].0, Some(format!("{ms}ms")))?;
                paused.push((i, Instant::now() + Duration::from_millis(ms)));
            }
            35..50 => {
                storage.kill();
                record(history, NemesisKind::Kill, "storage", None)?;
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
                storage.start().await?;
                history.write(&Record::Restart(RestartEvent { at_us: now_us(), server: "storage".into() }))?;
                after_storage_restart().await?;
            }
            50..62 => {
                locks.kill();
                record(history, NemesisKind::Kill, "locks", None)?;
                tokio::time::sleep(Duration::from_millis(rng.random_range(0..300))).await;
                locks.start().await?;
                history.write(&Record::Restart(RestartEvent { at_us: now_us(), server: "locks".into() }))?;
            }
            roll => {
                let i = rng.random_range(0..proxies.len());
                if faulted.iter().any(|(f, _)| *f == i) {
                    continue;
                }
                let (kind, fault, detail) = if roll < 81 {
                    let ms = rng.random_range(20..400);
                    (NemesisKind::Delay, Fault::Delay(ms), format!("{ms}ms"))
                } else {
                    let p = rng.random_range(0.2..0.5);
                    (NemesisKind::Drop, Fault::Drop(p), format!("p={p:.2}"))
                };
                proxies[i].1.set(fault);
                record(history, kind, proxies[i].0, Some(detail))?;
                faulted.push((i, Instant::now() + Duration::from_millis(rng.random_range(300..2000))));
            }
        }
    }
    for (i, _) in faulted {
        proxies[i].1.set(Fault::None);
        record(history, NemesisKind::Heal, proxies[i].0, None)?;
    }
    for (i, _) in paused {
        signal(clients[i].1, Signal::SIGCONT);
        record(history, NemesisKind::Resume, &clients[i].0, None)?;
    }
    Ok(())
}
