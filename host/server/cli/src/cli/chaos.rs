//! `fencing chaos`: the safety campaign, and `fencing chaos check FILE`, the
//! checker on a saved history. The last line printed is always the JSON summary.
//!
//! Exit codes: 0 when the outcome is the expected one (no violation; or, with
//! `--no-fencing`, at least one violation found), 1 otherwise, 2 for bad input
//! (unreadable or malformed history file, invalid arguments).

use crate::cli::serve::LeaseSync;
use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_chaos::campaign::{self, CampaignConfig};
use fencing_chaos::check::{self, Report};
use fencing_chaos::client::{self, ClientConfig};
use fencing_chaos::cluster;
use fencing_chaos::history::{Record, read_history};
use fencing_chaos::report;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ChaosArgs {
    #[command(subcommand)]
    command: Option<ChaosCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum ChaosCommand {
    /// Check a saved history file and print its violations and summary.
    Check {
        /// The history (JSON lines) to check.
        file: PathBuf,
        /// Also write DIR/timeline.html: the history drawn as lanes of requests, faults and violations.
        #[arg(long, value_name = "DIR")]
        report: Option<PathBuf>,
    },
    /// One campaign client process (started by the campaign).
    #[command(hide = true)]
    Client(ClientArgs),
}

/// What the campaign runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Topology {
    /// One lock service (embedded) and one storage server (redb) on 127.0.0.1,
    /// behind fault proxies: pauses, kills, delays and dropped connections.
    Local,
    /// A 3-member etcd cluster, a PostgreSQL 15 primary with a streaming standby and
    /// 3 `fencing serve --store postgres --locks etcd` servers, each process in a
    /// network namespace of its own (needs root, iproute2, nftables, etcd and
    /// PostgreSQL 15): network partitions, kill -9 of the etcd leader, a follower, a
    /// database node and servers, and failovers to the standby, besides pauses.
    Cluster,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Where the servers run.
    #[arg(long, value_enum, default_value = "local")]
    topology: Topology,
    /// How long faults are injected, in seconds.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Seed of every random choice (default: from the clock, printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Run the storage with fencing disabled (`fencing serve --no-fencing`): violations are expected.
    #[arg(long)]
    no_fencing: bool,
    /// Number of client processes.
    #[arg(long, default_value_t = 6)]
    clients: usize,
    /// Number of resources (each with its own lock) the clients contend for.
    #[arg(long, default_value_t = 2)]
    resources: usize,
    /// Client lease durations, `MIN-MAX` milliseconds [default: 200-800 local, 1000-3000 cluster,
    /// where etcd rounds leases up to whole seconds, at least two].
    #[arg(long, value_parser = parse_range)]
    lease_ms: Option<(u64, u64)>,
    /// Work directory for server data, logs and per-client histories (default: a fresh temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where to write the merged history (default: `history.jsonl` in the work directory).
    #[arg(long)]
    history: Option<PathBuf>,
    /// Start both servers with `--auth-token-file` (a random token) and have the clients send it.
    #[arg(long)]
    auth: bool,
    /// Signed tokens: a fresh key (`fencing admin keygen`), the lock service signing every
    /// grant and the storage checking every write's proof; the clients send their grants'
    /// proofs. In the cluster every server signs what etcd grants, and the extension
    /// (`fencing.verify_keys`) or the servers (`--pg-guard host`) check the proofs.
    #[arg(long)]
    signed: bool,
    /// Add a forger: a client that writes with made-up tokens just above each resource's
    /// high-water mark, without a lease or a proof. Without `--signed` its admitted writes
    /// are violations (`forged_token_admitted`). In the cluster it writes through `s1`.
    #[arg(long)]
    forger: bool,
    /// When the lock service answers a grant (`fencing serve --lease-sync`) [default:
    /// background, as served]: `background` puts grants answered ahead of their journal's
    /// sync through the kills and restarts, `each-grant` grants answered once synced.
    /// Local topology only (the cluster's locks are etcd's).
    #[arg(long, value_enum)]
    lease_sync: Option<LeaseSync>,
    /// Cluster topology: how the PostgreSQL primary's commits reach its standby.
    /// `sync` acknowledges a commit once the standby has flushed it; `async` before
    /// (acknowledged writes and fences can be lost at a failover); `none` runs no
    /// standby and no failovers [default: sync].
    #[arg(long, value_enum)]
    replication: Option<ReplicationArg>,
    /// Cluster topology: who decides the writes: `extension` (the `fencing` extension
    /// inside PostgreSQL, `fencing serve --pg-guard extension`) or `host` (each
    /// server before it writes) [default: extension when installed, host otherwise].
    #[arg(long, value_enum)]
    pg_guard: Option<PgGuardArg>,
    /// Write DIR/timeline.html: every request as a bar per client lane, the faults as bands,
    /// violations in red, throughput and latency over time. Self-contained; open it in a browser.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ReplicationArg {
    Sync,
    Async,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PgGuardArg {
    Extension,
    Host,
}

#[derive(Debug, Args)]
struct ClientArgs {
    #[arg(long)]
    id: String,
    #[arg(long)]
    locks: String,
    #[arg(long)]
    storage: String,
    #[arg(long, value_delimiter = ',')]
    resources: Vec<String>,
    #[arg(long)]
    seed: u64,
    #[arg(long)]
    until_us: u64,
    #[arg(long, value_parser = parse_range)]
    lease_ms: (u64, u64),
    #[arg(long)]
    history: PathBuf,
    #[arg(long)]
    auth_token_file: Option<PathBuf>,
}

fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once('-').ok_or("expected MIN-MAX")?;
    let (a, b): (u64, u64) = (a.parse().map_err(|e| format!("{e}"))?, b.parse().map_err(|e| format!("{e}"))?);
    if a == 0 || a > b {
        return Err("expected 0 < MIN <= MAX".into());
    }
    Ok((a, b))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("start the async runtime")
}

