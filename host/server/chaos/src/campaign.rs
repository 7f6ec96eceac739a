//! The campaign driver behind `fencing chaos`: starts the lock service and the
//! storage server (this binary, `fencing serve --role ...`), puts a fault proxy
//! in front of each, spawns the client processes, lets the nemesis ([`super::nemesis`])
//! loose until the deadline, reads every file back, merges all histories into
//! one file ordered by time, and runs the checker ([`super::check`]) on it.
//!
//! Everything runs on 127.0.0.1 under one work directory; the same seed gives
//! the same schedule of faults and client choices (timing still varies).

use super::check::{self, Report};
use super::client::{self, Answer, LOG_FILE, VALUE_FILE};
use super::forger::{self, FORGER, ForgerConfig};
use super::history::{Header, HistoryWriter, OpKind, Outcome, Phase, Record, now_us, read_history};
use super::nemesis::{self, Targets};
use super::proxy::Proxy;
use super::servers::{Server, free_addr};
use super::wire::ReadResult;
use anyhow::Context;
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A campaign's parameters.
#[derive(Debug, Clone)]
pub struct CampaignConfig {
    pub seconds: u64,
    pub seed: u64,
    /// False: the storage runs with `--no-fencing` (accepts any token).
    pub fencing: bool,
    pub clients: usize,
    pub resources: usize,
    /// Client lease durations are drawn from this range (ms).
    pub lease_ms: (u64, u64),
    pub work_dir: PathBuf,
    /// Where the merged history is written.
    pub history: PathBuf,
    /// The `fencing` binary to run servers and clients with.
    pub exe: PathBuf,
    /// Start both servers with `--auth-token-file` (a fresh random token in the work
    /// directory) and have every client send it: the campaign then also shows that
    /// authentication changes nothing for clients that hold the token.
    pub auth: bool,
    /// Run the lock service with `--lease-sync background` (as `fencing serve`
    /// does by default): grants answered ahead of their journal's sync then
    /// live through its kills and restarts; otherwise with `each-grant`.
    pub background_grants: bool,
    /// Signed tokens: a key from `fencing admin keygen`, the lock service
    /// signing every grant (`--signing-key`) and the storage checking every
    /// write's proof (`--verify-keys`); the clients send their grant's proof.
    pub signed: bool,
    /// Run the forger ([`super::forger`]) beside the clients.
    pub forger: bool,
}

impl CampaignConfig {
    /// The resources (and locks) the clients contend for.
    pub fn resource_ids(&self) -> Vec<String> {
        (0..self.resources).map(|r| format!("storage:chaos-{r}")).collect()
    }
}

/// Reads every file of every resource straight from the storage (not through
/// the proxy) and records each read with `phase`.
pub async fn read_all(
    storage: &str,
    resources: &[String],
    phase: Phase,
    history: &HistoryWriter,
) -> anyhow::Result<()> {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build()?;
    for resource in resources {
        for file in [LOG_FILE, VALUE_FILE] {
            let mut op = client::new_op("campaign", OpKind::Read, resource);
            op.file_path = Some(file.to_string());
            op.phase = Some(phase);
            let url = format!("{storage}/v1/storage/read");
            let answer =
                client::send(http.get(url).query(&[("resource_id", resource), ("file_path", &file.to_string())])).await;
            match answer {
                // An absent file (or resource) reads as no value.
                Answer::Status(404, _) => {
                    op.end_us = now_us();
                    op.outcome = Outcome::Ok;
                }
                answer => {
                    if let Some(body) = client::settle(&mut op, answer) {
                        match ReadResult::from_json(&body) {
                            Some(r) => {
                                op.value = r.bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
                                op.high_water = r.high_water;
                            }
                            None => {
                                op.outcome = Outcome::Info;
                                op.reason = Some("read body not understood".into());
                            }
                        }
                    }
                }
            }
            history.write(&Record::Op(op))?;
        }
    }
    Ok(())
}

