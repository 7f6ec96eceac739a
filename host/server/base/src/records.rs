//! What both durable logs share (the lease journal, `fencing-locks`'
//! `journal/`, and the store's write-ahead log, `fencing-store`'s
//! `redb/wal.rs`): records `[len u32][crc32 u32][payload]`, little-endian,
//! and [`RecordFile`], the zero-filled file their batches are written and
//! synced into.
//!
//! Invariant: no record is empty, so a zero length is where the records end
//! (the preallocated zeros); a record that is short or fails its checksum is
//! a torn write, also an end.

use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// What a direct write is aligned to: its offset, length and buffer. 4 KiB
/// covers devices with 512-byte and with 4 KiB logical blocks.
const DIRECT_ALIGN: usize = 4096;

/// Starts a record in `out`; returns where, for [`finish`].
pub fn begin(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    start
}

/// Fills in the length and checksum of the record begun at `start`.
pub fn finish(out: &mut [u8], start: usize) {
    let payload = &out[start + 8..];
    let (len, crc) = (payload.len() as u32, crc32fast::hash(payload));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The payload of the record at `at`, or `None` where the records end.
pub fn payload_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let header = bytes.get(at..at + 8)?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    let payload = bytes.get(at + 8..at + 8 + len)?;
    (len > 0 && crc32fast::hash(payload) == crc).then_some(payload)
}

/// A file of records, zero-filled ahead of them: batches are written at the
/// end of the records in one write and synced with `fdatasync` (or written
/// and synced at once, [`direct`](RecordFile::direct)), which then
/// has no file size to commit (overwriting allocated blocks measured about a
/// third faster here than appending).
///
/// Invariants: zeros follow the records up to `allocated`; `synced <= len`,
/// and the records below `synced` have been synced. A batch whose write fails
/// is zeroed again, and a failed sync zeroes every batch written since the
/// last good one, so no record written before a failure can follow a later
/// batch's at replay; if even that fails, the file refuses every later batch.
pub struct RecordFile {
    file: File,
    /// Bytes of records written.
    len: u64,
    /// Bytes of records known synced.
    synced: u64,
    /// The file's size.
    allocated: u64,
    /// The file grows by this much at a time.
    step: u64,
    poisoned: bool,
    /// A shared mapping of the whole allocated file, when asked for
    /// ([`RecordFile::new_mapped`]): batches are then copied into the page
    /// cache without a system call each.
    map: Option<memmap2::MmapMut>,
    mapped: bool,
    /// A second handle opened `O_DIRECT | O_DSYNC`, when asked for
    /// ([`RecordFile::direct`]): [`append`](Self::append) then writes and
    /// syncs a batch in one system call, without the page cache.
    direct: Option<Direct>,
}

/// Appends written straight to the device, a whole aligned block at a time.
/// Invariant: `tail` holds the file's bytes from the start of the block the
/// records end in up to their end, so rewriting that block keeps them.
struct Direct {
    file: File,
    tail: Vec<u8>,
    /// Scratch space, over-allocated by [`DIRECT_ALIGN`] to carve an aligned buffer from.
    scratch: Vec<u8>,
}

impl RecordFile {
    /// `file` holding `len` bytes of synced records and `allocated` bytes in all.
    pub fn new(file: File, len: u64, allocated: u64, step: u64) -> RecordFile {
        RecordFile { file, len, synced: len, allocated, step, poisoned: false, map: None, mapped: false, direct: None }
    }

    /// Makes [`append`](Self::append) write each batch with `O_DIRECT |
    /// O_DSYNC` through a second handle of `path` (this file): one system
    /// call writes and syncs it, and no page-cache writeback runs in between.
    /// Where the file system refuses direct I/O, appends stay
    /// buffered; so they do from the first direct write it refuses.
    pub fn direct(mut self, path: &Path) -> RecordFile {
        let flags = nix::fcntl::OFlag::O_DIRECT | nix::fcntl::OFlag::O_DSYNC;
        let opened = std::fs::OpenOptions::new().write(true).custom_flags(flags.bits()).open(path);
        match opened {
            Ok(file) => {
                let mut direct = Direct { file, tail: Vec::new(), scratch: Vec::new() };
                match direct.load_tail(&self.file, self.len) {
                    Ok(()) => self.direct = Some(direct),
                    Err(e) => tracing::debug!(error = %e, "records stay buffered: cannot read the last block"),
                }
            }
            Err(e) => tracing::debug!(error = %e, path = %path.display(), "records stay buffered: no direct I/O here"),
        }
        self
    }

    /// [`new`](Self::new), writing batches through a shared mapping of the
    /// file (which must be open for reading and writing). A write into a
    /// shared mapping is in the kernel's page cache at once, as a `pwrite`
    /// is: it outlives the process, and `fdatasync` writes it out.
    pub fn new_mapped(file: File, len: u64, allocated: u64, step: u64) -> std::io::Result<RecordFile> {
        let mut f = RecordFile { mapped: true, ..RecordFile::new(file, len, allocated, step) };
        f.remap()?;
        Ok(f)
    }

