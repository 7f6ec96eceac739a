//! `fencing bench writes|locks`: load generators (see [`crate::bench`]).
//!
//! `bench writes` runs [`crate::bench::writes`] and prints its table.
//! `bench locks` starts servers in this process on ephemeral loopback ports
//! (the embedded backend in a temporary data dir, as `fencing serve` runs it
//! with its lease journal and `--lease-sync background`, the same with
//! `--lease-sync each-grant`, and the same backend in memory only; with
//! `--etcd-endpoints`, a fourth on etcd), then runs each scenario in turn and
//! prints one Markdown table. Server and load generator share the machine's cores.

use crate::bench::locks::{self, Report, Scenario};
use crate::bench::writes::{self, WritesConfig};
use anyhow::Context;
use clap::{Args, Subcommand};
use fencing_runtime::GuardKind;
use fencing_server::locks::{EmbeddedConfig, EmbeddedLocks, EtcdLocks, LockMetrics, LockService};
use fencing_server::telemetry::Metrics;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Durable fenced writes/s and latency for 1, 4, 16 writers, beside SQLite's conditional UPDATE.
    Writes(WritesArgs),
    /// Restart of the embedded lock service with leases held: time to listen, to the first grant, to the first renewal.
    Restart {
        /// Leases held at the restart, comma separated for several runs.
        #[arg(long, value_delimiter = ',', default_value = "0,10000")]
        held: Vec<usize>,
    },
    /// Acquire+release cycles with N clients on distinct locks and on one shared lock.
    Locks {
        /// Concurrent clients (each runs acquire -> release in a loop).
        #[arg(long, default_value_t = 32)]
        clients: usize,
        /// Clients per keep-alive connection, their requests pipelined
        /// (HTTP/1.1); a comma-separated list runs the distinct-locks scenario
        /// once per value. The shared-lock scenario always uses 1.
        #[arg(long, value_delimiter = ',', default_value = "1")]
        pipeline: Vec<usize>,
        /// Seconds per scenario.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Lease duration requested.
        #[arg(long, default_value_t = 10_000)]
        lease_ms: u64,
        /// Also run against etcd at these endpoints (comma separated).
        #[arg(long, value_delimiter = ',')]
        etcd_endpoints: Option<Vec<String>>,
        /// Server worker threads.
        #[arg(long, default_value_t = 2)]
        threads: usize,
    },
}

#[derive(Debug, Args)]
struct WritesArgs {
    /// Writer counts to run, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    writers: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Bytes per write.
    #[arg(long, default_value_t = 128)]
    payload: usize,
    /// Who decides writes.
    #[arg(long, default_value = "wasm", value_parser = super::named::<GuardKind>(GuardKind::ALL.map(GuardKind::name)))]
    guard: GuardKind,
    /// Directory for the stores (on the disk to measure; default: a fresh temp dir).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Writes each writer keeps in flight (pipelined under one token). 1: one
    /// outstanding write per writer, each with a new, higher token.
    #[arg(long, default_value_t = 1)]
    inflight: usize,
    /// Skip the SQLite comparison.
    #[arg(long)]
    no_sqlite: bool,
    /// Tasks reading the writers' objects in a loop beside them, in the
    /// fencing store's runs (reads/s and read latency in a second table).
    #[arg(long, default_value_t = 0)]
    readers: usize,
    /// Signed writes: each carries its token's proof, checked before the fence.
    #[arg(long, value_enum)]
    signed: Option<super::keygen::KeyAlgorithm>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        BenchCommand::Writes(a) => bench_writes(a),
        BenchCommand::Restart { held } => {
            let rt = tokio::runtime::Runtime::new()?;
            let mut reports = Vec::new();
            for &n in &held {
                for signal in [nix::sys::signal::Signal::SIGKILL, nix::sys::signal::Signal::SIGTERM] {
                    let r = rt.block_on(crate::bench::restart::run(n, signal))?;
                    eprintln!("{} leases, {}: first grant {:.1} ms after spawn", r.held, r.signal, r.to_first_grant_ms);
                    reports.push(r);
                }
            }
            println!("{}", crate::bench::restart::table(&reports));
            Ok(ExitCode::SUCCESS)
        }
        BenchCommand::Locks { clients, pipeline, seconds, lease_ms, etcd_endpoints, threads } => {
            bench_locks(clients, &pipeline, seconds, lease_ms, etcd_endpoints, threads)
        }
    }
}