/// Starts client `id` with `cmd` (this binary, or a wrapper that runs it
/// elsewhere, e.g. in a network namespace) against the given lock service
/// and storage URLs.
pub(super) fn spawn_client(
    mut cmd: Command,
    cfg: &CampaignConfig,
    id: &str,
    locks_url: &str,
    storage_url: &str,
    until_us: u64,
) -> anyhow::Result<Child> {
    let resources = cfg.resource_ids();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(cfg.work_dir.join(format!("{id}.log")))?;
    cmd.args(["chaos", "client", "--id", id])
        .args(["--locks", locks_url, "--storage", storage_url])
        .args(["--resources", &resources.join(",")])
        .args(["--seed", &(cfg.seed ^ fxhash(id)).to_string(), "--until-us", &until_us.to_string()])
        .args(["--lease-ms", &format!("{}-{}", cfg.lease_ms.0, cfg.lease_ms.1)])
        .arg("--history")
        .arg(cfg.work_dir.join(format!("{id}.jsonl")))
        .args(cfg.auth.then(|| ["--auth-token-file".into(), auth_token_path(cfg)]).into_iter().flatten())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        // Each client in a process group of its own: the nemesis stops
        // clients with SIGSTOP, and a process group that becomes orphaned
        // while one of its members is stopped gets SIGHUP from the kernel. In
        // the campaign's group that would kill the campaign itself when the
        // shell that started it exits (a backgrounded or detached run).
        .process_group(0)
        .spawn()
        .context("spawn a client process")
}

