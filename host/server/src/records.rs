//! The framing both durable logs share (the lease journal,
//! `locks/journal.rs`, and the store's write-ahead log, `storage/wal.rs`):
//! records `[len u32][crc32 u32][payload]`, little-endian, in files that are
//! zero-filled ahead of their records.
//!
//! Invariant: no record is empty, so a zero length is where the records end
//! (the preallocated zeros); a record that is short or fails its checksum is
//! a torn write, also an end.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Starts a record in `out`; returns where, for [`finish`].
pub(crate) fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    start
}

/// Fills in the length and checksum of the record begun at `start`.
pub(crate) fn finish(out: &mut [u8], start: usize) {
    let payload = &out[start + 8..];
    let (len, crc) = (payload.len() as u32, crc32fast::hash(payload));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The payload of the record at `at`, or `None` where the records end.
pub(crate) fn payload_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at + 8)?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    let payload = bytes.get(at + 8..at + 8 + len)?;
    (len > 0 && crc32fast::hash(payload) == crc).then_some(payload)
}

/// Zero-fills `file` from `from` to `to` and syncs it with its size.
pub(crate) fn zero_fill(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    let zeros = vec![0u8; 1 << 20];
    let mut at = from;
    while at < to {
        let n = (to - at).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    file.sync_all()
}

/// Reads a payload's fields in order; every getter is `None` past the end.
pub(crate) struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn u128(&mut self) -> Option<u128> {
        Some(u128::from_le_bytes(self.take(16)?.try_into().ok()?))
    }
    /// A string with a u16 length.
    pub fn str16(&mut self) -> Option<&'a str> {
        let n = u16::from_le_bytes(self.take(2)?.try_into().ok()?) as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
    /// Bytes with a u32 length.
    pub fn bytes32(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        self.take(n)
    }
    /// True once every field was read.
    pub fn done(&self) -> bool {
        self.0.is_empty()
    }
}
