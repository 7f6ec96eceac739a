//! `fencing demo`: the GC-pause story with real processes, narrated.
//!
//! The demo starts `fencing serve` (embedded locks and fenced storage) on a
//! free loopback port with a temporary data directory, then:
//! 1. client 1 (a child process) acquires the lock, reads its token and is
//!    paused with SIGSTOP before it writes (its write is "in flight");
//! 2. the lease expires on the lock service's monotonic clock;
//! 3. client 2 (another process) acquires the lock (token N+1) and writes;
//! 4. client 1 is resumed with SIGCONT and sends its write with token N;
//! 5. the storage rejects it (409 `stale_token`): the data is client 2's.
//!
//! Then the same run against a storage that does not check tokens (a second
//! `fencing serve --role storage --no-fencing`, same API): client 1's stale
//! write lands and silently replaces client 2's data. Clients are
//! `fencing demo client ...` processes.
//!
//! Each run is also kept as a history in the campaign's format and judged by
//! the same checker. `--report DIR` writes `DIR/demo.html`, the runs side by
//! side as the story they tell ([`page`]), and each run's history
//! (`DIR/fenced.jsonl`, `DIR/unfenced.jsonl`: `fencing chaos check FILE
//! --report` draws one on the campaign's page).
//!
//! # Layout
//! - this file: the runs, the client processes, the report's files;
//! - [`story`]: a run's records read as the story (leases, pause, writes, what survived);
//! - [`page`]: the story drawn.

mod page;
mod story;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use fencing_api::client::locks::LockClient;
use fencing_api::client::storage::{StorageClient, Write};
use fencing_api::wire::locks::AcquireRequest;
use fencing_api::wire::locks::Acquired;
use fencing_api::wire::storage::Mutation;
use fencing_chaos::client::new_op;
use fencing_chaos::history::{
    Header, HistoryWriter, NemesisEvent, NemesisKind, Op, OpKind, Outcome, Phase, Record, now_us,
};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

const RESOURCE: &str = "storage:customer-orders-bucket";
const FILE: &str = "/uploads/orders.csv";

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Lease duration of both clients.
    #[arg(long, default_value_t = 1000)]
    lease_ms: u64,
    /// Which runs to show.
    #[arg(long, value_enum, default_value_t = Runs::Both)]
    only: Runs,
    /// Write DIR/demo.html: both runs side by side, each client's lease with its token on a time
    /// axis, the pause, every write with the storage's answer, and the data that survived; and
    /// each run's history (DIR/fenced.jsonl, DIR/unfenced.jsonl).
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    #[command(subcommand)]
    client: Option<DemoClient>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Runs {
    Both,
    Fenced,
    Unfenced,
}

