//! The embedded store's write-ahead log: admitted writes made durable with
//! one sequential write per batch, in front of redb, whose own commits then
//! need no fsync until a checkpoint. The write is `O_DIRECT | O_DSYNC`
//! (`RecordFile::direct`: it writes and syncs in one system call, without
//! page-cache writeback), or a `pwrite` and an `fdatasync` where the file
//! system has no direct I/O.
//!
//! Why: a durable redb commit rewrites several B-tree pages scattered over
//! its file and syncs them all; a lone writer waits for that on every write.
//! The log's batch is one contiguous write into blocks that already exist.
//!
//! Invariants:
//! - every record carries a log sequence number (LSN), one more than the
//!   record before it; redb stores, in the same transaction that applies a
//!   record, the LSN it applied up to (`applied`);
//! - a batch is appended and synced *before* its redb transaction commits
//!   (non-durably), and a writer is answered after both: so an acknowledged
//!   write is in the log or in a durable redb commit, and a write that is
//!   not acknowledged because the log failed was never visible;
//! - replay reads the chain of valid records from offset 0 (each LSN one more
//!   than the last) and applies those above `applied`; it stops at the first
//!   record that is torn, fails its checksum, or does not continue the
//!   chain, which is where the last synced batch ends (records after it were
//!   never acknowledged, and records left from before a rewind have lower
//!   LSNs than the chain that overwrote them);
//! - the log is rewound to offset 0 only after a durable redb commit
//!   (a checkpoint) has made every record in it part of redb;
//! - the file is zero-filled ahead of the records, so a batch overwrites
//!   allocated blocks and its `fdatasync` has no file size to commit.

use crate::Mutation;
use fencing_base::records::{self, Reader, RecordFile};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// File name of the log inside the store's directory.
pub const WAL_FILE: &str = "fencing.wal";
/// The file grows by this much at a time, zero-filled.
const PREALLOCATE_BYTES: u64 = 8 << 20;
/// Past this many bytes of records, the store checkpoints and rewinds.
pub const CHECKPOINT_BYTES: u64 = 32 << 20;

/// One admitted write as the log stores it: enough to apply it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub lsn: u64,
    pub resource_id: String,
    pub file_path: String,
    pub mutation: Mutation,
    pub bytes: Vec<u8>,
    /// The fence after the write: lock, high-water, sequence.
    pub lock: String,
    pub high_water: u64,
    pub sequence: Option<u64>,
}

/// A write being logged, borrowed from its request: staged without copying
/// its bytes anywhere but into the batch's one buffer.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub lsn: u64,
    pub resource_id: &'a str,
    pub file_path: &'a str,
    pub mutation: Mutation,
    pub bytes: &'a [u8],
    pub lock: &'a str,
    pub high_water: u64,
    pub sequence: Option<u64>,
}

impl Record {
    /// This record as a [`RecordRef`].
    pub fn borrowed(&self) -> RecordRef<'_> {
        RecordRef {
            lsn: self.lsn,
            resource_id: &self.resource_id,
            file_path: &self.file_path,
            mutation: self.mutation,
            bytes: &self.bytes,
            lock: &self.lock,
            high_water: self.high_water,
            sequence: self.sequence,
        }
    }
}

/// The log; owned by the store's committer thread.
pub struct Wal {
    path: PathBuf,
    file: RecordFile,
    /// The batch being staged.
    buf: Vec<u8>,
}

impl Wal {
    /// Opens (or creates) the log and returns the records that follow
    /// `applied`, in order, for the caller to apply before anything else.
    pub fn open(dir: &Path, applied: u64) -> std::io::Result<(Wal, Vec<Record>)> {
        let path = dir.join(WAL_FILE);
        let mut file = fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let pending = replay(&bytes, applied);
        let file = RecordFile::new(file, 0, bytes.len() as u64, PREALLOCATE_BYTES).direct(&path);
        Ok((Wal { path, file, buf: Vec::new() }, pending))
    }

    /// Bytes of records since the last rewind.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// Starts a batch: drops whatever an abandoned batch staged.
    pub fn begin_batch(&mut self) {
        self.buf.clear();
    }

    /// Adds `r` to the batch [`Wal::append_batch`] writes.
    pub fn stage(&mut self, r: &RecordRef<'_>) {
        encode(r, &mut self.buf);
    }

    /// Writes the staged batch in one write and syncs it; on error nothing
    /// of the batch counts ([`RecordFile::append`]).
    pub fn append_batch(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let result = self.file.append(&self.buf);
        self.buf.clear();
        result
    }