fn print(report: &Report) {
    for v in &report.violations {
        println!("VIOLATION {} on {}: {}", v.kind, v.resource, v.message);
    }
    println!("{}", serde_json::to_string(&report.summary).expect("summary serializes"));
}

pub fn run(args: ChaosArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(ChaosCommand::Check { file, report: dir }) => {
            let records = read_history(&file).map_err(|e| super::usage(format!("{}: {e}", file.display())))?;
            let report = check::check(&records);
            if let Some(dir) = dir {
                write_page(&dir, &file, &records, &report)?;
            }
            print(&report);
            Ok(if report.is_valid() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
        Some(ChaosCommand::Client(a)) => {
            if a.resources.is_empty() {
                return Err(super::usage("--resources must name at least one resource"));
            }
            let cfg = ClientConfig {
                id: a.id,
                locks_url: a.locks,
                storage_url: a.storage,
                resources: a.resources,
                seed: a.seed,
                lease_ms: a.lease_ms,
                until_us: a.until_us,
                history: a.history,
                auth_token_file: a.auth_token_file,
            };
            runtime()?.block_on(client::run(cfg))?;
            Ok(ExitCode::SUCCESS)
        }
        None => run_campaign(args.run),
    }
}

fn write_page(dir: &Path, history: &Path, records: &[Record], report: &Report) -> anyhow::Result<()> {
    let title = format!("fencing chaos: {}", history.display());
    let run = report::Run { title: "campaign".into(), records, report };
    let path = report::write(dir, &title, &[run]).with_context(|| format!("write the report to {}", dir.display()))?;
    eprintln!("chaos: timeline written to {}", path.display());
    Ok(())
}

fn run_campaign(a: RunArgs) -> anyhow::Result<ExitCode> {
    if a.clients == 0 || a.resources == 0 || a.seconds == 0 {
        return Err(super::usage("--seconds, --clients and --resources must be at least 1"));
    }
    if a.signed && a.no_fencing {
        return Err(super::usage("--signed and --no-fencing contradict each other"));
    }
    if a.topology == Topology::Local && (a.replication.is_some() || a.pg_guard.is_some()) {
        return Err(super::usage("--replication and --pg-guard are for the cluster topology"));
    }
    if a.topology == Topology::Cluster {
        if a.lease_sync.is_some() {
            return Err(super::usage("--lease-sync is for the local topology (the cluster's locks are etcd's)"));
        }
        if a.pg_guard == Some(PgGuardArg::Extension) && !cluster::procs::extension_installed() {
            return Err(super::usage(
                "--pg-guard extension: the fencing extension is not installed (scripts/pg-extension install)",
            ));
        }
        if a.pg_guard.is_some() && a.no_fencing {
            return Err(super::usage("--pg-guard chooses who fences; --no-fencing runs without"));
        }
        if !nix::unistd::geteuid().is_root() {
            return Err(super::usage("--topology cluster needs root (it makes network namespaces)"));
        }
        if a.clients > cluster::MAX_CLIENTS {
            return Err(super::usage(format!("--topology cluster runs at most {} clients", cluster::MAX_CLIENTS)));
        }
    }
    let seed = a.seed.unwrap_or_else(fencing_chaos::history::now_us);
    // A fresh directory unless one is given; removed after an expected outcome if the history lives elsewhere.
    let (work_dir, remove_after) = match a.dir {
        Some(d) => (d, false),
        None => (std::env::temp_dir().join(format!("fencing-chaos-{seed}-{}", std::process::id())), true),
    };
    let history = a.history.unwrap_or_else(|| work_dir.join("history.jsonl"));
    let lease_ms = a.lease_ms.unwrap_or(match a.topology {
        Topology::Local => (200, 800),
        Topology::Cluster => (1000, 3000),
    });
    let background_grants = a.lease_sync.unwrap_or_default() == LeaseSync::Background;
    eprintln!(
        "chaos: {} topology, seed {seed}, {}s, {} clients{}, {} resources, fencing {}, signed tokens {}, auth {}, lease sync {}, history {}",
        format!("{:?}", a.topology).to_lowercase(),
        a.seconds,
        a.clients,
        if a.forger { " and a forger" } else { "" },
        a.resources,
        if a.no_fencing { "off" } else { "on" },
        if a.signed { "on" } else { "off" },
        if a.auth { "on" } else { "off" },
        if background_grants { "background" } else { "each grant" },
        history.display()
    );
    let cfg = CampaignConfig {
        seconds: a.seconds,
        seed,
        fencing: !a.no_fencing,
        clients: a.clients,
        resources: a.resources,
        lease_ms,
        work_dir,
        history,
        exe: std::env::current_exe().context("locate the fencing binary")?,
        auth: a.auth,
        background_grants,
        signed: a.signed,
        forger: a.forger,
    };
    let campaign::Finished { records, report } = match a.topology {
        Topology::Local => runtime()?.block_on(campaign::run(&cfg))?,
        Topology::Cluster => {
            let decider = match a.pg_guard {
                None => cluster::Decider::choose(cfg.fencing),
                Some(PgGuardArg::Extension) => cluster::Decider::Extension,
                Some(PgGuardArg::Host) => cluster::Decider::Servers,
            };
            let replication = match a.replication.unwrap_or(ReplicationArg::Sync) {
                ReplicationArg::Sync => cluster::Replication::Sync,
                ReplicationArg::Async => cluster::Replication::Async,
                ReplicationArg::None => cluster::Replication::None,
            };
            cluster::run(&cfg, decider, replication)?
        }
    };
    if let Some(dir) = &a.report {
        write_page(dir, &cfg.history, &records, &report)?;
    }
    // Violations are what a run without fencing, or with a forger and no signed tokens, should show.
    let violations_expected = !cfg.fencing || (cfg.forger && !cfg.signed);
    if remove_after && report.is_valid() != violations_expected && !cfg.history.starts_with(&cfg.work_dir) {
        let _ = std::fs::remove_dir_all(&cfg.work_dir);
    } else {
        eprintln!("chaos: work directory kept at {}", cfg.work_dir.display());
    }
    print(&report);
    let expected = report.is_valid() != violations_expected;
    if !cfg.fencing {
        eprintln!("chaos: fencing disabled, {} violations found (expected at least one)", report.summary.violations);
    } else if violations_expected {
        let forged = report.summary.violation_kinds.get("forged_token_admitted").copied().unwrap_or(0);
        eprintln!("chaos: a forger without signed tokens, {forged} forged writes admitted (expected at least one)");
    }
    Ok(if expected { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
