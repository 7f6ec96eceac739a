//! `fencing bench restart`: how long a restart keeps the lock service away.
//!
//! Starts `fencing serve --role locks` (this executable) on a fresh data
//! directory, has `held` leases granted (one hour each) and one one-hour
//! lease granted and released, then stops the server (SIGKILL or SIGTERM)
//! and starts it again on the same directory. Measured from the moment the
//! new process is spawned: until it listens (its first answer to `GET
//! /metrics`), until the released lock is granted again, and until a
//! restored lease is renewed by its holder. The restored leases are also
//! checked: every one is still held, refused to another client.

use anyhow::{Context, bail, ensure};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What one restart cost.
#[derive(Debug, Clone)]
pub struct RestartReport {
    pub held: usize,
    pub signal: &'static str,
    pub to_listening_ms: f64,
    pub to_first_grant_ms: f64,
    pub to_first_renewal_ms: f64,
}

/// Markdown table of reports.
pub fn table(reports: &[RestartReport]) -> String {
    let mut out = String::from(
        "| leases held | stopped by | spawn to listening ms | to first grant ms | to first renewal ms |\n|---:|---|---:|---:|---:|\n",
    );
    for r in reports {
        let renewal = if r.held == 0 { "n/a".to_string() } else { format!("{:.1}", r.to_first_renewal_ms) };
        out.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {renewal} |\n",
            r.held, r.signal, r.to_listening_ms, r.to_first_grant_ms
        ));
    }
    out
}

struct Server {
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(dir: &Path, port: u16) -> anyhow::Result<Server> {
    let exe = std::env::current_exe().context("find the fencing executable")?;
    let child = Command::new(exe)
        .args(["serve", "--role", "locks", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .env("FENCING_LOG", "error")
        .env_remove("FENCING_AUTH_TOKEN_FILE")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("spawn fencing serve")?;
    Ok(Server { child })
}

async fn post(http: &reqwest::Client, url: String, body: Value) -> anyhow::Result<(u16, Value)> {
    let resp = http.post(&url).json(&body).send().await.with_context(|| format!("POST {url}"))?;
    Ok((resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null)))
}

async fn listening(http: &reqwest::Client, base: &str, server: &mut Server) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if http.get(format!("{base}/metrics")).send().await.is_ok_and(|r| r.status().is_success()) {
            return Ok(());
        }
        if let Some(status) = server.child.try_wait()? {
            bail!("fencing serve exited: {status}");
        }
        ensure!(Instant::now() < deadline, "fencing serve did not listen within 60 s");
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// One restart with `held` leases, stopped by `signal`.
pub async fn run(held: usize, signal: nix::sys::signal::Signal) -> anyhow::Result<RestartReport> {
    let dir = tempfile_dir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder().pool_max_idle_per_host(64).build()?;
    let acquire =
        |lock: String, client: &str| json!({"resource_id": lock, "client_id": client, "lease_duration_ms": 3_600_000});
    let mut server = spawn(&dir, port)?;
    listening(&http, &base, &mut server).await?;
    let mut leases = Vec::with_capacity(held);
    for chunk in (0..held).collect::<Vec<_>>().chunks(64) {
        let calls = chunk
            .iter()
            .map(|i| post(&http, format!("{base}/v1/locks/acquire"), acquire(format!("held-{i}"), "holder")));
        for r in futures::future::join_all(calls).await {
            let (status, grant) = r?;
            ensure!(status == 200, "acquire answered {status}: {grant}");
            leases.push(grant);
        }
    }
    let (status, long) = post(&http, format!("{base}/v1/locks/acquire"), acquire("released".into(), "c")).await?;
    ensure!(status == 200, "acquire answered {status}");
    let release = json!({"resource_id": "released", "lock_token": long["lock_token"]});
    ensure!(post(&http, format!("{base}/v1/locks/release"), release).await?.0 == 200, "release refused");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(server.child.id() as i32), signal)?;
    server.child.wait()?;
    drop(server);

    let spawned = Instant::now();
    let mut server = spawn(&dir, port)?;
    listening(&http, &base, &mut server).await?;
    let to_listening = spawned.elapsed();
    let (status, grant) = post(&http, format!("{base}/v1/locks/acquire"), acquire("released".into(), "c2")).await?;
    ensure!(status == 200, "the released lock after the restart: {status} {grant}");
    let to_first_grant = spawned.elapsed();
    let mut to_first_renewal = Duration::ZERO;
    if let Some(first) = leases.first() {
        let renew = json!({"resource_id": first["resource_id"], "lock_token": first["lock_token"]});
        let (status, body) = post(&http, format!("{base}/v1/locks/renew"), renew).await?;
        ensure!(status == 200, "renewal of a restored lease: {status} {body}");
        to_first_renewal = spawned.elapsed();
    }
    for lease in leases.iter().step_by((held / 100).max(1)) {
        let (status, _) = post(
            &http,
            format!("{base}/v1/locks/acquire"),
            acquire(lease["resource_id"].as_str().unwrap_or_default().into(), "other"),
        )
        .await?;
        ensure!(status == 409, "a restored lease was granted to another client ({status})");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(RestartReport {
        held,
        signal: if signal == nix::sys::signal::Signal::SIGKILL { "kill -9" } else { "SIGTERM" },
        to_listening_ms: ms(to_listening),
        to_first_grant_ms: ms(to_first_grant),
        to_first_renewal_ms: ms(to_first_renewal),
    })
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("fencing-restart-{:x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}