    /// Maps the allocated file again (after it grew).
    fn remap(&mut self) -> std::io::Result<()> {
        self.map = None;
        if self.mapped && self.allocated > 0 {
            let len = usize::try_from(self.allocated).map_err(std::io::Error::other)?;
            // SAFETY: the file is this process's own: the data directory's
            // lock keeps other services out, and the file is never truncated
            // while mapped (it only grows, and a rewrite replaces it with a
            // new file), so the mapping always lies within the file.
            self.map = Some(unsafe { memmap2::MmapOptions::new().len(len).map_mut(&self.file)? });
        }
        Ok(())
    }

    /// Bytes of records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file holds no record (new, or rewound).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether records were written since the last sync.
    pub fn unsynced(&self) -> bool {
        self.synced < self.len
    }

    /// Writes the next batch at offset 0 again, over records no longer
    /// needed; only once every record is synced.
    pub fn rewind(&mut self) {
        debug_assert!(!self.unsynced(), "rewound over unsynced records");
        self.len = 0;
        self.synced = 0;
        if let Some(direct) = &mut self.direct {
            direct.tail.clear();
        }
    }

    /// Zero-fills the file past `end` (a whole number of steps) and syncs its size.
    pub fn reserve(&mut self, end: u64) -> std::io::Result<()> {
        let target = end.div_ceil(self.step) * self.step;
        // Written a page at a time: the page cache then holds these pages
        // as single-page folios. Written a megabyte at a time, they became
        // large folios, and every small record written into one later
        // walked all its blocks' buffers (in the write and again in the
        // sync's writeback): about a quarter of the lease journal's kernel
        // time per acquisition here.
        let zeros = vec![0u8; 4096];
        let mut at = self.allocated;
        while at < target {
            let n = (target - at).min(zeros.len() as u64) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        self.file.sync_all()?;
        if target > self.allocated {
            self.allocated = target;
            self.remap()?;
        }
        Ok(())
    }

    /// Writes `batch` after the records and syncs it; on error nothing of it counts.
    pub fn append(&mut self, batch: &[u8]) -> std::io::Result<()> {
        if self.direct.is_some() && !self.poisoned && !self.unsynced() {
            return self.append_direct(batch);
        }
        self.write(batch)?;
        self.sync()
    }

    /// [`append`](Self::append) through the direct handle: the block the
    /// records end in is written again with the batch after its records and
    /// zeros after the batch (zeros are where records end).
    fn append_direct(&mut self, batch: &[u8]) -> std::io::Result<()> {
        let end = self.len + batch.len() as u64;
        if end > self.allocated {
            self.reserve(end)?;
        }
        let direct = self.direct.as_mut().expect("direct appends");
        let block_start = self.len - direct.tail.len() as u64;
        let written = direct.tail.len() + batch.len();
        let total = written.next_multiple_of(DIRECT_ALIGN);
        direct.scratch.resize(total + DIRECT_ALIGN, 0);
        let at = direct.scratch.as_ptr().align_offset(DIRECT_ALIGN);
        let block = &mut direct.scratch[at..at + total];
        block[..direct.tail.len()].copy_from_slice(&direct.tail);
        block[direct.tail.len()..written].copy_from_slice(batch);
        block[written..].fill(0);
        match direct.file.write_all_at(block, block_start) {
            Ok(()) => {
                let last = written - written % DIRECT_ALIGN;
                direct.tail.clear();
                direct.tail.extend_from_slice(&block[last..written]);
                self.len = end;
                self.synced = end;
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::EINVAL) => {
                // Refused before anything was written (alignment): buffered from now on.
                tracing::debug!(error = %e, "direct record writes refused; writing buffered");
                self.direct = None;
                self.append(batch)
            }
            Err(e) => {
                // Only the batch's bytes can differ from what the file held.
                self.clear(self.len, batch.len() as u64);
                Err(e)
            }
        }
    }

    /// Writes `batch` after the records without syncing it (a later
    /// [`sync`](Self::sync) does); on error nothing of it counts.
    pub fn write(&mut self, batch: &[u8]) -> std::io::Result<()> {
        if self.poisoned {
            return Err(std::io::Error::other("an earlier failed batch could not be cleared; restart the service"));
        }
        let end = self.len + batch.len() as u64;
        if end > self.allocated {
            self.reserve(end)?;
        }
        if let Some(map) = &mut self.map {
            // Both bounds are within `allocated`, which the map covers.
            map[self.len as usize..end as usize].copy_from_slice(batch);
            self.len = end;
            return Ok(());
        }
        match self.file.write_all_at(batch, self.len) {
            Ok(()) => {
                self.len = end;
                Ok(())
            }
            Err(e) => {
                self.clear(self.len, batch.len() as u64);
                Err(e)
            }
        }
    }

    /// Syncs every batch written so far. On error all of them are zeroed:
    /// none counts.
    pub fn sync(&mut self) -> std::io::Result<()> {
        if !self.unsynced() {
            return Ok(());
        }
        let result = self.file.sync_data();
        match &result {
            Ok(()) => self.synced = self.len,
            Err(_) => {
                self.clear(self.synced, self.len - self.synced);
                self.len = self.synced;
            }
        }
        result
    }

    /// A second handle of the file, to sync it through while batches are
    /// written through this one ([`synced_to`](Self::synced_to)).
    pub fn sync_handle(&self) -> std::io::Result<File> {
        self.file.try_clone()
    }

    /// Notes that the first `upto` bytes of records are synced: a sync
    /// through [`sync_handle`](Self::sync_handle) that started once they
    /// were written has succeeded.
    pub fn synced_to(&mut self, upto: u64) {
        self.synced = self.synced.max(upto.min(self.len));
    }

    /// Zeroes `n` bytes at `start` and syncs them, poisoning the file if that fails.
    fn zero(&mut self, start: u64, n: u64) -> std::io::Result<()> {
        let result = usize::try_from(n)
            .map_err(std::io::Error::other)
            .and_then(|n| self.file.write_all_at(&vec![0; n], start))
            .and_then(|()| self.file.sync_data());
        self.poisoned |= result.is_err();
        result
    }

    /// [`zero`](Self::zero) for a failed batch, whose own error is the one reported.
    fn clear(&mut self, start: u64, n: u64) {
        if let Err(e) = self.zero(start, n) {
            tracing::error!(error = %e, "cannot clear a failed batch of records");
        }
    }
}

impl Direct {
    /// Reads the records' last partial block (`len` bytes of records) into `tail`.
    fn load_tail(&mut self, file: &File, len: u64) -> std::io::Result<()> {
        let start = len - len % DIRECT_ALIGN as u64;
        self.tail.resize((len - start) as usize, 0);
        file.read_exact_at(&mut self.tail, start)
    }
}

/// Reads a payload's fields in order; every getter is `None` past the end.
pub struct Reader<'a>(pub &'a [u8]);

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