#[derive(Debug, Subcommand)]
enum DemoClient {
    /// One demo client: acquire, optionally pause point, write, print JSON lines.
    #[command(hide = true)]
    Client {
        #[arg(long)]
        locks: String,
        #[arg(long)]
        storage: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        lease_ms: u64,
        /// Time between reading the token and writing (the window in which the demo pauses it).
        #[arg(long, default_value_t = 0)]
        think_ms: u64,
    },
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Runtime::new().context("start runtime")?;
    if let Some(DemoClient::Client { locks, storage, name, lease_ms, think_ms }) = args.client {
        return rt.block_on(client(locks, storage, name, lease_ms, think_ms));
    }
    let dir = std::env::temp_dir().join(format!("fencing-demo-{:x}", rand::random::<u64>()));
    println!("== fencing demo: a client paused past its lease (the GC-pause scenario) ==");
    let mut servers = Vec::new();
    let result = rt.block_on(async {
        let (base, server) = serve(&dir.join("fenced"), &["--role", "all"]).await?;
        servers.push(server);
        println!("`fencing serve` on {base}: embedded locks and fenced storage, data in {}", dir.display());
        let mut ok = true;
        let mut runs = vec![];
        if args.only != Runs::Unfenced {
            let title = "run 1: storage checks fencing tokens";
            println!("\n-- {title} --");
            let (passed, history) = scenario(&base, &base, "fenced", args.lease_ms).await?;
            ok &= passed;
            runs.push((title, history));
        }
        if args.only != Runs::Fenced {
            let title = "run 2: the same, storage without fencing (`fencing serve --role storage --no-fencing`)";
            println!("\n-- {title} --");
            let (naive, server) = serve(&dir.join("unfenced"), &["--role", "storage", "--no-fencing"]).await?;
            servers.push(server);
            let (passed, history) = scenario(&base, &naive, "unfenced", args.lease_ms).await?;
            ok &= passed;
            runs.push((title, history));
        }
        if let Some(report_dir) = &args.report {
            let path = write_report(report_dir, &runs, args.lease_ms)
                .with_context(|| format!("write the report to {}", report_dir.display()))?;
            println!("\nboth runs drawn: {}", path.display());
        }
        Ok::<bool, anyhow::Error>(ok)
    });
    for mut server in servers {
        let _ = server.kill();
        let _ = server.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(if result? { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Writes `dir/demo.html` and each run's history; the page's path.
fn write_report(dir: &Path, runs: &[(&str, Vec<Record>)], lease_ms: u64) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut stories = Vec::new();
    for (_, records) in runs {
        let story = story::Story::of(records, lease_ms);
        let history = dir.join(if story.fenced { "fenced.jsonl" } else { "unfenced.jsonl" });
        let out = HistoryWriter::create(&history).with_context(|| format!("create {}", history.display()))?;
        for r in records {
            out.write(r)?;
        }
        stories.push(story);
    }
    let columns: Vec<page::Column> = stories
        .iter()
        .map(|story| page::Column {
            title: if story.fenced { "The storage checks fencing tokens" } else { "The storage without fencing" },
            story,
        })
        .collect();
    let path = dir.join(page::PAGE);
    std::fs::write(&path, page::render("fencing demo: a client paused past its lease", &columns))?;
    Ok(path)
}

/// Starts `fencing serve` with `args` on a free loopback port and data in
/// `dir`; its base URL once it answers.
async fn serve(dir: &Path, args: &[&str]) -> anyhow::Result<(String, Child)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let server = Command::new(std::env::current_exe()?)
        .arg("serve")
        .args(args)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start fencing serve")?;
    wait_up(&base).await?;
    Ok((base, server))
}

async fn wait_up(base: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while reqwest::get(format!("{base}/metrics")).await.is_err() {
        if Instant::now() > deadline {
            bail!("fencing serve did not start");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Runs the story once: true when the outcome is the expected one for the
/// mode, and the run as a history (the same records `fencing chaos` keeps).
async fn scenario(locks: &str, storage: &str, mode: &str, lease_ms: u64) -> anyhow::Result<(bool, Vec<Record>)> {
    let resource = format!("{RESOURCE}-{mode}");
    let fencing = mode == "fenced";
    let policy = "non_decreasing".to_string();
    let mut history =
        vec![Record::Header(Header { seed: 0, fencing, policy, started_us: now_us(), replication: None })];
    let nemesis = |kind, detail: Option<String>| {
        Record::Nemesis(NemesisEvent { at_us: now_us(), kind, target: "client-1".into(), detail })
    };
    let exe = std::env::current_exe()?;
    let spawn = |name: &str, think: u64| -> anyhow::Result<Child> {
        Command::new(&exe)
            .args(["demo", "client", "--locks", locks, "--storage", storage, "--name", name])
            .args(["--lease-ms", &lease_ms.to_string(), "--think-ms", &think.to_string()])
            .env("FENCING_DEMO_RESOURCE", &resource)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("start demo client")
    };
    let mut c1 = spawn("client-1", 400)?;
    let mut c1_out = BufReader::new(c1.stdout.take().expect("piped"));
    let acquired = read_event(&mut c1_out)?;
    let t1 = acquired["fencing_token"].as_u64().context("client 1 token")?;
    let pid = Pid::from_raw(c1.id() as i32);
    kill(pid, Signal::SIGSTOP).context("SIGSTOP client 1")?;
    history.push(event_op("client-1", &resource, &acquired));
    history.push(nemesis(NemesisKind::Pause, Some(format!("{}ms", lease_ms + 300))));
    println!("1. client-1 (pid {pid}) acquired the lock: fencing_token={t1}, lease {lease_ms} ms");
    println!("2. client-1 paused with SIGSTOP before its write (a stop-the-world pause)");
    tokio::time::sleep(Duration::from_millis(lease_ms + 300)).await;
    println!("3. {} ms later its lease has expired on the lock service's monotonic clock", lease_ms + 300);
    let c2 = spawn("client-2", 0)?;
    let out = tokio::task::spawn_blocking(move || c2.wait_with_output()).await??;
    let events: Vec<Value> =
        out.stdout.lines().map_while(Result::ok).filter_map(|l| serde_json::from_str(&l).ok()).collect();
    let t2 = events.first().and_then(|e| e["fencing_token"].as_u64()).context("client 2 did not acquire")?;
    let w2 = events.get(1).cloned().unwrap_or(Value::Null);
    history.extend(events.iter().map(|e| event_op("client-2", &resource, e)));
    println!("4. client-2 acquired the lock: fencing_token={t2}; its write: HTTP {} {}", w2["status"], w2["body"]);
    if w2["status"] == 404 {
        let _ = kill(pid, Signal::SIGKILL);
        let _ = c1.wait();
        bail!("{storage} has no /v1/storage/write: this build of `fencing serve` lacks the storage engine");
    }
    kill(pid, Signal::SIGCONT).context("SIGCONT client 1")?;
    history.push(nemesis(NemesisKind::Resume, None));
    println!("5. client-1 resumed with SIGCONT; it still believes it holds the lock and writes with token {t1}");
    let w1 = read_event(&mut c1_out)?;
    let _ = tokio::task::spawn_blocking(move || c1.wait()).await?;
    history.push(event_op("client-1", &resource, &w1));
    println!("6. client-1's write: HTTP {} {}", w1["status"], w1["body"]);
    let mut final_read =
        Op { phase: Some(Phase::Final), file_path: Some(FILE.into()), ..new_op("reader", OpKind::Read, &resource) };
    let read = StorageClient::new(storage).read(&resource, FILE).await.context("read back the file")?;
    let bytes = read.bytes();
    final_read.end_us = now_us();
    final_read.outcome = Outcome::Ok;
    final_read.value = bytes.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
    let data = bytes.unwrap_or_default();
    history.push(Record::Op(final_read));
    let data = String::from_utf8_lossy(&data).trim().to_string();
    println!("7. final contents of {FILE}: {data:?}");
    let c2_won = data.contains("client-2");
    if mode == "fenced" {
        let rejected = w1["status"] == 409;
        if rejected && c2_won {
            println!("=> the storage rejected token {t1} (it had seen {t2}): client-2's data is intact.");
        } else {
            println!("=> unexpected: the fenced storage did not reject the stale write");
        }
        Ok((rejected && c2_won, history))
    } else {
        if !c2_won {
            println!("=> without fencing the stale write landed: client-2's update is silently lost (corruption).");
        }
        Ok((!c2_won, history))
    }
}

/// A demo client's event (`acquired` or `write`, with its start and end times) as a history operation.
fn event_op(client: &str, resource: &str, e: &Value) -> Record {
    let write = e["event"] == "write";
    let mut op = new_op(client, if write { OpKind::Write } else { OpKind::Acquire }, resource);
    op.start_us = e["start_us"].as_u64().unwrap_or(0);
    op.end_us = e["end_us"].as_u64().unwrap_or(op.start_us);
    op.token = e["fencing_token"].as_u64();
    op.outcome = match e["status"].as_u64() {
        None | Some(200..=299) => Outcome::Ok,
        Some(409) => Outcome::Fail,
        Some(_) => Outcome::Info,
    };
    if write {
        op.file_path = Some(FILE.into());
        op.mutation = Some(Mutation::Put);
        op.value = e["data"].as_str().map(str::to_string);
        op.reason = e["body"]["reason"].as_str().map(str::to_string);
        op.high_water = e["body"]["high_water"].as_u64();
    }
    Record::Op(op)
}

fn read_event(out: &mut impl BufRead) -> anyhow::Result<Value> {
    let mut line = String::new();
    if out.read_line(&mut line)? == 0 {
        bail!("demo client exited early");
    }
    serde_json::from_str(&line).with_context(|| format!("demo client said {line:?}"))
}

/// The client process: acquire, print the grant, think, write, print the storage answer.
async fn client(
    locks: String,
    storage: String,
    name: String,
    lease_ms: u64,
    think_ms: u64,
) -> anyhow::Result<ExitCode> {
    let resource = std::env::var("FENCING_DEMO_RESOURCE").unwrap_or_else(|_| RESOURCE.to_string());
    let req = AcquireRequest {
        resource_id: resource.clone(),
        client_id: name.clone(),
        lease_duration_ms: lease_ms,
        wait_ms: Some(10_000),
        lock_token: None,
    };
    let start_us = now_us();
    let grant = match LockClient::new(locks).acquire(&req).await? {
        Acquired::Granted(g) => g,
        Acquired::Refused(r) => bail!("lock refused: {r:?}"),
    };
    let end_us = now_us();
    println!(
        "{}",
        json!({"event": "acquired", "fencing_token": grant.fencing_token, "start_us": start_us, "end_us": end_us})
    );
    // The token was read; the write is on its way. A pause here is invisible to this process.
    tokio::time::sleep(Duration::from_millis(think_ms)).await;
    let data = format!("order-total=... written by {name} with token {}\n", grant.fencing_token);
    let write = Write {
        resource_id: &resource,
        token: grant.fencing_token,
        file_path: FILE,
        mutation: Mutation::Put,
        bytes: data.as_bytes(),
        lock_id: None,
        sequence: None,
        proof: grant.fencing_proof.as_deref(),
    };
    let start_us = now_us();
    let answer = StorageClient::new(&storage).write(&write).await?;
    let end_us = now_us();
    let token = grant.fencing_token;
    let event = json!({"event": "write", "fencing_token": token, "data": data, "status": answer.status,
        "body": answer.body, "start_us": start_us, "end_us": end_us});
    println!("{event}");
    Ok(ExitCode::SUCCESS)
}
