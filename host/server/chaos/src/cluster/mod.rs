//! The distributed campaign (`fencing chaos --topology cluster`): the
//! deployment users grow into, each process on a node of its own (a network
//! namespace, [`super::netns`]):
//! - `e1`..`e3`: a 3-member etcd cluster, the lock service's state;
//! - `pg1`, `pg2`: PostgreSQL 15, the data: a primary and a standby fed by
//!   streaming replication, synchronous or not ([`replicas`]; the standby is left
//!   out with [`Replication::None`]), with the `fencing` extension deciding or the
//!   fencing servers' own check ([`Decider`]);
//! - `s1`..`s3`: `fencing serve --store postgres --locks etcd`, stateless, finding
//!   the primary by themselves (`target_session_attrs=read-write`);
//! - `c0`..: the client processes; client `ci` takes its locks from server
//!   `s(i mod 3 + 1)` and writes through the next one, so a client can be cut
//!   off from its lock service and still reach its storage.
//!
//! With `--signed` every server signs what etcd grants (one key, made for
//! the run), and the proofs are checked where writes are decided: by the
//! extension (`fencing.verify_keys` in every node's `postgresql.conf`) or by
//! the servers (`--verify-keys`). `--forger` adds the forger, writing from
//! the controller through `s1`.
//!
//! The controller (this thread) runs in the hub namespace, which reaches every
//! node whatever the partitions; it starts everything, lets the nemesis
//! ([`nemesis`]) loose, reads every file back after each database restart and
//! at the end, and hands the merged history to the same checker as the local
//! campaign. Every namespace and process is removed when the run ends, fails,
//! or is interrupted (SIGINT, SIGTERM); a run killed outright is swept by the
//! next one.
//!
//! # Layout
//! - [`procs`]: etcd, PostgreSQL and fencing servers as restartable processes in their namespaces.
//! - [`replicas`]: the primary, its standby, failover and the old primary's rebuild.
//! - [`nemesis`]: partitions, kills of the etcd leader and followers, database nodes and
//!   servers, failovers, pauses.

pub mod nemesis;
pub mod procs;
pub mod replicas;

use super::campaign::{self, CampaignConfig, Finished};
use super::history::Phase;
use super::netns::{self, Net};
use anyhow::Context;
use procs::Proc;
use rand::SeedableRng;
use rand::rngs::StdRng;
use replicas::Database;
pub use replicas::Replication;
use std::time::{Duration, Instant};

const ETCD: [&str; 3] = ["e1", "e2", "e3"];
const SERVERS: [&str; 3] = ["s1", "s2", "s3"];
/// Most client processes (each a node of its own, beside the 7 servers' nodes).
pub const MAX_CLIENTS: usize = 64;

/// Who decides the writes in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    /// The `fencing` extension inside PostgreSQL (`--pg-guard extension`).
    Extension,
    /// Each fencing server, before it writes (`--pg-guard host`).
    Servers,
    /// Nobody: the servers run with `--no-fencing`.
    Nobody,
}

impl Decider {
    /// The extension when it is installed, the servers otherwise; nobody without fencing.
    pub fn choose(fencing: bool) -> Decider {
        match (fencing, procs::extension_installed()) {
            (false, _) => Decider::Nobody,
            (true, true) => Decider::Extension,
            (true, false) => Decider::Servers,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Decider::Extension => "the fencing extension in PostgreSQL",
            Decider::Servers => "the fencing servers' own check (--pg-guard host, or no extension installed)",
            Decider::Nobody => "nobody (--no-fencing)",
        }
    }
}

/// The longest lease the etcd lock service grants for a request of `ms`:
/// whole seconds, at least two (`locks::etcd`).
fn etcd_lease_ms(ms: u64) -> u64 {
    ms.div_ceil(1000).max(2) * 1000
}

/// Runs the distributed campaign: builds the net, runs everything from a
/// thread inside its hub, and removes the net whatever happens.
pub fn run(cfg: &CampaignConfig, decider: Decider, replication: Replication) -> anyhow::Result<Finished> {
    netns::sweep_stale();
    std::fs::create_dir_all(&cfg.work_dir).context("create the work directory")?;
    let clients: Vec<String> = (0..cfg.clients).map(|i| format!("c{i}")).collect();
    let mut names: Vec<&str> = ETCD.iter().chain(&replicas::NODES).chain(&SERVERS).copied().collect();
    names.extend(clients.iter().map(String::as_str));
    let net = Net::create(&names).context("build the campaign's network namespaces")?;
    let cfg = cfg.clone();
    // The thread owns the net: a panic unwinds through its drop, which removes it.
    let thread = std::thread::Builder::new().name("chaos-cluster".into()).spawn(move || {
        net.enter_hub()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("start the async runtime")?;
        let result = runtime.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = drive(&cfg, decider, replication, &net, &clients) => r,
                _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted"),
                _ = term.recv() => anyhow::bail!("terminated"),
            }
        });
        drop(runtime);
        drop(net);
        result
    })?;
    match thread.join() {
        Ok(result) => result,
        Err(_) => anyhow::bail!("the campaign's controller panicked (its namespaces were removed)"),
    }
}

