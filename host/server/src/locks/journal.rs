//! The lease journal: every grant, renewal and release of the embedded lock
//! service, appended to `locks-leases` in the data directory and
//! group-committed by one writer thread.
//!
//! Invariants:
//! - a grant is acknowledged only after the batch that carries it is
//!   written and `fdatasync`ed;
//! - a release is acknowledged once its batch is written to the file, before
//!   that batch's `fdatasync` (which follows at once): the kernel holds it
//!   for a process that is killed, and only a machine that stops before the
//!   sync loses it. A lost release leaves its lease held, by a holder that
//!   gave it up, until one duration after the restart: never a second
//!   holder, because every later grant of the lock follows the release in
//!   the file and is acknowledged only once synced, with the release;
//! - a renewal is written with the next batch but nobody waits for it (a
//!   restored lease is re-armed with its full duration, which outlasts every
//!   renewal, so a lost renewal is harmless);
//! - records of one lock enter the journal in the order the lock's state
//!   changed, because callers append while holding the lock's shard mutex;
//! - a record is `[len u32][crc32 u32][payload]`; replay stops at the first
//!   record that is short or fails its checksum, which can only belong to a
//!   batch that was never synced, hence never acknowledged, and the file is
//!   rewritten without it before anything else is appended;
//! - a failed batch is zeroed in the file ([`RecordFile`]) and every caller
//!   waiting on it gets the error; later batches start again where it
//!   started, so a full disk fails writes while it lasts and never leaves a
//!   torn record in the middle of the file;
//! - the file is rewritten (to a temporary file, synced, renamed, directory
//!   synced) with only the leases still running whenever it has grown to
//!   four times that size, so it stays proportional to the held locks;
//! - the file is zero-filled ahead of the records (4 MiB at a time), so a
//!   batch overwrites allocated blocks; replay stops at a zero length.

use crate::records::{self, Reader, RecordFile};
use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// File name of the journal inside the data directory.
pub const JOURNAL_FILE: &str = "locks-leases";
/// Below this size the journal is never compacted.
const COMPACT_MIN_BYTES: u64 = 4 << 20;
/// The file grows by this much at a time, zero-filled ahead of the records.
const PREALLOCATE_BYTES: u64 = 4 << 20;
/// Most records written in one batch.
const MAX_BATCH: usize = 8192;

const HOLD: u8 = 1;
const RENEW: u8 = 2;
const RELEASE: u8 = 3;

/// A lease as the journal stores it: enough to restore it after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub name: Arc<str>,
    pub lease: u128,
    pub client_id: String,
    pub token: u64,
    pub lease_ms: u64,
}

/// One change of a lock's lease.
#[derive(Debug, Clone)]
pub enum Change {
    /// A grant, or a re-entrant grant that changed the duration.
    Hold(LeaseRecord),
    /// The lease was extended by its duration from now.
    Renew { name: Arc<str>, lease: u128, lease_ms: u64 },
    /// The lease ended by release (or by an undone grant).
    Release { name: Arc<str>, lease: u128 },
}

/// Why the journal could not be read or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum JournalError {
    #[error("lease journal {path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("lease journal {path} is corrupt at byte {offset}: {detail}")]
    Corrupt { path: PathBuf, offset: u64, detail: String },
    #[error("lease journal writer stopped")]
    Stopped,
}

/// Resolves when the change is as durable as its append asked (or failed to become so).
pub type Durable = oneshot::Receiver<Result<(), JournalError>>;

/// How far a batch must get before a change in it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    /// Written to the file: survives this process, not the machine.
    Written,
    /// Written and synced: survives the machine.
    Synced,
}

struct Message {
    change: Change,
    done: Option<(Ack, oneshot::Sender<Result<(), JournalError>>)>,
}

/// The journal's sending side; the writer thread owns the file.
pub struct Journal {
    tx: mpsc::Sender<Message>,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, returning it and the leases
    /// that were held when it was last written. The file is rewritten with
    /// exactly those leases before the writer starts.
    pub fn open(dir: &Path) -> Result<(Journal, Vec<LeaseRecord>), JournalError> {
        let path = dir.join(JOURNAL_FILE);
        let restored = replay(&path)?;
        let now = Instant::now();
        let live: HashMap<Arc<str>, Live> = restored
            .iter()
            .map(|r| (r.name.clone(), Live { expires: now + Duration::from_millis(r.lease_ms), record: r.clone() }))
            .collect();
        let mut writer = Writer { dir: dir.to_path_buf(), path, file: None, live, live_bytes: 0 };
        writer.compact()?;
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("fencing-lease-journal".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| JournalError::Io { path: dir.join(JOURNAL_FILE), message: e.to_string() })?;
        Ok((Journal { tx }, restored))
    }