#[cfg(test)]
mod tests {
    use super::*;

    /// One record per payload, as one batch.
    fn batch(payloads: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in payloads {
            let start = begin(&mut out);
            out.extend_from_slice(p);
            finish(&mut out, start);
        }
        out
    }

    /// The payloads of the chain of records the file holds from offset 0.
    fn replay(path: &Path) -> Vec<Vec<u8>> {
        let bytes = std::fs::read(path).unwrap();
        let (mut at, mut out) = (0, Vec::new());
        while let Some(p) = payload_at(&bytes, at) {
            out.push(p.to_vec());
            at += 8 + p.len();
        }
        out
    }

    fn open(path: &Path) -> RecordFile {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path).unwrap();
        let len = file.metadata().unwrap().len();
        RecordFile::new(file, 0, len, 64 << 10).direct(path)
    }

    #[test]
    fn direct_appends_keep_every_record_across_blocks_and_rewinds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let mut f = open(&path);
        let supported = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::fcntl::OFlag::O_DIRECT.bits())
            .open(&path)
            .is_ok();
        assert_eq!(f.direct.is_some(), supported, "direct writes are used wherever the file system has them");

        // Batches of many sizes: inside one block, across a boundary, over several blocks.
        let mut expected = Vec::new();
        for (i, size) in [1usize, 100, 3000, 4088, 5000, 9000, 17, 4096].into_iter().enumerate() {
            let payloads = vec![vec![i as u8 + 1; size], vec![0xa0 + i as u8; 3]];
            f.append(&batch(&payloads)).unwrap();
            expected.extend(payloads);
        }
        assert_eq!(replay(&path), expected);

        // The next batch follows the ones before it.
        let next = vec![vec![7; 5000]];
        f.append(&batch(&next)).unwrap();
        expected.extend(next);
        assert_eq!(replay(&path), expected);

        // Rewound, the new chain starts at 0 and zeros end it within its block.
        f.rewind();
        let fresh = vec![vec![0x33; 10], vec![0x44; 20]];
        f.append(&batch(&fresh)).unwrap();
        assert_eq!(replay(&path), fresh);

        // A file reopened with records in it appends after them.
        let len = f.len();
        drop(f);
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let allocated = file.metadata().unwrap().len();
        let mut f = RecordFile::new(file, len, allocated, 64 << 10).direct(&path);
        let more = vec![vec![0x55; 4100]];
        f.append(&batch(&more)).unwrap();
        assert_eq!(replay(&path), [fresh, more].concat());
    }

    #[test]
    fn a_direct_write_the_kernel_refuses_falls_back_to_buffered_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records");
        let mut f = open(&path);
        if f.direct.is_none() {
            return; // No direct I/O on this file system: appends were buffered from the start.
        }
        let first = vec![vec![1; 100]];
        f.append(&batch(&first)).unwrap();
        // One byte short of the block's records moves the next write off a
        // 512-byte boundary, which the kernel refuses with EINVAL before
        // writing anything, as it does buffers or offsets a device cannot take.
        f.direct.as_mut().unwrap().tail.pop();
        let second = vec![vec![2; 300], vec![3; 5000]];
        f.append(&batch(&second)).unwrap();
        assert!(f.direct.is_none(), "appends are buffered after a refused direct write");
        let third = vec![vec![4; 10]];
        f.append(&batch(&third)).unwrap();
        assert_eq!(replay(&path), [first, second, third].concat());
    }
}
