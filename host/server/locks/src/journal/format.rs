//! The lease journal's records and their replay.
//!
//! A record is `[len u32][crc32 u32][payload]` (`crate::records`); the
//! payload starts with its kind:
//! - `HOLD`, `RENEW`, `RELEASE`: a [`Change`] of one lock;
//! - `BOOT`: the boot id of the machine that wrote the file, first in every
//!   rewritten file;
//! - `BOUND`: no grant answered ahead of its sync after this record (and
//!   before the next `BOUND`) had a longer lease than this (background
//!   grants; see `mod.rs`);
//! - `CLOSED`: the service stopped cleanly; last in the file, and synced.

use super::{Change, JournalError, LeaseRecord, io_error};
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

/// One decoded record.
enum Entry {
    Change(Change),
    Boot(String),
    Bound(u64),
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
}

impl Replayed {
    /// How long every lock the file does not hold must wait before it is
    /// granted: grants answered ahead of their sync may have been lost only
    /// if the machine restarted since the file was written (the kernel's
    /// page cache keeps what a killed process wrote), and then only leases of
    /// at most `bound_ms` can be running.
    pub fn grace_ms(&self, current_boot: Option<&str>) -> u64 {
        let same_machine_run = self.boot.is_some() && self.boot.as_deref() == current_boot;
        if self.closed || same_machine_run { 0 } else { self.bound_ms }
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

/// A `BOOT` record; the id is the kernel's (a UUID), cut to fit a u16 length.
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

/// Reads the journal. A record that passes its checksum but does not
/// decode is corruption, not a torn write, and stops the service.
pub(super) fn replay(path: &Path) -> Result<Replayed, JournalError> {
    let mut bytes = Vec::new();
    match fs::File::open(path) {
        Ok(mut f) => f.read_to_end(&mut bytes).map_err(|e| io_error(path, &e))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io_error(path, &e)),
    };
    let mut live: HashMap<Arc<str>, LeaseRecord> = HashMap::new();
    let mut out = Replayed::default();
    let mut at = 0usize;
    while let Some(payload) = records::payload_at(&bytes, at) {
        let entry = decode(payload).ok_or_else(|| JournalError::Corrupt {
            path: path.to_path_buf(),
            offset: at as u64,
            detail: "a record with a valid checksum does not decode".into(),
        })?;
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
            Entry::Boot(id) => out.boot = Some(id),
            Entry::Bound(ms) => out.bound_ms = ms,
        }
        at += 8 + payload.len();
    }
    if bytes[at..].iter().any(|&b| b != 0) {
        tracing::warn!(path = %path.display(), dropped = bytes.len() - at, "lease journal ends in an unsynced batch; dropping it");
    }
    out.leases = live.into_values().collect();
    Ok(out)
}

fn decode(p: &[u8]) -> Option<Entry> {
    let mut r = Reader(p);
    let kind = r.u8()?;
    let entry = match kind {
        BOOT => Entry::Boot(r.str16()?.to_string()),
        BOUND => Entry::Bound(r.u64()?),
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