    /// Appends `change`; the receiver resolves once it is synced.
    pub fn append(&self, change: Change) -> Durable {
        self.send(change, Ack::Synced)
    }

    /// Appends `change`; the receiver resolves once it is written to the
    /// file, ahead of its sync (for releases: see the module's invariants).
    pub fn append_written(&self, change: Change) -> Durable {
        self.send(change, Ack::Written)
    }

    fn send(&self, change: Change, ack: Ack) -> Durable {
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::SendError(m)) = self.tx.send(Message { change, done: Some((ack, done)) }) {
            let _ = m.done.expect("set above").1.send(Err(JournalError::Stopped));
        }
        rx
    }

    /// Appends `change` without waiting for it.
    pub fn append_unacknowledged(&self, change: Change) {
        let _ = self.tx.send(Message { change, done: None });
    }
}

struct Live {
    record: LeaseRecord,
    expires: Instant,
}

struct Writer {
    dir: PathBuf,
    path: PathBuf,
    /// `None` only until the first compaction, in `open`.
    file: Option<RecordFile>,
    /// The leases the journal holds, as replay would restore them; expired ones are dropped at compaction.
    live: HashMap<Arc<str>, Live>,
    /// What `live` takes in the file, were it rewritten now.
    live_bytes: u64,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Message>) {
        let mut batch = Vec::new();
        let mut buf = Vec::new();
        while let Ok(first) = rx.recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            buf.clear();
            for m in &batch {
                encode(&m.change, &mut buf);
            }
            let result = self.write(&buf, || {
                for m in batch.iter_mut() {
                    if let Some((Ack::Written, _)) = m.done {
                        let _ = m.done.take().expect("matched above").1.send(Ok(()));
                    }
                }
            });
            // Answer first: what follows is the compaction's bookkeeping.
            for m in batch.iter_mut() {
                if let Some((_, done)) = m.done.take() {
                    let _ = done.send(result.clone());
                }
            }
            if result.is_ok() {
                let now = Instant::now();
                for m in &batch {
                    self.apply(&m.change, now);
                }
            }
            batch.clear();
            if result.is_ok()
                && self.file.as_ref().is_some_and(|f| f.len() >= COMPACT_MIN_BYTES.max(4 * self.live_bytes))
                && let Err(e) = self.compact()
            {
                tracing::error!(error = %e, "cannot compact the lease journal");
            }
        }
    }

    fn io(&self, e: std::io::Error) -> JournalError {
        JournalError::Io { path: self.path.clone(), message: e.to_string() }
    }

    /// Writes and syncs `buf`, calling `written` between the two.
    fn write(&mut self, buf: &[u8], written: impl FnOnce()) -> Result<(), JournalError> {
        self.file.as_mut().expect("the journal file is open").append_then(buf, written).map_err(|e| self.io(e))
    }

    fn apply(&mut self, change: &Change, now: Instant) {
        match change {
            Change::Hold(r) => {
                let expires = now + Duration::from_millis(r.lease_ms);
                self.live_bytes += record_len(r) as u64;
                if let Some(old) = self.live.insert(r.name.clone(), Live { record: r.clone(), expires }) {
                    self.live_bytes -= record_len(&old.record) as u64;
                }
            }
            Change::Renew { name, lease, lease_ms } => {
                if let Some(l) = self.live.get_mut(name)
                    && l.record.lease == *lease
                {
                    l.expires = now + Duration::from_millis(*lease_ms);
                }
            }
            Change::Release { name, lease } => {
                if self.live.get(name).is_some_and(|l| l.record.lease == *lease) {
                    let old = self.live.remove(name).expect("present");
                    self.live_bytes -= record_len(&old.record) as u64;
                }
            }
        }
    }

    /// Rewrites the journal with the leases still running. A lease the
    /// journal's own clock saw expire is dropped: the service, whose clock
    /// started each lease no later than the journal's, saw it expire first.
    fn compact(&mut self) -> Result<(), JournalError> {
        let now = Instant::now();
        self.live.retain(|_, l| l.expires > now);
        self.live_bytes = self.live.values().map(|l| record_len(&l.record) as u64).sum();
        let mut buf = Vec::with_capacity(self.live_bytes as usize);
        for l in self.live.values() {
            encode(&Change::Hold(l.record.clone()), &mut buf);
        }
        let tmp = self.dir.join(format!("{JOURNAL_FILE}.tmp"));
        let mut f = fs::File::create(&tmp).map_err(|e| self.io(e))?;
        f.write_all(&buf).and_then(|()| f.sync_all()).map_err(|e| self.io(e))?;
        fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        fs::File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| self.io(e))?;
        let file = fs::OpenOptions::new().read(true).write(true).open(&self.path).map_err(|e| self.io(e))?;
        let len = buf.len() as u64;
        let mut file = RecordFile::new(file, len, len, PREALLOCATE_BYTES);
        file.reserve(len + 1).map_err(|e| self.io(e))?;
        self.file = Some(file);
        Ok(())
    }
}

