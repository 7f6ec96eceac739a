//! The lease journal's records and their replay.
//!
//! A record is `[len u32][crc32 u32][payload]` (`crate::records`); the
//! payload starts with its kind:
//! - `HOLD`, `RENEW`, `RELEASE`: a [`Change`] of one lock;
//! - `BOOT`: the boot id of the machine that wrote the file (empty when it
//!   is not known), first in every file the service writes: a file that
//!   does not begin with it is not a lease journal, or not a whole one;
//! - `BOUND`: no grant answered ahead of its sync after this record (and
//!   before the next `BOUND`) had a longer lease than this (background
//!   grants; see `mod.rs`);
//! - `WAIT`: no lock this file does not hold may be granted until this many
//!   milliseconds have passed since the service started (a start that had
//!   to wait out leases it could not see, written with the file so a
//!   restart during the wait waits again); `WAIT 0` once the wait ran out.
//!   The last one read counts;
//! - `CLOSED`: the service stopped cleanly; last in the file, and synced.
//!
//! Whole: every file the service writes is zero-filled to a whole number of
//! `PREALLOCATE_BYTES` and begins with `BOOT`, and no record runs past its
//! end. A file that is empty, of another length, that begins otherwise, or
//! ends inside a record ([`NotWhole`]) was cut short, emptied or
//! overwritten: it cannot say which leases are held, and replay refuses it
//! rather than read it as "no leases".

use super::{Change, JournalError, LeaseRecord, PREALLOCATE_BYTES, io_error};
use crate::records::{self, Reader};
use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

const HOLD: u8 = 1;
const RENEW: u8 = 2;
const RELEASE: u8 = 3;
const BOOT: u8 = 4;
const BOUND: u8 = 5;
const CLOSED: u8 = 6;
const WAIT: u8 = 7;

/// One decoded record.
enum Entry {
    Change(Change),
    Boot(String),
    Bound(u64),
    Wait(u64),
    Closed,
}

/// What a journal file holds at its end (or at its first torn record).
#[derive(Debug, Default)]
pub(super) struct Replayed {
    pub leases: Vec<LeaseRecord>,
    /// The boot id of the machine that wrote the file, if it recorded one.
    pub boot: Option<String>,
    /// The longest lease a grant answered ahead of its sync, and lost, may
    /// have had: the last `BOUND` read (grants answered ahead before it
    /// precede it, so they were read too).
    pub bound_ms: u64,
    /// The service stopped cleanly: everything it answered is in the file.
    pub closed: bool,
    /// The last `WAIT`: how long a start must wait before granting a lock
    /// the file does not hold, whatever the boot.
    pub wait_ms: u64,
}

/// Why a journal file does not read back whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NotWhole(pub String);

impl Replayed {
    /// How long every lock the file does not hold must wait before it is
    /// granted: grants answered ahead of their sync may have been lost only
    /// if the machine restarted since the file was written (the kernel's
    /// page cache keeps what a killed process wrote), and then only leases of
    /// at most `bound_ms` can be running.
    pub fn grace_ms(&self, current_boot: Option<&str>) -> u64 {
        let same_machine_run = self.boot.is_some() && self.boot.as_deref() == current_boot;
        let lost_grants = if self.closed || same_machine_run { 0 } else { self.bound_ms };
        lost_grants.max(self.wait_ms)
    }
}

pub(super) fn record_len(r: &LeaseRecord) -> usize {
    8 + 1 + 2 + r.name.len() + 16 + 8 + 8 + 2 + r.client_id.len()
}