async fn drive(
    cfg: &CampaignConfig,
    decider: Decider,
    replication: Replication,
    net: &Net,
    clients: &[String],
) -> anyhow::Result<Finished> {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let resources = cfg.resource_ids();
    let own = campaign::open_history(cfg, Some(replication.name()))?;
    let auth = campaign::auth_args(cfg)?;

    let pg_user = std::env::var("FENCING_PG_USER").unwrap_or_else(|_| "postgres".into());
    let keys = if cfg.signed { Some(campaign::signing_keys(cfg)?) } else { None };
    let pg_settings = match (&keys, decider) {
        (Some((_, public)), Decider::Extension) => verify_keys_setting(public)?,
        _ => String::new(),
    };
    let mut etcd: Vec<Proc> =
        ETCD.iter().map(|m| Proc::etcd(net, &cfg.work_dir, m, &ETCD)).collect::<anyhow::Result<_>>()?;
    eprintln!("chaos: starting PostgreSQL ({} replication) and a 3-member etcd cluster", replication.name());
    let mut database =
        Database::start(net, &cfg.work_dir, &pg_user, replication, &pg_settings).await.context("start PostgreSQL")?;
    // Members wait for each other to form a quorum: start them all, then wait for each.
    let mut starting = vec![];
    for member in etcd.iter_mut() {
        starting.push(member.start(net));
    }
    for result in futures::future::join_all(starting).await {
        result.context("start the etcd cluster")?;
    }

    let endpoints: Vec<String> =
        ETCD.iter().map(|m| Ok(procs::etcd_url(net.node(m)?.ip))).collect::<anyhow::Result<_>>()?;
    let mut serve_args = vec!["--store".to_string(), "postgres".into(), "--postgres-url".into()];
    serve_args.push(database.url(net)?);
    serve_args.extend(["--locks".into(), "etcd".into(), "--etcd-endpoints".into(), endpoints.join(",")]);
    match decider {
        Decider::Extension => serve_args.extend(["--pg-guard".into(), "extension".into()]),
        Decider::Servers => {}
        Decider::Nobody => serve_args.push("--no-fencing".into()),
    }
    serve_args.extend(auth);
    if let Some((key, public)) = keys {
        // Every server signs what etcd grants; the proofs are checked where the writes are decided.
        serve_args.extend(["--signing-key".into(), key]);
        if decider == Decider::Servers {
            serve_args.extend(["--verify-keys".into(), public]);
        }
    }
    let mut servers: Vec<Proc> = SERVERS
        .iter()
        .map(|s| Proc::fencing(net, &cfg.work_dir, s, &cfg.exe, serve_args.clone()))
        .collect::<anyhow::Result<_>>()?;
    eprintln!("chaos: starting 3 fencing servers; writes decided by {}", decider.describe());
    // One at a time: the first creates the schema the others find.
    for server in servers.iter_mut() {
        server.start(net).await.with_context(|| format!("start the fencing server {}", server.node))?;
    }
    let url = |node: &str| -> anyhow::Result<String> { Ok(procs::fencing_url(net.node(node)?.ip)) };

    let deadline = Instant::now() + Duration::from_secs(cfg.seconds);
    let until_us = super::history::now_us() + cfg.seconds * 1_000_000;
    let mut children = vec![];
    let mut targets = vec![];
    for (i, id) in clients.iter().enumerate() {
        let (locks, storage) = (SERVERS[i % 3], SERVERS[(i + 1) % 3]);
        let cmd = net.command(id, &cfg.exe)?;
        let child = campaign::spawn_client(cmd, cfg, id, &url(locks)?, &url(storage)?, until_us)?;
        targets.push((id.clone(), child.id(), locks.to_string()));
        children.push(child);
    }
    let forger = match cfg.forger {
        true => Some(campaign::spawn_forger(cfg, &url(SERVERS[0])?, deadline)?),
        false => None,
    };
    eprintln!("chaos: {} clients running, faults for {}s", clients.len(), cfg.seconds);
    let longest = etcd_lease_ms(cfg.lease_ms.1);
    let reader = url(SERVERS[0])?;
    let fault_result = nemesis::run(
        nemesis::Targets {
            net,
            etcd: &mut etcd,
            database: &mut database,
            servers: &mut servers,
            clients: targets,
            pause_ms: (longest + 500, longest + 2500),
        },
        &mut rng,
        &own,
        deadline,
        || campaign::read_all(&reader, &resources, Phase::AfterRestart, &own),
    )
    .await;
    campaign::wait_clients(&mut children).await;
    if let Some(forger) = forger {
        forger.await.context("the forger")??;
    }
    fault_result?;
    campaign::read_all(&reader, &resources, Phase::Final, &own).await?;
    drop(own);
    let mut histories = clients.to_vec();
    histories.extend(cfg.forger.then(|| super::forger::FORGER.to_string()));
    campaign::merge_and_check(cfg, &histories)
}

/// The `postgresql.conf` line giving the extension the verify file's keys
/// (`fencing.verify_keys`: the file's key lines, comma-separated).
fn verify_keys_setting(public: &str) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(public).with_context(|| format!("read {public}"))?;
    let keys: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    Ok(format!("fencing.verify_keys = '{}'\n", keys.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::etcd_lease_ms;

    #[test]
    fn etcd_leases_are_whole_seconds_of_at_least_two() {
        assert_eq!(etcd_lease_ms(1), 2000);
        assert_eq!(etcd_lease_ms(2000), 2000);
        assert_eq!(etcd_lease_ms(2001), 3000);
    }
}