fn record_len(r: &LeaseRecord) -> usize {
    8 + 1 + 2 + r.name.len() + 16 + 8 + 8 + 2 + r.client_id.len()
}

fn encode(change: &Change, out: &mut Vec<u8>) {
    let start = records::begin(out);
    let (kind, name, lease) = match change {
        Change::Hold(r) => (HOLD, &r.name, r.lease),
        Change::Renew { name, lease, .. } => (RENEW, name, *lease),
        Change::Release { name, lease } => (RELEASE, name, *lease),
    };
    out.push(kind);
    put_str(out, name);
    out.extend_from_slice(&lease.to_le_bytes());
    match change {
        Change::Hold(r) => {
            out.extend_from_slice(&r.token.to_le_bytes());
            out.extend_from_slice(&r.lease_ms.to_le_bytes());
            put_str(out, &r.client_id);
        }
        Change::Renew { lease_ms, .. } => out.extend_from_slice(&lease_ms.to_le_bytes()),
        Change::Release { .. } => {}
    }
    records::finish(out, start);
}

/// Names are at most 256 bytes (validated before they reach the service), so a u16 length holds them.
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Reads the journal, returning the leases it holds at its end (or at its
/// first torn record). A record that passes its checksum but does not
/// decode is corruption, not a torn write, and stops the service.
fn replay(path: &Path) -> Result<Vec<LeaseRecord>, JournalError> {
    let mut bytes = Vec::new();
    match fs::File::open(path) {
        Ok(mut f) => f
            .read_to_end(&mut bytes)
            .map_err(|e| JournalError::Io { path: path.to_path_buf(), message: e.to_string() })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(JournalError::Io { path: path.to_path_buf(), message: e.to_string() }),
    };
    let mut live: HashMap<Arc<str>, LeaseRecord> = HashMap::new();
    let mut at = 0usize;
    while let Some(payload) = records::payload_at(&bytes, at) {
        let change = decode(payload).ok_or_else(|| JournalError::Corrupt {
            path: path.to_path_buf(),
            offset: at as u64,
            detail: "a record with a valid checksum does not decode".into(),
        })?;
        match change {
            Change::Hold(r) => {
                live.insert(r.name.clone(), r);
            }
            Change::Renew { .. } => {}
            Change::Release { name, lease } => {
                if live.get(&name).is_some_and(|r| r.lease == lease) {
                    live.remove(&name);
                }
            }
        }
        at += 8 + payload.len();
    }
    if bytes[at..].iter().any(|&b| b != 0) {
        tracing::warn!(path = %path.display(), dropped = bytes.len() - at, "lease journal ends in an unsynced batch; dropping it");
    }
    Ok(live.into_values().collect())
}

fn decode(p: &[u8]) -> Option<Change> {
    let mut r = Reader(p);
    let kind = r.u8()?;
    let name: Arc<str> = r.str16()?.into();
    let lease = r.u128()?;
    let change = match kind {
        HOLD => {
            let token = r.u64()?;
            let lease_ms = r.u64()?;
            let client_id = r.str16()?.to_string();
            Change::Hold(LeaseRecord { name, lease, client_id, token, lease_ms })
        }
        RENEW => Change::Renew { name, lease, lease_ms: r.u64()? },
        RELEASE => Change::Release { name, lease },
        _ => return None,
    };
    r.done().then_some(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, lease: u128, token: u64) -> LeaseRecord {
        LeaseRecord { name: name.into(), lease, client_id: format!("c-{name}"), token, lease_ms: 60_000 }
    }

    /// Where the records of a journal file end (the preallocated zeros start).
    fn records_len(bytes: &[u8]) -> usize {
        let mut at = 0;
        while at + 8 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            if len == 0 {
                break;
            }
            at += 8 + len;
        }
        at
    }

    fn sorted(mut v: Vec<LeaseRecord>) -> Vec<LeaseRecord> {
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    #[tokio::test]
    async fn holds_survive_reopen_and_releases_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let (j, restored) = Journal::open(dir.path()).unwrap();
        assert!(restored.is_empty());
        j.append(Change::Hold(rec("a", 1, 5))).await.unwrap().unwrap();
        j.append(Change::Hold(rec("b", 2, 6))).await.unwrap().unwrap();
        j.append_unacknowledged(Change::Renew { name: "a".into(), lease: 1, lease_ms: 60_000 });
        // A release naming another lease leaves the holder alone.
        j.append(Change::Release { name: "b".into(), lease: 99 }).await.unwrap().unwrap();
        j.append(Change::Release { name: "a".into(), lease: 1 }).await.unwrap().unwrap();
        drop(j);
        std::thread::sleep(Duration::from_millis(50)); // the writer lets go of the file
        let (_, restored) = Journal::open(dir.path()).unwrap();
        assert_eq!(sorted(restored), vec![rec("b", 2, 6)]);
    }

    #[tokio::test]
    async fn a_release_is_in_the_file_when_it_is_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path()).unwrap();
        j.append(Change::Hold(rec("a", 1, 5))).await.unwrap().unwrap();
        j.append(Change::Hold(rec("b", 2, 6))).await.unwrap().unwrap();
        j.append_written(Change::Release { name: "a".into(), lease: 1 }).await.unwrap().unwrap();
        // What a process killed now leaves behind: the file as the kernel has it.
        let copy = tempfile::tempdir().unwrap();
        fs::copy(dir.path().join(JOURNAL_FILE), copy.path().join(JOURNAL_FILE)).unwrap();
        assert_eq!(replay(&copy.path().join(JOURNAL_FILE)).unwrap(), vec![rec("b", 2, 6)]);
    }

    #[tokio::test]
    async fn the_file_is_rewritten_with_the_live_leases_once_it_outgrows_them() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path()).unwrap();
        j.append(Change::Hold(rec("kept", 1, 1))).await.unwrap().unwrap();
        for i in 0..100_000u128 {
            let name: Arc<str> = format!("n{i}").into();
            j.append_unacknowledged(Change::Hold(LeaseRecord { name: name.clone(), ..rec("x", i + 2, 2) }));
            j.append_unacknowledged(Change::Release { name, lease: i + 2 });
        }
        j.append(Change::Renew { name: "kept".into(), lease: 1, lease_ms: 60_000 }).await.unwrap().unwrap();
        // Processed after any rewrite the batches before it caused.
        j.append(Change::Renew { name: "kept".into(), lease: 1, lease_ms: 60_000 }).await.unwrap().unwrap();
        let len = records_len(&fs::read(dir.path().join(JOURNAL_FILE)).unwrap());
        assert!(len < COMPACT_MIN_BYTES as usize, "{len} bytes of records after 200,000 appended");
        drop(j);
        std::thread::sleep(Duration::from_millis(50));
        let (_, restored) = Journal::open(dir.path()).unwrap();
        assert_eq!(restored, vec![rec("kept", 1, 1)]);
    }

    #[test]
    fn a_torn_tail_is_dropped_and_corruption_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = Vec::new();
        encode(&Change::Hold(rec("a", 1, 5)), &mut bytes);
        let good = bytes.len();
        encode(&Change::Hold(rec("b", 2, 6)), &mut bytes);
        fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let (_, restored) = Journal::open(dir.path()).unwrap();
        assert_eq!(restored, vec![rec("a", 1, 5)]);
        // The rewrite dropped the torn record: zeros follow the good one.
        let rewritten = fs::read(&path).unwrap();
        assert_eq!(records_len(&rewritten), good);
        assert!(rewritten[good..].iter().all(|&b| b == 0) && rewritten.len() > good);
        // A checksummed record of an unknown kind is corruption.
        let mut bad = Vec::new();
        encode(&Change::Release { name: "a".into(), lease: 1 }, &mut bad);
        bad[8] = 77;
        let crc = crc32fast::hash(&bad[8..]);
        bad[4..8].copy_from_slice(&crc.to_le_bytes());
        fs::write(&path, &bad).unwrap();
        assert!(matches!(Journal::open(dir.path()), Err(JournalError::Corrupt { offset: 0, .. })));
    }
}
