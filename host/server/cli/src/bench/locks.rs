//! `fencing bench locks`: acquire+release cycles over loopback HTTP.
//!
//! Clients share keep-alive TCP connections, `pipeline` clients to a
//! connection, and the generator speaks minimal HTTP/1.1 on raw sockets so it
//! costs little of the shared CPU. With `pipeline` 1 each client has its own
//! connection and one request in flight. With `pipeline` K the K clients of a
//! connection send their acquires in one write (HTTP/1.1 pipelining; the
//! server answers in order), read the K answers, then send the releases of
//! those granted in one write: K cycles for the syscalls and wake-ups of one.
//!
//! A cycle is acquire -> release; the latency recorded is each acquire's,
//! from the write that carried it to its full response, in microseconds in an
//! HDR histogram. On a shared lock clients pass `wait_ms` and queue FIFO, so
//! the latency includes the wait for the lock; pipelining is refused there,
//! because a waiting acquire would hold up, on the same connection, the
//! release that frees the lock.

use anyhow::{Context, bail, ensure};
use hdrhistogram::Histogram;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One scenario's result.
#[derive(Debug, Clone)]
pub struct Report {
    pub backend: String,
    pub scenario: String,
    pub clients: usize,
    /// Clients per connection (requests pipelined together).
    pub pipeline: usize,
    pub acquisitions: u64,
    pub refused: u64,
    pub seconds: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
}

impl Report {
    pub fn per_second(&self) -> f64 {
        self.acquisitions as f64 / self.seconds
    }
}

/// Markdown table of reports.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::from(
        "| backend | locks | clients | pipeline | acquisitions/s | p50 ms | p99 ms | p999 ms | refused |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} |\n",
            r.backend,
            r.scenario,
            r.clients,
            r.pipeline,
            r.per_second(),
            r.p50_us as f64 / 1000.0,
            r.p99_us as f64 / 1000.0,
            r.p999_us as f64 / 1000.0,
            r.refused
        ));
    }
    out
}

/// One scenario: how many clients, on which locks, how they share connections.
#[derive(Debug, Clone, Copy)]
pub struct Scenario {
    pub clients: usize,
    /// All clients contend for one lock (with `wait_ms`) instead of one lock each.
    pub shared: bool,
    /// Clients per connection; 1 means no pipelining.
    pub pipeline: usize,
    pub lease_ms: u64,
    pub duration: Duration,
}

/// Runs `scenario` against `addr` and reports it under `backend`.
pub async fn run(addr: SocketAddr, backend: &str, scenario: Scenario) -> anyhow::Result<Report> {
    let Scenario { clients, shared, pipeline, lease_ms, duration } = scenario;
    ensure!(clients >= 1 && pipeline >= 1, "clients and pipeline must be at least 1");
    ensure!(!shared || pipeline == 1, "a shared lock cannot be pipelined: a waiting acquire would block the release");
    let run_id: u64 = rand::random();
    let wait = if shared { ",\"wait_ms\":5000" } else { "" };
    let requests: Vec<Client> = (0..clients)
        .map(|i| {
            let lock = if shared { format!("bench-{run_id:x}-shared") } else { format!("bench-{run_id:x}-{i}") };
            let body = format!(
                "{{\"resource_id\":\"{lock}\",\"client_id\":\"bench-client-{i}\",\"lease_duration_ms\":{lease_ms}{wait}}}"
            );
            Client { acquire: request("/v1/locks/acquire", body.as_bytes()), lock }
        })
        .collect();
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = Vec::new();
    let mut requests = requests.into_iter().peekable();
    while requests.peek().is_some() {
        let group: Vec<Client> = requests.by_ref().take(pipeline).collect();
        tasks.push(tokio::spawn(connection_loop(addr, group, end)));
    }
    let mut hist = Histogram::<u64>::new(3).expect("valid sigfig");
    let (mut acquisitions, mut refused) = (0, 0);
    for t in tasks {
        let (h, a, r) = t.await.context("bench connection panicked")??;
        hist.add(&h).expect("same bounds");
        acquisitions += a;
        refused += r;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Report {
        backend: backend.to_string(),
        scenario: if shared { "1 shared".into() } else { "distinct".into() },
        clients,
        pipeline,
        acquisitions,
        refused,
        seconds,
        p50_us: hist.value_at_quantile(0.50),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
    })
}

/// A client's lock and its ready-made acquire request.
struct Client {
    lock: String,
    acquire: Vec<u8>,
}

/// The part of a grant the generator needs.
#[derive(Deserialize)]
struct Grant<'a> {
    #[serde(borrow)]
    lock_token: &'a str,
}

/// Drives the clients of one connection until `end`: all acquires in one
/// write, their answers in order, then the releases of the granted ones.
async fn connection_loop(
    addr: SocketAddr,
    clients: Vec<Client>,
    end: Instant,
) -> anyhow::Result<(Histogram<u64>, u64, u64)> {
    let mut conn = Conn::connect(addr).await?;
    let mut hist = Histogram::<u64>::new(3).expect("valid sigfig");
    let (mut acquisitions, mut refused) = (0u64, 0u64);
    let acquires: Vec<u8> = clients.iter().flat_map(|c| c.acquire.iter().copied()).collect();
    let mut releases = Vec::new();
    while Instant::now() < end {
        let t0 = Instant::now();
        conn.stream.write_all(&acquires).await?;
        releases.clear();
        let mut granted = 0;
        for client in &clients {
            let (status, body) = conn.read_response().await?;
            let us = t0.elapsed().as_micros() as u64;
            match status {
                200 => {
                    hist.record(us.max(1)).expect("auto-resizing histogram");
                    acquisitions += 1;
                    let grant: Grant = serde_json::from_slice(&body).context("decode grant")?;
                    let body =
                        format!("{{\"resource_id\":\"{}\",\"lock_token\":\"{}\"}}", client.lock, grant.lock_token);
                    releases.extend_from_slice(&request("/v1/locks/release", body.as_bytes()));
                    granted += 1;
                }
                409 => refused += 1,
                other => bail!("acquire answered {other}: {}", String::from_utf8_lossy(&body)),
            }
        }
        if granted > 0 {
            conn.stream.write_all(&releases).await?;
            for _ in 0..granted {
                let (status, body) = conn.read_response().await?;
                if status != 200 {
                    bail!("release answered {status}: {}", String::from_utf8_lossy(&body));
                }
            }
        }
    }
    Ok((hist, acquisitions, refused))
}

/// A complete HTTP/1.1 POST of a JSON `body` to `path`.
fn request(path: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

/// One keep-alive HTTP/1.1 connection.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("connect {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, buf: Vec::with_capacity(4096) })
    }

    async fn read_response(&mut self) -> anyhow::Result<(u16, Vec<u8>)> {
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = std::str::from_utf8(&self.buf[..end]).context("response head is not UTF-8")?;
                let status: u16 = head.get(9..12).and_then(|s| s.parse().ok()).context("bad status line")?;
                let len = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse::<usize>().ok())?
                    })
                    .context("response without content-length")?;
                let total = end + 4 + len;
                while self.buf.len() < total {
                    self.fill().await?;
                }
                let body = self.buf[end + 4..total].to_vec();
                self.buf.drain(..total);
                return Ok((status, body));
            }
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> anyhow::Result<()> {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            bail!("server closed the connection");
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