    /// Starts writing at offset 0 again; only after a checkpoint made every record durable in redb.
    pub fn rewind(&mut self) {
        self.file.rewind();
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn mutation_code(m: Mutation) -> u8 {
    match m {
        Mutation::Put => 1,
        Mutation::Append => 2,
        Mutation::Delete => 3,
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// `[len u32][crc32 u32][payload]`, the payload starting with the LSN.
fn encode(r: &RecordRef<'_>, out: &mut Vec<u8>) {
    let start = records::begin(out);
    out.extend_from_slice(&r.lsn.to_le_bytes());
    out.push(mutation_code(r.mutation));
    put_bytes(out, r.resource_id.as_bytes());
    put_bytes(out, r.file_path.as_bytes());
    put_bytes(out, r.bytes);
    put_bytes(out, r.lock.as_bytes());
    out.extend_from_slice(&r.high_water.to_le_bytes());
    match r.sequence {
        Some(s) => {
            out.push(1);
            out.extend_from_slice(&s.to_le_bytes());
        }
        None => out.push(0),
    }
    records::finish(out, start);
}

/// The records after `applied` in the chain that starts at offset 0 (each
/// record's LSN one more than the one before; those at or below `applied`
/// are in redb already).
fn replay(bytes: &[u8], applied: u64) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut previous: Option<u64> = None;
    while let Some(payload) = records::payload_at(bytes, at) {
        let Some(r) = decode(payload) else { break };
        if previous.is_some_and(|p| r.lsn != p + 1) {
            break;
        }
        previous = Some(r.lsn);
        if r.lsn > applied {
            if out.is_empty() && r.lsn != applied + 1 {
                // A gap after what redb holds: nothing past it can be applied in order.
                tracing::error!(applied, found = r.lsn, "write-ahead log does not continue the store; not replayed");
                break;
            }
            out.push(r);
        }
        at += 8 + payload.len();
    }
    out
}

fn decode(p: &[u8]) -> Option<Record> {
    let mut r = Reader(p);
    let lsn = r.u64()?;
    let mutation = match r.u8()? {
        1 => Mutation::Put,
        2 => Mutation::Append,
        3 => Mutation::Delete,
        _ => return None,
    };
    let resource_id = String::from_utf8(r.bytes32()?.to_vec()).ok()?;
    let file_path = String::from_utf8(r.bytes32()?.to_vec()).ok()?;
    let bytes = r.bytes32()?.to_vec();
    let lock = String::from_utf8(r.bytes32()?.to_vec()).ok()?;
    let high_water = r.u64()?;
    let sequence = match r.u8()? {
        0 => None,
        1 => Some(r.u64()?),
        _ => return None,
    };
    r.done().then_some(Record { lsn, resource_id, file_path, mutation, bytes, lock, high_water, sequence })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lsn: u64, bytes: &[u8]) -> Record {
        Record {
            lsn,
            resource_id: "r".into(),
            file_path: "/f".into(),
            mutation: Mutation::Append,
            bytes: bytes.to_vec(),
            lock: "r".into(),
            high_water: lsn,
            sequence: lsn.is_multiple_of(2).then_some(lsn),
        }
    }

    fn append(wal: &mut Wal, records: &[Record]) {
        wal.begin_batch();
        for r in records {
            wal.stage(&r.borrowed());
        }
        wal.append_batch().unwrap();
    }

    #[test]
    fn replay_follows_the_chain_from_applied_and_stops_at_a_tear_or_an_old_record() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, pending) = Wal::open(dir.path(), 0).unwrap();
        assert!(pending.is_empty());
        append(&mut wal, &[rec(1, b"a"), rec(2, b"bb")]);
        append(&mut wal, &[rec(3, b"ccc")]);
        drop(wal);
        assert_eq!(Wal::open(dir.path(), 0).unwrap().1, vec![rec(1, b"a"), rec(2, b"bb"), rec(3, b"ccc")]);
        assert_eq!(Wal::open(dir.path(), 2).unwrap().1, vec![rec(3, b"ccc")]);
        // After a checkpoint at 3 and a rewind, a shorter new record leaves old ones behind it: ignored.
        let (mut wal, _) = Wal::open(dir.path(), 3).unwrap();
        append(&mut wal, &[rec(4, b"d")]);
        drop(wal);
        assert_eq!(Wal::open(dir.path(), 3).unwrap().1, vec![rec(4, b"d")]);
        assert!(Wal::open(dir.path(), 4).unwrap().1.is_empty());
        // A torn record ends the chain.
        let path = dir.path().join(WAL_FILE);
        let mut bytes = fs::read(&path).unwrap();
        bytes[10] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert!(Wal::open(dir.path(), 3).unwrap().1.is_empty());
    }
}
