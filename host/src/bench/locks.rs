//! `fencing bench locks`: acquire+release cycles over loopback HTTP.
//!
//! Each client owns one keep-alive TCP connection and speaks minimal
//! HTTP/1.1 on it (one request in flight per connection, no pipelining), so
//! the generator itself costs little of the shared CPU. A cycle is
//! acquire -> release; the latency recorded is the acquire request's, from
//! write to full response, in microseconds in an HDR histogram. On a shared
//! lock clients pass `wait_ms` and queue FIFO, so the latency includes the
//! wait for the lock.

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
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
        "| backend | locks | clients | acquisitions/s | p50 ms | p99 ms | p999 ms | refused |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        out.push_str(&format!(
            "| {} | {} | {} | {:.0} | {:.3} | {:.3} | {:.3} | {} |\n",
            r.backend,
            r.scenario,
            r.clients,
            r.per_second(),
            r.p50_us as f64 / 1000.0,
            r.p99_us as f64 / 1000.0,
            r.p999_us as f64 / 1000.0,
            r.refused
        ));
    }
    out
}

/// Runs `clients` connections against `addr` for `duration`, each on its own lock or all on one.
pub async fn run(
    addr: SocketAddr,
    backend: &str,
    clients: usize,
    shared: bool,
    lease_ms: u64,
    duration: Duration,
) -> anyhow::Result<Report> {
    let run_id: u64 = rand::random();
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = Vec::new();
    for i in 0..clients {
        let lock = if shared { format!("bench-{run_id:x}-shared") } else { format!("bench-{run_id:x}-{i}") };
        tasks.push(tokio::spawn(client_loop(addr, lock, format!("bench-client-{i}"), shared, lease_ms, end)));
    }
    let mut hist = Histogram::<u64>::new(3).expect("valid sigfig");
    let (mut acquisitions, mut refused) = (0, 0);
    for t in tasks {
        let (h, a, r) = t.await.context("bench client panicked")??;
        hist.add(&h).expect("same bounds");
        acquisitions += a;
        refused += r;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Report {
        backend: backend.to_string(),
        scenario: if shared { "1 shared".into() } else { "distinct".into() },
        clients,
        acquisitions,
        refused,
        seconds,
        p50_us: hist.value_at_quantile(0.50),
        p99_us: hist.value_at_quantile(0.99),
        p999_us: hist.value_at_quantile(0.999),
    })
}

async fn client_loop(
    addr: SocketAddr,
    lock: String,
    client: String,
    shared: bool,
    lease_ms: u64,
    end: Instant,
) -> anyhow::Result<(Histogram<u64>, u64, u64)> {
    let mut conn = Conn::connect(addr).await?;
    let mut hist = Histogram::<u64>::new(3).expect("valid sigfig");
    let (mut acquisitions, mut refused) = (0u64, 0u64);
    let wait = if shared { ",\"wait_ms\":5000" } else { "" };
    let acquire =
        format!("{{\"resource_id\":\"{lock}\",\"client_id\":\"{client}\",\"lease_duration_ms\":{lease_ms}{wait}}}");
    while Instant::now() < end {
        let t0 = Instant::now();
        let (status, body) = conn.post("/v1/locks/acquire", acquire.as_bytes()).await?;
        let us = t0.elapsed().as_micros() as u64;
        match status {
            200 => {
                hist.record(us.max(1)).expect("auto-resizing histogram");
                acquisitions += 1;
                let v: serde_json::Value = serde_json::from_slice(&body).context("decode grant")?;
                let token = v["lock_token"].as_str().context("grant without lock_token")?;
                let release = format!("{{\"resource_id\":\"{lock}\",\"lock_token\":\"{token}\"}}");
                let (st, body) = conn.post("/v1/locks/release", release.as_bytes()).await?;
                if st != 200 {
                    bail!("release answered {st}: {}", String::from_utf8_lossy(&body));
                }
            }
            409 => refused += 1,
            other => bail!("acquire answered {other}: {}", String::from_utf8_lossy(&body)),
        }
    }
    Ok((hist, acquisitions, refused))
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

    async fn post(&mut self, path: &str, body: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut req = format!(
            "POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        req.extend_from_slice(body);
        self.stream.write_all(&req).await?;
        self.read_response().await
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
