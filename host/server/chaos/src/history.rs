//! The history format: one JSON object per line, every request a client made
//! and its outcome, plus nemesis events and server restarts.
//!
//! Record kinds (field `type`):
//! - `header`: the campaign's parameters (seed, whether the storage fenced, policy);
//! - `op`: one request: who (`client`), what (`op`, `resource`, `lock`, `token`,
//!   `sequence`, `lock_token`, `file_path`, `mutation`, `value`), when (`start_us`,
//!   `end_us`: wall-clock microseconds since the Unix epoch, taken just before the
//!   request is sent and just after its answer arrives) and the `outcome`;
//! - `nemesis`: a fault injected or healed (`pause`, `resume`, `kill`, `delay`, `drop`, `heal`);
//! - `restart`: a server process came back after a kill.
//!
//! Outcomes follow the usual history convention: `ok` the request took effect
//! and was acknowledged, `fail` it definitely did not take effect (a 409 with a
//! `reason`), `info` unknown (timeout, dropped connection, 5xx): it may or may
//! not have taken effect, and the checker must allow both.
//!
//! All processes of a campaign run on one machine, so their wall clocks agree;
//! the intervals are recorded conservatively (the real request happened inside
//! `[start_us, end_us]`).

use fencing_api::wire::storage::Mutation;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Mutex;

/// One line of a history file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Header(Header),
    Op(Op),
    Nemesis(NemesisEvent),
    Restart(RestartEvent),
}

/// The campaign's parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub seed: u64,
    /// False when the storage ran with fencing disabled (`--no-fencing`).
    pub fencing: bool,
    /// The storage's admission policy: `non_decreasing` or `strictly_increasing`.
    pub policy: String,
    pub started_us: u64,
    /// The distributed campaign's database replication: `none`, `synchronous`
    /// or `asynchronous` (absent in the local campaign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication: Option<String>,
}

/// Which request an [`Op`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Acquire,
    Renew,
    Release,
    Write,
    Read,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Took effect and was acknowledged.
    Ok,
    /// Definitely did not take effect.
    Fail,
    /// Unknown: may or may not have taken effect.
    Info,
}

/// When a read was made: by a client, after a server restart, or at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    During,
    AfterRestart,
    Final,
}

/// One request and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub client: String,
    pub op: OpKind,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<String>,
    /// The fencing token presented (write) or granted (acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// The lease id granted (acquire) or presented (renew, release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<Mutation>,
    /// Bytes written (write) or read (read; `None` when the file was absent), as UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    pub start_us: u64,
    pub end_us: u64,
    pub outcome: Outcome,
    /// The rejection reason (`stale_token`, ...) or the error for `info`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The fence's high-water mark the server reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_water: Option<u64>,
}

/// What the nemesis did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NemesisKind {
    /// SIGSTOP a client.
    Pause,
    /// SIGCONT a paused client.
    Resume,
    /// SIGKILL a server (detail `leader` or `follower` for an etcd member).
    Kill,
    /// The proxy delays requests.
    Delay,
    /// The proxy drops connections.
    Drop,
    /// The proxy forwards faithfully again, or every network partition is removed (target `net`).
    Heal,
    /// Nodes cut off from each other (target `net`; the detail names the sides).
    Partition,
    /// The database primary (the target) killed and its standby promoted (the
    /// detail names it); ends at the old primary's restart as the new standby.
    Failover,
}

/// A fault injected or healed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NemesisEvent {
    pub at_us: u64,
    pub kind: NemesisKind,
    /// The client id or `storage` / `locks`.
    pub target: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A server process that is serving again after a kill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartEvent {
    pub at_us: u64,
    /// `storage` or `locks`; in the distributed campaign an etcd member (`e1`..),
    /// a database node (`pg1`, `pg2`; [`is_database`]) or a fencing server (`s1`..).
    pub server: String,
}

/// True for a database node of the distributed campaign: `pg1`, `pg2`, or the
/// `postgres` of a history written before the database had a standby.
pub fn is_database(server: &str) -> bool {
    server == "postgres"
        || server.strip_prefix("pg").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl Record {
    /// The time the record is sorted by when histories are merged.
    pub fn time_us(&self) -> u64 {
        match self {
            Record::Header(h) => h.started_us,
            Record::Op(op) => op.start_us,
            Record::Nemesis(n) => n.at_us,
            Record::Restart(r) => r.at_us,
        }
    }
}

/// Microseconds since the Unix epoch, now.
pub fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

/// Why a history file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("reading history: {0}")]
    Io(#[from] std::io::Error),
    #[error("history line {line}: {message}")]
    Parse { line: usize, message: String },
}

/// Appends records to a file, one flushed line each, from many tasks.
///
/// Each record is flushed as it is written, so a client process that is
/// stopped or killed loses at most the record it was writing.
pub struct HistoryWriter {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
}

impl HistoryWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> std::io::Result<HistoryWriter> {
        Ok(HistoryWriter { out: Mutex::new(std::io::BufWriter::new(std::fs::File::create(path)?)) })
    }

    /// Writes one record as one line.
    pub fn write(&self, record: &Record) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.write_all(&line)?;
        out.flush()
    }
}

/// Reads a history file. Blank lines are skipped; a torn last line (a writer
/// killed mid-record) is skipped too, any other malformed line is an error.
pub fn read_history(path: &Path) -> Result<Vec<Record>, HistoryError> {
    let file = std::fs::File::open(path)?;
    let lines: Vec<String> = std::io::BufReader::new(file).lines().collect::<Result<_, _>>()?;
    parse_lines(&lines)
}

/// Parses history lines (see [`read_history`]).
pub fn parse_lines(lines: &[String]) -> Result<Vec<Record>, HistoryError> {
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(_) if i + 1 == lines.len() && !line.ends_with('}') => {}
            Err(e) => return Err(HistoryError::Parse { line: i + 1, message: e.to_string() }),
        }
    }
    Ok(records)
}
