//! The lease journal's syncer thread: it group-commits what callers wrote
//! (one `fdatasync` for every record written before it started), answers
//! the grants waiting on it, keeps the live leases a rewrite needs, and
//! rewrites the file once it outgrows them (see the invariants in
//! `journal/mod.rs`).

use super::failures::Failures;
use super::format::{encode, encode_boot, encode_bound, encode_closed, encode_wait, record_len};
use super::{
    Ack, COMPACT_MIN_BYTES, Change, Held, IDLE_SYNC, JOURNAL_FILE, JournalError, JournalOptions, LeaseRecord,
    PREALLOCATE_BYTES, Shared, io_error,
};
use crate::records::RecordFile;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Live {
    record: LeaseRecord,
    expires: Instant,
}

/// The syncer thread's own state.
pub(super) struct Syncer {
    dir: PathBuf,
    path: PathBuf,
    /// The leases the journal holds, as replay would restore them; expired ones are dropped at a rewrite.
    live: HashMap<Arc<str>, Live>,
    /// What `live` takes in the file, were it rewritten now.
    live_bytes: u64,
    /// Recorded first in every rewritten file.
    boot_id: Option<String>,
    /// Appends copy into a shared mapping of the file instead of a `pwrite`
    /// each: only with background grants. With grants waiting on back-to-back
    /// syncs, a write into a mapped page that is being written out stalls,
    /// which measured slower than a `pwrite` here.
    mapped: bool,
    /// The handle syncs go through (of the current file).
    handle: Option<fs::File>,
    /// Failed syncs and rewrites since their last success (logging, and the rewrite's backoff).
    sync_failures: Failures,
    rewrite_failures: Failures,
    /// Until when a start's wait holds: written (`WAIT`) into every file
    /// rewritten before then.
    pub(super) wait_until: Option<Instant>,
}

/// After a failed rewrite, the next is tried no sooner than this (not at every sync).
const REWRITE_BACKOFF: Duration = Duration::from_secs(1);

impl Syncer {
    /// The syncer of the journal in `dir`, holding `leases` (as replayed).
    pub(super) fn new(dir: &Path, options: &JournalOptions, leases: &[LeaseRecord]) -> Syncer {
        let now = Instant::now();
        Syncer {
            dir: dir.to_path_buf(),
            path: dir.join(JOURNAL_FILE),
            boot_id: options.boot_id.clone(),
            mapped: options.background_grants,
            live: leases
                .iter()
                .map(|r| (r.name.clone(), Live { expires: now + Duration::from_millis(r.lease_ms), record: r.clone() }))
                .collect(),
            live_bytes: 0,
            handle: None,
            sync_failures: Failures::default(),
            rewrite_failures: Failures::default(),
            wait_until: None,
        }
    }