fn bench_writes(a: WritesArgs) -> anyhow::Result<ExitCode> {
    if a.seconds == 0 || a.inflight == 0 || a.writers.is_empty() || a.writers.contains(&0) {
        return Err(super::usage("--seconds, --inflight and every --writers count must be at least 1"));
    }
    let cfg = WritesConfig {
        writers: a.writers,
        duration: Duration::from_secs(a.seconds),
        payload: a.payload,
        guard: a.guard,
        data_dir: a.data_dir,
        inflight: a.inflight,
        sqlite: !a.no_sqlite,
        readers: a.readers,
        signed: a.signed.map(Into::into),
    };
    println!("{}", writes::table(&writes::run(&cfg)?));
    Ok(ExitCode::SUCCESS)
}

fn bench_locks(
    clients: usize,
    pipeline: &[usize],
    seconds: u64,
    lease_ms: u64,
    etcd_endpoints: Option<Vec<String>>,
    threads: usize,
) -> anyhow::Result<ExitCode> {
    if clients == 0 || seconds == 0 {
        return Err(super::usage("--clients and --seconds must be at least 1"));
    }
    if pipeline.iter().any(|&k| k == 0 || k > clients) {
        return Err(super::usage("--pipeline values must be between 1 and --clients"));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(threads.max(1)).enable_all().build()?;
    rt.block_on(async move {
        let dir = std::env::temp_dir().join(format!("fencing-bench-{:x}", rand::random::<u64>()));
        let duration = Duration::from_secs(seconds);
        let mut backends = Vec::new();
        // Journaled as `fencing serve` runs (grants answered once written,
        // synced in the background), the same with `--lease-sync each-grant`,
        // and memory-only.
        let journaled = [
            ("embedded (as served: background)", Some(dir.join("background")), true),
            ("embedded (each-grant)", Some(dir.join("each-grant")), false),
            ("embedded (memory)", None, false),
        ];
        for (name, data_dir, background_grants) in journaled {
            let cfg = EmbeddedConfig { data_dir, background_grants, ..EmbeddedConfig::default() };
            let svc: Arc<dyn LockService> = Arc::new(EmbeddedLocks::open(cfg, LockMetrics::register(&Metrics::new()))?);
            backends.push((name, spawn_server(svc).await?));
        }
        if let Some(endpoints) = &etcd_endpoints {
            let svc = EtcdLocks::connect(endpoints, LockMetrics::register(&Metrics::new()))
                .await
                .with_context(|| format!("connect to etcd {}", endpoints.join(",")))?;
            backends.push(("etcd", spawn_server(Arc::new(svc)).await?));
        }
        let mut reports: Vec<Report> = Vec::new();
        for (name, addr) in &backends {
            let distinct = pipeline.iter().map(|&k| (false, k));
            for (shared, pipeline) in distinct.chain([(true, 1)]) {
                let scenario = Scenario { clients, shared, pipeline, lease_ms, duration };
                let r = locks::run(*addr, name, scenario).await?;
                eprintln!("{name} {} pipeline {pipeline}: {:.0} acquisitions/s", r.scenario, r.per_second());
                reports.push(r);
            }
        }
        println!("{}", locks::table(&reports));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(ExitCode::SUCCESS)
    })
}

async fn spawn_server(svc: Arc<dyn LockService>) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("bind loopback")?;
    let addr = listener.local_addr()?;
    let app = fencing_server::http::locks::router(svc);
    tokio::spawn(fencing_server::http::serve_until(listener, app, std::future::pending()));
    Ok(addr)
}