pub(super) fn encode(change: &Change, out: &mut Vec<u8>) {
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

/// A `BOOT` record; the id is the kernel's (a UUID), cut to fit a u16
/// length, or empty when unknown.
pub(super) fn encode_boot(boot: &str, out: &mut Vec<u8>) {
    let start = records::begin(out);
    out.push(BOOT);
    put_str(out, &boot[..boot.floor_char_boundary(1024)]);
    records::finish(out, start);
}

pub(super) fn encode_bound(ms: u64, out: &mut Vec<u8>) {
    let start = records::begin(out);
    out.push(BOUND);
    out.extend_from_slice(&ms.to_le_bytes());
    records::finish(out, start);
}

pub(super) fn encode_wait(ms: u64, out: &mut Vec<u8>) {
    let start = records::begin(out);
    out.push(WAIT);
    out.extend_from_slice(&ms.to_le_bytes());
    records::finish(out, start);
}

pub(super) fn encode_closed(out: &mut Vec<u8>) {
    let start = records::begin(out);
    out.push(CLOSED);
    records::finish(out, start);
}

/// Names are at most 256 characters, so 1,024 bytes (validated before they reach the service): a u16 length holds them.
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Reads the journal: `Ok(None)` when there is no file. A record that
/// passes its checksum but does not decode is corruption, not a torn write,
/// and stops the service; so does a file that is not whole (module docs).
pub(super) fn replay(path: &Path) -> Result<Option<Replayed>, JournalError> {
    let mut bytes = Vec::new();
    match fs::File::open(path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| io_error(path, &e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(path, &e)),
    };
    let not_whole = |NotWhole(problem)| JournalError::NotWhole { path: path.to_path_buf(), problem };
    whole(&bytes).map_err(not_whole)?;
    let mut live: HashMap<Arc<str>, LeaseRecord> = HashMap::new();
    let mut out = Replayed::default();
    let mut at = 0usize;
    while let Some(payload) = records::payload_at(&bytes, at) {
        let entry = decode(payload).ok_or_else(|| JournalError::Corrupt {
            path: path.to_path_buf(),
            offset: at as u64,
            detail: "a record with a valid checksum does not decode".into(),
        })?;
        if at == 0 && !matches!(entry, Entry::Boot(_)) {
            return Err(not_whole(NotWhole(BEGINS_OTHERWISE.into())));
        }
        out.closed = matches!(entry, Entry::Closed);
        match entry {
            Entry::Change(Change::Hold(r)) => {
                live.insert(r.name.clone(), r);
            }
            Entry::Change(Change::Renew { .. }) | Entry::Closed => {}
            Entry::Change(Change::Release { name, lease }) => {
                if live.get(&name).is_some_and(|r| r.lease == lease) {
                    live.remove(&name);
                }
            }
            Entry::Boot(id) => out.boot = Some(id).filter(|id| !id.is_empty()),
            Entry::Bound(ms) => out.bound_ms = ms,
            Entry::Wait(ms) => out.wait_ms = ms,
        }
        at += 8 + payload.len();
    }
    if at == 0 {
        return Err(not_whole(NotWhole(BEGINS_OTHERWISE.into())));
    }
    if let Some(header) = bytes.get(at..at + 8) {
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
        if len > 0 && at + 8 + len > bytes.len() {
            return Err(not_whole(NotWhole(format!(
                "ends inside a record (at byte {at}, {len} bytes long, past the file's end): cut short"
            ))));
        }
    }
    if bytes[at..].iter().any(|&b| b != 0) {
        tracing::warn!(path = %path.display(), dropped = bytes.len() - at, "lease journal ends in an unsynced batch; dropping it");
    }
    out.leases = live.into_values().collect();
    Ok(Some(out))
}

const BEGINS_OTHERWISE: &str = "does not begin with the record every lease journal begins with (it was emptied, \
     overwritten, or is not a lease journal)";

/// Whether `bytes` has the shape of a file the service wrote (module docs).
fn whole(bytes: &[u8]) -> Result<(), NotWhole> {
    if bytes.is_empty() {
        return Err(NotWhole("is empty (0 bytes): it was emptied or never written".into()));
    }
    if !(bytes.len() as u64).is_multiple_of(PREALLOCATE_BYTES) {
        return Err(NotWhole(format!(
            "is {} bytes, not a whole number of its {} MiB blocks: it was cut short or written by something else",
            bytes.len(),
            PREALLOCATE_BYTES >> 20
        )));
    }
    Ok(())
}

fn decode(p: &[u8]) -> Option<Entry> {
    let mut r = Reader(p);
    let kind = r.u8()?;
    let entry = match kind {
        BOOT => Entry::Boot(r.str16()?.to_string()),
        BOUND => Entry::Bound(r.u64()?),
        WAIT => Entry::Wait(r.u64()?),
        CLOSED => Entry::Closed,
        HOLD | RENEW | RELEASE => {
            let name: Arc<str> = r.str16()?.into();
            let lease = r.u128()?;
            Entry::Change(match kind {
                HOLD => {
                    let token = r.u64()?;
                    let lease_ms = r.u64()?;
                    let client_id = r.str16()?.to_string();
                    Change::Hold(LeaseRecord { name, lease, client_id, token, lease_ms })
                }
                RENEW => Change::Renew { name, lease, lease_ms: r.u64()? },
                _ => Change::Release { name, lease },
            })
        }
        _ => return None,
    };
    r.done().then_some(entry)
}