    pub(super) fn run(mut self, shared: &Shared) {
        loop {
            let (upto, changes, closing) = {
                let mut st = shared.lock();
                loop {
                    let now = Instant::now();
                    st.lower_bound(now);
                    st.end_wait(now);
                    if !st.awaiting.is_empty() || st.closed {
                        break;
                    }
                    st.syncer_idle = true;
                    // Wakes to lower the bound, or to end the start's wait, once due.
                    let bound_due = (st.background && st.bound_written > 0).then_some(st.lower_at);
                    let due = bound_due.into_iter().chain(st.wait_until).min();
                    if st.file.unsynced() {
                        let (g, waited) =
                            shared.wake.wait_timeout(st, IDLE_SYNC).unwrap_or_else(std::sync::PoisonError::into_inner);
                        st = g;
                        st.syncer_idle = false;
                        if waited.timed_out() {
                            break;
                        }
                    } else if let Some(due) = due {
                        let due = due.saturating_duration_since(Instant::now());
                        st = shared.wake.wait_timeout(st, due).unwrap_or_else(std::sync::PoisonError::into_inner).0;
                        st.syncer_idle = false;
                    } else {
                        st = shared.wake.wait(st).unwrap_or_else(std::sync::PoisonError::into_inner);
                        st.syncer_idle = false;
                    }
                }
                (st.file.len(), std::mem::take(&mut st.changes), st.closed)
            };
            let result = match &self.handle {
                Some(h) => h.sync_data(),
                None => Err(std::io::Error::other("the lease journal file is not open")),
            };
            let ok = result.is_ok();
            {
                let mut st = shared.lock();
                match result {
                    Ok(()) => {
                        if let Some(failed) = self.sync_failures.succeeded() {
                            tracing::info!(failed, path = %shared.path.display(), "the lease journal syncs again");
                        }
                        st.file.synced_to(upto);
                        if let Some((end, bound)) = st.pending_bound
                            && end <= upto
                        {
                            st.bound_synced = st.bound_synced.max(bound);
                            st.pending_bound = None;
                        }
                        while st.awaiting.front().is_some_and(|(end, _)| *end <= upto) {
                            let (_, answer) = st.awaiting.pop_front().expect("checked");
                            let _ = answer.send(Ok(()));
                        }
                    }
                    Err(e) => {
                        // The records stay: releases and background grants
                        // were answered on them. Waiting grants fail, and the
                        // service undoes them by appending their release.
                        if let Some(unlogged) = self.sync_failures.failed(Instant::now()) {
                            tracing::error!(
                                error = %e,
                                path = %shared.path.display(),
                                unlogged,
                                "cannot sync the lease journal (retrying; `unlogged` failed since the last line)"
                            );
                        }
                        st.forget_pending_bound();
                        let err = io_error(&shared.path, &e);
                        for (_, answer) in st.awaiting.drain(..) {
                            let _ = answer.send(Err(err.clone()));
                        }
                    }
                }
            }
            // Answered first: what follows is bookkeeping.
            let now = Instant::now();
            for c in &changes {
                self.apply(c, now);
            }
            if closing {
                if ok {
                    self.close(shared);
                }
                return;
            }
            if ok && upto >= COMPACT_MIN_BYTES.max(4 * self.live_bytes) {
                self.try_compact(shared, Instant::now());
            }
        }
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

    /// Rewrites the file unless a rewrite failed less than
    /// [`REWRITE_BACKOFF`] before `now`, and logs how it went (see
    /// `failures.rs`). Returns whether it was tried.
    pub(super) fn try_compact(&mut self, shared: &Shared, now: Instant) -> bool {
        if !self.rewrite_failures.due(now, REWRITE_BACKOFF) {
            return false;
        }
        match self.compact(shared) {
            Ok(()) => {
                if let Some(failed) = self.rewrite_failures.succeeded() {
                    tracing::info!(failed, "the lease journal is rewritten again");
                }
            }
            Err(e) => {
                if let Some(unlogged) = self.rewrite_failures.failed(now) {
                    tracing::error!(
                        error = %e,
                        unlogged,
                        "cannot rewrite the lease journal; it keeps growing until a rewrite succeeds"
                    );
                }
            }
        }
        true
    }

    /// Rewrites the file with the live leases while appends are held in
    /// memory, then puts the new file in place and writes what was held.
    /// On an error the old file stays in use, with what was held appended.
    fn compact(&mut self, shared: &Shared) -> Result<(), JournalError> {
        // The slow part first, while appends still go to the old file.
        let fresh = self.prepare()?;
        let (changes, bound) = {
            let mut st = shared.lock();
            st.rewriting.get_or_insert_with(Held::default);
            self.wait_until = st.wait_until;
            (std::mem::take(&mut st.changes), st.bound_written)
        };
        // Every change written to the old file is in `changes` or applied already.
        let now = Instant::now();
        for c in &changes {
            self.apply(c, now);
        }
        let rewritten = self.fill(Some(fresh), bound);
        let mut st = shared.lock();
        let held = st.rewriting.take().expect("set above");
        let result = rewritten.map(|file| {
            // What waited for a sync of the old file is in the new one, synced.
            for (_, answer) in st.awaiting.drain(..) {
                let _ = answer.send(Ok(()));
            }
            st.file = file;
            st.bound_synced = bound;
            st.pending_bound = None;
        });
        let base = st.file.len();
        let written = if held.bytes.is_empty() { Ok(()) } else { st.file.write(&held.bytes) };
        for (ack, answer, end) in held.answers {
            match (&written, ack) {
                (Err(e), _) => {
                    let _ = answer.send(Err(io_error(&shared.path, e)));
                }
                (Ok(()), Ack::Written) => {
                    let _ = answer.send(Ok(()));
                }
                (Ok(()), Ack::Synced) => st.awaiting.push_back((base + end, answer)),
            }
        }
        if written.is_err() {
            // The held changes never reached the file: the live map must not keep them.
            st.changes.clear();
        }
        result
    }

    /// Marks a clean stop: a `CLOSED` record, synced, after everything else.
    fn close(&mut self, shared: &Shared) {
        let mut st = shared.lock();
        let mut buf = Vec::new();
        encode_closed(&mut buf);
        let written = st.file.write(&buf).and_then(|()| match &self.handle {
            Some(h) => h.sync_data(),
            None => Ok(()),
        });
        if let Err(e) = written {
            tracing::warn!(error = %e, "cannot mark the lease journal closed");
        }
    }

    /// The temporary file of a rewrite, zero-filled and synced: the part of a
    /// rewrite that appends need not wait for.
    fn prepare(&self) -> Result<RecordFile, JournalError> {
        let f = create(&self.tmp_path()).map_err(|e| self.io(e))?;
        let mut file = self.open_records(f, 0)?;
        file.reserve(self.live_bytes + 1).map_err(|e| self.io(e))?;
        Ok(file)
    }

    /// Writes the live leases to a new zero-filled file (temporary, synced,
    /// renamed, directory synced) and returns it, ready for appends: into
    /// `prepared` from [`prepare`](Self::prepare), or without one into a new
    /// file, zero-filled only past them. A lease the syncer's own clock saw
    /// expire is dropped: the service, whose clock started each lease before
    /// the syncer's, saw it expire first.
    ///
    /// The file starts with this boot's id (empty if unknown), `bound` (the
    /// `BOUND` that grants answered ahead of their sync rely on) and, while
    /// the start's wait holds, a `WAIT` for what is left of it.
    pub(super) fn fill(&mut self, prepared: Option<RecordFile>, bound: u64) -> Result<RecordFile, JournalError> {
        let now = Instant::now();
        self.live.retain(|_, l| l.expires > now);
        self.live_bytes = self.live.values().map(|l| record_len(&l.record) as u64).sum();
        let mut buf = Vec::with_capacity(self.live_bytes as usize + 64);
        encode_boot(self.boot_id.as_deref().unwrap_or(""), &mut buf);
        if bound > 0 {
            encode_bound(bound, &mut buf);
        }
        if let Some(left) = self.wait_until.map(|until| until.saturating_duration_since(now))
            && !left.is_zero()
        {
            encode_wait(left.as_micros().div_ceil(1000) as u64, &mut buf);
        }
        for l in self.live.values() {
            encode(&Change::Hold(l.record.clone()), &mut buf);
        }
        let tmp = self.tmp_path();
        let file = match prepared {
            Some(mut file) => {
                file.write(&buf).and_then(|()| file.sync()).map_err(|e| self.io(e))?;
                file
            }
            None => {
                let mut f = create(&tmp).map_err(|e| self.io(e))?;
                std::io::Write::write_all(&mut f, &buf).map_err(|e| self.io(e))?;
                let len = buf.len() as u64;
                let mut file = self.open_records(f, len)?;
                // Syncs the records with the zeros.
                file.reserve(len + 1).map_err(|e| self.io(e))?;
                file
            }
        };
        fs::rename(&tmp, &self.path).map_err(|e| self.io(e))?;
        fs::File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| self.io(e))?;
        self.handle = Some(file.sync_handle().map_err(|e| self.io(e))?);
        Ok(file)
    }