pub(super) fn auth_token_path(cfg: &CampaignConfig) -> PathBuf {
    cfg.work_dir.join("auth-token")
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// A finished campaign: its merged history (as written to `history`) and the checker's report on it.
pub struct Finished {
    pub records: Vec<Record>,
    pub report: Report,
}

/// Runs the campaign and checks its history.
pub async fn run(cfg: &CampaignConfig) -> anyhow::Result<Finished> {
    std::fs::create_dir_all(&cfg.work_dir).context("create the work directory")?;
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let resources = cfg.resource_ids();
    let own = open_history(cfg, None)?;
    let auth_args = auth_args(cfg)?;
    let mut extra = auth_args.clone();
    if !cfg.fencing {
        extra.push("--no-fencing".to_string());
    }
    let mut lock_args = auth_args.clone();
    if cfg.signed {
        let (key, public) = signing_keys(cfg)?;
        extra.extend(["--verify-keys".to_string(), public]);
        lock_args.extend(["--signing-key".to_string(), key]);
    }
    let mut storage = Server::new(&cfg.exe, "storage", free_addr()?, &cfg.work_dir, extra);
    let lease_sync = if cfg.background_grants { "background" } else { "each-grant" };
    lock_args.extend(["--lease-sync".to_string(), lease_sync.to_string()]);
    let mut locks = Server::new(&cfg.exe, "locks", free_addr()?, &cfg.work_dir, lock_args);
    locks.start().await?;
    storage.start().await?;
    let storage_url = format!("http://{}", storage.addr);
    let storage_proxy = Proxy::start(storage.addr, cfg.seed.wrapping_add(1)).await?;
    let locks_proxy = Proxy::start(locks.addr, cfg.seed.wrapping_add(2)).await?;

    let deadline = Instant::now() + Duration::from_secs(cfg.seconds);
    let until_us = now_us() + cfg.seconds * 1_000_000;
    let ids: Vec<String> = (0..cfg.clients).map(|i| format!("c{i}")).collect();
    let mut children = vec![];
    for id in &ids {
        let (locks_url, storage_url) =
            (format!("http://{}", locks_proxy.addr), format!("http://{}", storage_proxy.addr));
        children.push(spawn_client(Command::new(&cfg.exe), cfg, id, &locks_url, &storage_url, until_us)?);
    }
    let forger = match cfg.forger {
        true => Some(spawn_forger(cfg, &storage_url, deadline)?),
        false => None,
    };
    let targets = Targets {
        storage: &mut storage,
        locks: &mut locks,
        clients: ids.iter().cloned().zip(children.iter().map(|c| c.id())).collect(),
        proxies: vec![("storage", storage_proxy), ("locks", locks_proxy)],
        max_lease_ms: cfg.lease_ms.1,
    };
    let readback = || read_all(&storage_url, &resources, Phase::AfterRestart, &own);
    let fault_result = nemesis::run(targets, &mut rng, &own, deadline, readback).await;

    wait_clients(&mut children).await;
    if let Some(forger) = forger {
        forger.await.context("the forger")??;
    }
    fault_result?;
    read_all(&storage_url, &resources, Phase::Final, &own).await?;
    storage.stop();
    locks.stop();
    drop(own);
    let mut histories = ids;
    histories.extend(cfg.forger.then(|| FORGER.to_string()));
    merge_and_check(cfg, &histories)
}

/// Makes the campaign's signing key with `fencing admin keygen` (a fresh one
/// each run); the paths of the signing and verify-key files.
pub(super) fn signing_keys(cfg: &CampaignConfig) -> anyhow::Result<(String, String)> {
    let key = cfg.work_dir.join("signing.key");
    let public = cfg.work_dir.join("signing.key.pub");
    for path in [&key, &public] {
        let _ = std::fs::remove_file(path);
    }
    let out = Command::new(&cfg.exe).args(["admin", "keygen", "--id", "1", "--out"]).arg(&key).output()?;
    anyhow::ensure!(out.status.success(), "fencing admin keygen: {}", String::from_utf8_lossy(&out.stderr));
    Ok((key.display().to_string(), public.display().to_string()))
}

/// Starts the forger on the campaign's runtime, writing straight to the storage.
pub(super) fn spawn_forger(
    cfg: &CampaignConfig,
    storage_url: &str,
    until: Instant,
) -> anyhow::Result<tokio::task::JoinHandle<anyhow::Result<()>>> {
    let history = HistoryWriter::create(&cfg.work_dir.join(format!("{FORGER}.jsonl")))?;
    let bearer = match cfg.auth {
        true => Some(fencing_api::auth::read_token_file(&auth_token_path(cfg))?),
        false => None,
    };
    let forger = ForgerConfig {
        storage_url: storage_url.to_string(),
        resources: cfg.resource_ids(),
        seed: cfg.seed ^ fxhash(FORGER),
        until,
        bearer,
    };
    Ok(tokio::spawn(forger::run(forger, history)))
}

/// Opens the campaign's own history and writes its header; `replication` is
/// the distributed campaign's database replication.
pub(super) fn open_history(cfg: &CampaignConfig, replication: Option<&str>) -> anyhow::Result<HistoryWriter> {
    let own = HistoryWriter::create(&cfg.work_dir.join("campaign.jsonl"))?;
    let policy = "non_decreasing".to_string();
    own.write(&Record::Header(Header {
        seed: cfg.seed,
        fencing: cfg.fencing,
        policy,
        started_us: now_us(),
        replication: replication.map(str::to_string),
    }))?;
    Ok(own)
}

/// With `cfg.auth`, writes a fresh random token file and returns the servers' arguments for it.
pub(super) fn auth_args(cfg: &CampaignConfig) -> anyhow::Result<Vec<String>> {
    if !cfg.auth {
        return Ok(vec![]);
    }
    let path = auth_token_path(cfg);
    // Owner-only, as a server requires of a token file.
    let _ = std::fs::remove_file(&path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .context("create the auth token file")?;
    std::io::Write::write_all(&mut file, format!("{:032x}\n", rand::random::<u128>()).as_bytes())
        .context("write the auth token file")?;
    Ok(vec!["--auth-token-file".to_string(), path.display().to_string()])
}

/// Clients stop at the deadline; one still inside a request gets its timeouts' worth, then is killed.
pub(super) async fn wait_clients(children: &mut [Child]) {
    let grace = Instant::now() + Duration::from_secs(15);
    for child in children {
        while Instant::now() < grace && matches!(child.try_wait(), Ok(None)) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Merges the campaign's and the clients' histories into `cfg.history`, ordered by time, and checks them.
pub(super) fn merge_and_check(cfg: &CampaignConfig, ids: &[String]) -> anyhow::Result<Finished> {
    let mut records = read_history(&cfg.work_dir.join("campaign.jsonl"))?;
    for id in ids {
        records.extend(read_history(&cfg.work_dir.join(format!("{id}.jsonl")))?);
    }
    records.sort_by_key(|r| (!matches!(r, Record::Header(_)), r.time_us()));
    write_merged(&cfg.history, &records)?;
    let report = check::check(&records);
    Ok(Finished { records, report })
}

fn write_merged(path: &Path, records: &[Record]) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).context("create the history file")?);
    for r in records {
        serde_json::to_writer(&mut out, r)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}