    /// `f`, holding `len` bytes, as a record file: mapped if `self.mapped`
    /// and its filesystem overwrites the zero-filled blocks in place.
    fn open_records(&self, f: fs::File, len: u64) -> Result<RecordFile, JournalError> {
        if self.mapped && overwrites_in_place(&f) {
            RecordFile::new_mapped(f, len, len, PREALLOCATE_BYTES).map_err(|e| self.io(e))
        } else {
            Ok(RecordFile::new(f, len, len, PREALLOCATE_BYTES))
        }
    }

    fn tmp_path(&self) -> PathBuf {
        self.dir.join(format!("{JOURNAL_FILE}.tmp"))
    }

    fn io(&self, e: std::io::Error) -> JournalError {
        io_error(&self.path, &e)
    }
}

/// Puts the calling thread (the syncer) under `SCHED_BATCH`: woken when
/// its sync returns, it does not preempt the thread running on that CPU but
/// takes the CPU when that thread next blocks or its slice ends. Under load
/// that thread is a runtime worker, often inside a short critical section
/// (a lock shard, the journal's mutex, the runtime's timer wheel), and a
/// worker preempted there holds up every thread that waits on the section.
/// Where the policy cannot be set, the thread keeps the default one.
pub(super) fn wait_for_the_cpu_when_woken() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain system call on the calling thread (pid 0) with a valid
    // parameter; it touches no memory of ours beyond reading `param`.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
        let e = std::io::Error::last_os_error();
        tracing::debug!(error = %e, "the lease journal's syncer keeps the default scheduling policy");
    }
}

/// Whether a write into a shared mapping of `f` lands in blocks the file
/// already has. On ext4, XFS and tmpfs the zero-filled, synced blocks ahead
/// of the records are overwritten in place. A copy-on-write filesystem
/// (btrfs) allocates anew on every write, and in a mapping a write it
/// cannot allocate for is a `SIGBUS` that kills the process where a `pwrite`
/// returns an error, so there, and wherever the type is unknown, the
/// journal writes with `pwrite`.
fn overwrites_in_place(f: &fs::File) -> bool {
    match nix::sys::statfs::fstatfs(f) {
        Ok(st) => maps_safely_on(st.filesystem_type()),
        Err(e) => {
            tracing::debug!(error = %e, "the lease journal writes with pwrite: unknown filesystem");
            false
        }
    }
}

fn maps_safely_on(fs: nix::sys::statfs::FsType) -> bool {
    use nix::sys::statfs::{EXT4_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC};
    [EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, TMPFS_MAGIC].contains(&fs)
}

/// A new, empty file open for reading and writing (as a shared mapping needs).
fn create(path: &Path) -> std::io::Result<fs::File> {
    fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::maps_safely_on;
    use nix::sys::statfs::{BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, NFS_SUPER_MAGIC, TMPFS_MAGIC, XFS_SUPER_MAGIC};

    #[test]
    fn only_filesystems_that_overwrite_in_place_are_written_through_a_mapping() {
        for fs in [EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC, TMPFS_MAGIC] {
            assert!(maps_safely_on(fs), "{fs:?}");
        }
        for fs in [BTRFS_SUPER_MAGIC, NFS_SUPER_MAGIC] {
            assert!(!maps_safely_on(fs), "{fs:?}");
        }
    }
}
