//! The lease journal: every grant, renewal and release of the embedded lock
//! service, appended to `locks-leases` in the data directory.
//!
//! Each change is written to the file by the caller itself (into the page
//! cache, under the journal's mutex: a `pwrite`, or with background grants,
//! on a filesystem that overwrites in place, a copy into a shared mapping of
//! the file); one syncer thread
//! group-commits with `fdatasync`. So a release or renewal costs no thread
//! hand-off, and a grant costs one wake-up for its whole batch: on a
//! virtual machine, waking threads measured costlier than the sync.
//!
//! Why none of what a crash or a power loss can lose lets two holders
//! overlap is argued once, in `docs/design.md` ("Mutual exclusion across a
//! restart"); this module keeps the invariants that argument relies on:
//! - a grant is acknowledged only after it is written and a `fdatasync`
//!   that started after its write has returned, or, with background grants,
//!   once it is written and its lease is within the synced `BOUND` (below);
//! - a release is acknowledged once it is written to the file, ahead of its
//!   sync (the next grant's, or the syncer's within [`IDLE_SYNC`]), and every
//!   later grant of the lock follows it in the file;
//! - a renewal is written at once but nobody waits for it (a restored lease
//!   is re-armed with its full duration, which outlasts every renewal, so a
//!   lost renewal is harmless);
//! - records of one lock enter the journal in the order the lock's state
//!   changed, because callers append while holding the lock's shard mutex;
//! - a record is `[len u32][crc32 u32][payload]`; replay stops at the first
//!   record that is short or fails its checksum, which can only belong to a
//!   batch that was never synced, hence never acknowledged, and the file is
//!   rewritten without it before anything else is appended;
//! - a file that does not read back whole (`format.rs`: emptied, cut short,
//!   overwritten) is refused ([`JournalError::NotWhole`]), never read as "no
//!   leases": the service does not start on it;
//! - a wait a start imposes (leases it cannot see may be running: grants
//!   answered ahead of their sync before the machine restarted, or a
//!   journal an operator recovered) is written into the file (`WAIT`), so a
//!   restart before it runs out waits again; once it has run out the syncer
//!   writes `WAIT 0`;
//! - a failed write is zeroed in the file ([`RecordFile`]) and its caller
//!   gets the error; later records start again where it started, so a full
//!   disk fails writes while it lasts and never leaves a torn record in the
//!   middle of the file;
//! - a failed sync fails every grant waiting on it (the service undoes each
//!   by appending its release) and leaves the records in the file, because
//!   releases and background grants were answered on them: restoring a
//!   failed grant holds a lease nobody holds for one duration, while
//!   dropping an answered one could hand its lock to a second holder; the
//!   syncer tries again within [`IDLE_SYNC`];
//! - the file is rewritten (to a temporary file, synced, renamed, directory
//!   synced) with only the leases still running whenever it has grown to
//!   four times that size, so it stays proportional to the held locks;
//!   changes made meanwhile are held in memory, unanswered, and written to
//!   the new file once it is in place;
//! - the file is zero-filled ahead of the records (4 MiB at a time), so a
//!   batch overwrites allocated blocks; replay stops at a zero length.
//!
//! Background grants ([`JournalOptions::background_grants`]) are answered
//! once written, like releases. The file carries a `BOUND`, the longest
//! lease answered ahead of its sync, and a file last written under another
//! boot of the machine and not closed cleanly makes the service wait that
//! long before granting a lock the file does not hold ([`Opened::grace_ms`]):
//! - a grant with a longer lease than the synced bound writes a new `BOUND`
//!   and waits for its sync like an each-grant grant, so a raised bound is
//!   durable before any grant relies on it;
//! - every [`BOUND_DECAY`] the syncer lowers it to the longest lease answered
//!   ahead since the last time ([`State::lower_bound`]): only grants within
//!   the lower bound are answered ahead from the moment its record is
//!   written, and every grant answered ahead before that precedes the record
//!   in the file, so a replay that reads the record restores them; one that
//!   does not read it stops at an earlier, higher `BOUND`.
//!
//! The syncer runs under `SCHED_BATCH` ([`syncer::wait_for_the_cpu_when_woken`]):
//! woken by its sync's completion it waits for the CPU instead of preempting
//! a request's thread, which may hold a shard's or this journal's mutex.
//!
//! Layout: this file takes appends and answers them; `syncer.rs` is the
//! syncer thread (group commit, live leases, rewrites); `format.rs` is the
//! record format and replay; `failures.rs` keeps a failing sync or rewrite
//! from flooding the log.

mod failures;
mod format;
mod syncer;

use crate::records::RecordFile;
use format::{encode, encode_bound, encode_wait, replay};
use std::collections::VecDeque;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use syncer::Syncer;
use tokio::sync::oneshot;

/// File name of the journal inside the data directory.
pub const JOURNAL_FILE: &str = "locks-leases";
/// Below this size the journal is never compacted.
const COMPACT_MIN_BYTES: u64 = 4 << 20;
/// The file grows by this much at a time, zero-filled ahead of the records.
const PREALLOCATE_BYTES: u64 = 4 << 20;
/// Records nobody waits to see synced (releases, renewals) are synced by
/// the next grant's sync, or by the syncer after this long without one.
pub const IDLE_SYNC: Duration = Duration::from_millis(2);
/// With background grants, how often the bound falls to the longest lease
/// answered ahead of its sync since it last fell.
pub const BOUND_DECAY: Duration = Duration::from_secs(1);

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
    Io { path: PathBuf, message: String, kind: std::io::ErrorKind },
    #[error("lease journal {path} is corrupt at byte {offset}: {detail}")]
    Corrupt { path: PathBuf, offset: u64, detail: String },
    #[error("lease journal {path} {problem}")]
    NotWhole { path: PathBuf, problem: String },
    #[error("lease journal writer stopped")]
    Stopped,
}

/// Resolves when the change is as durable as its append asked (or failed to become so).
pub type Durable = oneshot::Receiver<Result<(), JournalError>>;

/// How far a change must get before it is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    /// Written to the file: survives this process, not the machine.
    Written,
    /// Written and synced: survives the machine.
    Synced,
}

type Answer = oneshot::Sender<Result<(), JournalError>>;

/// The journal: appends write into the file at once; the syncer thread
/// syncs it and answers the grants.
pub struct Journal {
    shared: Arc<Shared>,
    syncer: Option<JoinHandle<()>>,
}

struct Shared {
    path: PathBuf,
    state: Mutex<State>,
    /// Wakes the syncer: a grant waits, or the journal closes.
    wake: Condvar,
}

struct State {
    file: RecordFile,
    /// Grants with leases up to `bound_synced` are answered once written.
    background: bool,
    /// The largest `BOUND` written, and the largest known synced.
    bound_written: u64,
    bound_synced: u64,
    /// A `BOUND` record written and not yet synced: where it ends, its value.
    pending_bound: Option<(u64, u64)>,
    /// The longest lease answered ahead of its sync since the bound was last
    /// lowered, and when it may next be ([`State::lower_bound`]).
    ahead_max: u64,
    lower_at: Instant,
    bound_decay: Duration,
    /// Grants written and waiting for a sync, by where their record ends; in file order.
    awaiting: VecDeque<(u64, Answer)>,
    /// Changes written since the syncer last took them, for its live-lease bookkeeping.
    changes: Vec<Change>,
    /// While the syncer rewrites the file: changes held here, with their answers, in order.
    rewriting: Option<Held>,
    /// Encoding scratch.
    buf: Vec<u8>,
    /// The syncer is waiting on [`Shared::wake`].
    syncer_idle: bool,
    closed: bool,
    /// Until when the file's `WAIT` holds (none once `WAIT 0` is written).
    wait_until: Option<Instant>,
}

/// What arrives while the file is being rewritten.
#[derive(Default)]
struct Held {
    bytes: Vec<u8>,
    /// Each change's answer and where its record ends in `bytes`.
    answers: Vec<(Ack, Answer, u64)>,
}

/// How a journal is opened.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Answer grants once written, ahead of their sync (see the module docs).
    pub background_grants: bool,
    /// This boot of the machine (`/proc/sys/kernel/random/boot_id`); `None`
    /// if unknown, which counts as a different boot.
    pub boot_id: Option<String>,
    /// How often the bound of background grants is lowered ([`BOUND_DECAY`]).
    pub bound_decay: Duration,
}

impl Default for JournalOptions {
    fn default() -> Self {
        JournalOptions { background_grants: false, boot_id: None, bound_decay: BOUND_DECAY }
    }
}

/// What [`Journal::open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The leases held when the file was last written.
    pub leases: Vec<LeaseRecord>,
    /// How long a lock the file does not hold must wait before it is granted:
    /// non-zero after the machine restarted under background grants, or
    /// while a wait written into the file (`WAIT`) holds.
    pub grace_ms: u64,
    /// When that wait ends: the moment the journal writes `WAIT 0`.
    pub grace_until: Instant,
}

/// The kernel's id of this boot of the machine, if it has one.
pub fn current_boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(id.trim().to_string()).filter(|s| !s.is_empty())
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, returning it, the leases that
    /// were held when it was last written, and the grace they call for. The
    /// file is rewritten with exactly those leases before the syncer starts.
    pub fn open(dir: &Path, options: JournalOptions) -> Result<(Journal, Opened), JournalError> {
        let path = dir.join(JOURNAL_FILE);
        let replayed = replay(&path)?.unwrap_or_default();
        let grace_ms = replayed.grace_ms(options.boot_id.as_deref());
        let grace_until = Instant::now() + Duration::from_millis(grace_ms);
        let wait_until = (grace_ms > 0).then_some(grace_until);
        let mut syncer = Syncer::new(dir, &options, &replayed.leases);
        syncer.wait_until = wait_until;
        // The rewrite's temporary file replaces (truncates) any a crash left.
        // A rewrite that fails leaves none behind (the journal itself is only
        // ever replaced by a rename, so it is intact) and, on a full disk,
        // says what the start needs.
        let file = syncer.fill(None, 0).map_err(|e| {
            let _ = fs::remove_file(dir.join(format!("{JOURNAL_FILE}.tmp")));
            match e {
                JournalError::Io { path, message, kind: kind @ std::io::ErrorKind::StorageFull } => JournalError::Io {
                    path,
                    message: format!(
                        "{message}: the lease journal is rewritten at start and needs about {} MiB free in {}",
                        PREALLOCATE_BYTES >> 20,
                        dir.display()
                    ),
                    kind,
                },
                e => e,
            }
        })?;
        let state = State {
            file,
            background: options.background_grants,
            bound_written: 0,
            bound_synced: 0,
            pending_bound: None,
            ahead_max: 0,
            lower_at: Instant::now() + options.bound_decay,
            bound_decay: options.bound_decay,
            awaiting: VecDeque::new(),
            changes: Vec::new(),
            rewriting: None,
            buf: Vec::new(),
            syncer_idle: false,
            closed: false,
            wait_until,
        };
        let shared = Arc::new(Shared { path, state: Mutex::new(state), wake: Condvar::new() });
        let for_syncer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fencing-lease-journal".into())
            .spawn(move || {
                syncer::wait_for_the_cpu_when_woken();
                syncer.run(&for_syncer)
            })
            .map_err(|e| io_error(&shared.path, &e))?;
        Ok((Journal { shared, syncer: Some(thread) }, Opened { leases: replayed.leases, grace_ms, grace_until }))
    }

    /// Replaces the journal in `dir` (no service may have it open) with one
    /// that holds no lease and makes the next start grant no lock until
    /// `wait_ms` have passed: what an operator writes once the journal is
    /// lost or cannot be read (`fencing admin recover-leases`).
    pub fn write_recovery(dir: &Path, wait_ms: u64) -> Result<(), JournalError> {
        let mut syncer = Syncer::new(dir, &JournalOptions::default(), &[]);
        syncer.wait_until = (wait_ms > 0).then(|| Instant::now() + Duration::from_millis(wait_ms));
        syncer.fill(None, 0).map(drop)
    }

    /// The leases the journal in `dir` holds (no service may have it open):
    /// none when there is no file; an error when it does not read back whole.
    pub fn leases_in(dir: &Path) -> Result<Vec<LeaseRecord>, JournalError> {
        Ok(replay(&dir.join(JOURNAL_FILE))?.map(|r| r.leases).unwrap_or_default())
    }

    /// Whether the journal in `dir` reads back whole (a missing one does not).
    pub fn reads_whole(dir: &Path) -> Result<bool, JournalError> {
        match replay(&dir.join(JOURNAL_FILE)) {
            Ok(found) => Ok(found.is_some()),
            Err(JournalError::NotWhole { .. } | JournalError::Corrupt { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Appends `change`; the receiver resolves once it is synced.
    pub fn append(&self, change: Change) -> Durable {
        self.send(change, Some(Ack::Synced))
    }

    /// Appends `change`; the receiver resolves once it is written to the
    /// file, ahead of its sync (for releases: see the module's invariants).
    pub fn append_written(&self, change: Change) -> Durable {
        self.send(change, Some(Ack::Written))
    }

    /// Appends `change` without waiting for it.
    pub fn append_unacknowledged(&self, change: Change) {
        drop(self.send(change, None));
    }

    fn send(&self, change: Change, mut ack: Option<Ack>) -> Durable {
        let (answer, rx) = oneshot::channel();
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        if st.closed {
            let _ = answer.send(Err(JournalError::Stopped));
            return rx;
        }
        st.buf.clear();
        if let (Some(Ack::Synced), Change::Hold(r), true) = (ack, &change, st.background) {
            if r.lease_ms <= st.bound_synced {
                ack = Some(Ack::Written);
                st.ahead_max = st.ahead_max.max(r.lease_ms);
            } else if r.lease_ms > st.bound_written && st.rewriting.is_none() {
                // This grant waits for its sync, which makes the new bound durable.
                encode_bound(r.lease_ms, &mut st.buf);
                st.bound_written = r.lease_ms;
                st.pending_bound = Some((st.file.len() + st.buf.len() as u64, r.lease_ms));
            }
        }
        encode(&change, &mut st.buf);
        if let Some(held) = &mut st.rewriting {
            held.bytes.extend_from_slice(&st.buf);
            if let Some(ack) = ack {
                held.answers.push((ack, answer, held.bytes.len() as u64));
            }
            st.changes.push(change);
            return rx;
        }
        let was_synced = !st.file.unsynced();
        if let Err(e) = st.file.write(&st.buf) {
            st.forget_pending_bound();
            let _ = answer.send(Err(io_error(&self.shared.path, &e)));
            return rx;
        }
        st.changes.push(change);
        // The syncer, when idle, needs a wake-up for a grant, and for the
        // first unsynced record (it then waits at most IDLE_SYNC for more).
        let mut wake = was_synced;
        match ack {
            Some(Ack::Written) => {
                let _ = answer.send(Ok(()));
            }
            Some(Ack::Synced) => {
                st.awaiting.push_back((st.file.len(), answer));
                wake = true;
            }
            None => {}
        }
        if wake && st.syncer_idle {
            self.shared.wake.notify_one();
        }
        rx
    }
}

impl Drop for Journal {
    /// Syncs what is written and stops the syncer.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.syncer.take() {
            let _ = t.join();
        }
    }
}

impl State {
    /// Once the start's wait has run out: writes `WAIT 0` (synced by the
    /// syncer within [`IDLE_SYNC`]), so a later start does not wait again.
    /// Returns whether it wrote it.
    fn end_wait(&mut self, now: Instant) -> bool {
        if self.wait_until.is_none_or(|until| now < until) || self.rewriting.is_some() {
            return false;
        }
        self.buf.clear();
        encode_wait(0, &mut self.buf);
        if self.file.write(&self.buf).is_err() {
            return false; // Tried again at the syncer's next round; meanwhile the file asks for a wait.
        }
        self.wait_until = None;
        true
    }

    /// A `BOUND` record that did not reach the file (or its sync) does not count.
    fn forget_pending_bound(&mut self) {
        self.pending_bound = None;
        self.bound_written = self.bound_synced;
    }

    /// With background grants, once `bound_decay` has passed since the
    /// last time: lowers the bound to the longest lease answered ahead of its
    /// sync since then, if that is shorter, by writing a `BOUND` (synced by
    /// the syncer within [`IDLE_SYNC`]). Returns whether it wrote one.
    ///
    /// Grants are held to the lower bound from the moment its record is
    /// written, while the file's last synced `BOUND` is still the higher one,
    /// so a machine that stops before the sync waits longer, never shorter.
    /// Not while a raised bound awaits its sync or the file is being
    /// rewritten (the rewrite carries `bound_written` into the new file).
    fn lower_bound(&mut self, now: Instant) -> bool {
        if !self.background || now < self.lower_at || self.pending_bound.is_some() || self.rewriting.is_some() {
            return false;
        }
        self.lower_at = now + self.bound_decay;
        let to = std::mem::take(&mut self.ahead_max);
        if to >= self.bound_written {
            return false;
        }
        self.bound_synced = self.bound_synced.min(to);
        self.buf.clear();
        encode_bound(to, &mut self.buf);
        if self.file.write(&self.buf).is_err() {
            // The file keeps its higher bound; grants stay held to the lower one.
            self.forget_pending_bound();
            return false;
        }
        self.bound_written = to;
        self.pending_bound = Some((self.file.len(), to));
        true
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn io_error(path: &Path, e: &std::io::Error) -> JournalError {
    JournalError::Io { path: path.to_path_buf(), message: e.to_string(), kind: e.kind() }
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

    /// Opens with the defaults: grants wait for their sync, no boot id.
    fn open(dir: &Path) -> (Journal, Vec<LeaseRecord>) {
        let (j, opened) = Journal::open(dir, JournalOptions::default()).unwrap();
        (j, opened.leases)
    }

    /// The journal file as the kernel has it now: what a killed process, or
    /// (once synced) a machine that stops, leaves behind.
    fn snapshot(dir: &Path) -> tempfile::TempDir {
        let copy = tempfile::tempdir().unwrap();
        fs::copy(dir.join(JOURNAL_FILE), copy.path().join(JOURNAL_FILE)).unwrap();
        copy
    }

    fn background(boot: &str) -> JournalOptions {
        // No lowering unless a test asks for it: the bound stays as grants raised it.
        JournalOptions { background_grants: true, boot_id: Some(boot.into()), bound_decay: Duration::from_secs(3600) }
    }

    fn held(name: &str, lease: u128, lease_ms: u64) -> LeaseRecord {
        LeaseRecord { lease_ms, ..rec(name, lease, lease as u64) }
    }

    #[tokio::test]
    async fn background_grants_are_bounded_and_only_a_new_boot_waits_the_bound_out() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), background("boot-1")).unwrap();
        // The first grant raises the bound, so it waits for its sync; a shorter one does not raise it.
        j.append(Change::Hold(held("a", 1, 90_000))).await.unwrap().unwrap();
        j.append(Change::Hold(held("b", 2, 30_000))).await.unwrap().unwrap();
        let copy = snapshot(dir.path());
        let replayed = replay(&copy.path().join(JOURNAL_FILE)).unwrap().unwrap();
        assert_eq!(sorted(replayed.leases.clone()), vec![held("a", 1, 90_000), held("b", 2, 30_000)]);
        assert_eq!((replayed.bound_ms, replayed.closed), (90_000, false));
        // A process that was killed: the same boot, nothing lost, no wait.
        assert_eq!(replayed.grace_ms(Some("boot-1")), 0);
        // The machine restarted: grants answered ahead of their sync may be lost.
        assert_eq!(replayed.grace_ms(Some("boot-2")), 90_000);
        assert_eq!(replayed.grace_ms(None), 90_000);
        let (_, opened) = Journal::open(copy.path(), background("boot-2")).unwrap();
        assert_eq!((opened.grace_ms, opened.leases.len()), (90_000, 2));
        // A clean stop syncs everything and says so: no wait even on a new boot.
        drop(j);
        let replayed = replay(&dir.path().join(JOURNAL_FILE)).unwrap().unwrap();
        assert!(replayed.closed);
        assert_eq!(replayed.grace_ms(Some("boot-2")), 0);
        // A reopened journal starts a new bound; each-grant journals never write one.
        let (j, opened) =
            Journal::open(dir.path(), JournalOptions { background_grants: false, ..background("boot-2") }).unwrap();
        assert_eq!((opened.grace_ms, opened.leases.len()), (0, 2));
        j.append(Change::Hold(held("c", 3, 120_000))).await.unwrap().unwrap();
        let replayed = replay(&snapshot(dir.path()).path().join(JOURNAL_FILE)).unwrap().unwrap();
        assert_eq!((replayed.bound_ms, replayed.grace_ms(Some("boot-3"))), (0, 0));
    }

    /// The wait a start under another boot would impose, were the machine to stop now.
    fn grace_after_a_power_loss(dir: &Path) -> u64 {
        replay(&snapshot(dir).path().join(JOURNAL_FILE)).unwrap().unwrap().grace_ms(Some("boot-2"))
    }

    #[tokio::test]
    async fn the_bound_falls_to_the_leases_answered_ahead_since_it_last_fell() {
        const HOUR: u64 = 3_600_000;
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), background("boot-1")).unwrap();
        // One long lease raises the bound; a short one is answered ahead under it.
        j.append(Change::Hold(held("long", 1, HOUR))).await.unwrap().unwrap();
        j.append(Change::Hold(held("short", 2, 10_000))).await.unwrap().unwrap();
        assert_eq!(grace_after_a_power_loss(dir.path()), HOUR);
        let mut at = Instant::now();
        assert!(!j.shared.lock().lower_bound(at), "lowered before it was due");
        // Due: only the short lease was answered ahead since the bound rose.
        at += Duration::from_secs(7200);
        assert!(j.shared.lock().lower_bound(at));
        assert_eq!(grace_after_a_power_loss(dir.path()), 10_000);
        // Both leases are in the file: the long one is restored, not waited out.
        let mut names: Vec<_> = replay(&snapshot(dir.path()).path().join(JOURNAL_FILE)).unwrap().unwrap().leases;
        names.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(names, vec![held("long", 1, HOUR), held("short", 2, 10_000)]);
        // A lease above the lowered bound is not answered ahead: it raises the bound again.
        j.append(Change::Hold(held("minute", 3, 60_000))).await.unwrap().unwrap();
        assert_eq!(grace_after_a_power_loss(dir.path()), 60_000);
        // Nothing answered ahead since: the bound falls to zero, and the next grant raises it.
        at += Duration::from_secs(7200);
        assert!(j.shared.lock().lower_bound(at));
        assert_eq!(grace_after_a_power_loss(dir.path()), 0);
        j.append(Change::Hold(held("five", 4, 5_000))).await.unwrap().unwrap();
        assert_eq!(grace_after_a_power_loss(dir.path()), 5_000);
        // Each raise waited for its sync, so none was answered ahead: due again, it falls.
        at += Duration::from_secs(7200);
        assert!(j.shared.lock().lower_bound(at));
        assert_eq!(grace_after_a_power_loss(dir.path()), 0);
        // A bound that is not above what was answered ahead stays.
        j.append(Change::Hold(held("again", 5, 5_000))).await.unwrap().unwrap();
        j.append(Change::Hold(held("ahead", 6, 5_000))).await.unwrap().unwrap();
        at += Duration::from_secs(7200);
        assert!(!j.shared.lock().lower_bound(at));
        assert_eq!(grace_after_a_power_loss(dir.path()), 5_000);
    }

    #[tokio::test]
    async fn the_syncer_lowers_the_bound_on_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let options = JournalOptions { bound_decay: Duration::from_millis(20), ..background("boot-1") };
        let (j, _) = Journal::open(dir.path(), options).unwrap();
        j.append(Change::Hold(held("long", 1, 3_600_000))).await.unwrap().unwrap();
        // Polled, not timed: the bound falls to zero within a few periods once nothing is answered ahead.
        let deadline = Instant::now() + Duration::from_secs(30);
        while grace_after_a_power_loss(dir.path()) != 0 {
            assert!(Instant::now() < deadline, "the bound never fell");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The lowered bound is synced by the syncer itself, and a clean stop ends the file as before.
        let deadline = Instant::now() + Duration::from_secs(30);
        while j.shared.lock().pending_bound.is_some() || j.shared.lock().file.unsynced() {
            assert!(Instant::now() < deadline, "the lowered bound was never synced");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(j);
        assert!(replay(&dir.path().join(JOURNAL_FILE)).unwrap().unwrap().closed);
    }

    /// Whether some thread of this process named like the syncer runs
    /// under `SCHED_BATCH` (other tests' journals share the name).
    fn a_syncer_runs_batch() -> bool {
        fs::read_dir("/proc/self/task").unwrap().flatten().any(|task| {
            let comm = fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let tid: libc::pid_t = task.file_name().to_string_lossy().parse().unwrap();
            // SAFETY: a query about a thread id; it reads no memory of ours.
            comm.trim_end() == "fencing-lease-j" && unsafe { libc::sched_getscheduler(tid) } == libc::SCHED_BATCH
        })
    }

    #[tokio::test]
    async fn the_syncer_does_not_preempt_the_thread_it_wakes_on() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = open(dir.path());
        // Answered by the syncer, which has then set its policy.
        j.append(Change::Hold(rec("a", 1, 1))).await.unwrap().unwrap();
        assert!(a_syncer_runs_batch());
    }

    #[tokio::test]
    async fn appends_during_a_rewrite_are_held_and_written_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = Journal::open(dir.path(), background("boot-1")).unwrap();
        j.append(Change::Hold(held("a", 1, 60_000))).await.unwrap().unwrap();
        // Pretend a rewrite is under way: appends are held, unanswered.
        j.shared.lock().rewriting = Some(Held::default());
        let mut grant = j.append(Change::Hold(held("b", 2, 60_000)));
        let mut release = j.append_written(Change::Release { name: "a".into(), lease: 1 });
        std::thread::sleep(Duration::from_millis(20));
        assert!(grant.try_recv().is_err() && release.try_recv().is_err(), "answered while held");
        let mut syncer = Syncer::new(dir.path(), &background("boot-1"), &[]);
        // The rewrite, by this test's syncer standing in for the thread's.
        assert!(syncer.try_compact(&j.shared, std::time::Instant::now()));
        release.await.unwrap().unwrap();
        grant.await.unwrap().unwrap();
        drop(j);
        let replayed = replay(&dir.path().join(JOURNAL_FILE)).unwrap().unwrap();
        assert_eq!(replayed.leases, vec![held("b", 2, 60_000)]);
        assert_eq!(replayed.boot.as_deref(), Some("boot-1"));
    }

    #[tokio::test]
    async fn a_failing_rewrite_backs_off_and_the_journal_keeps_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = open(dir.path());
        j.append(Change::Hold(rec("a", 1, 5))).await.unwrap().unwrap();
        // The rewrite's temporary file cannot be created where a directory is.
        fs::create_dir(dir.path().join(format!("{JOURNAL_FILE}.tmp"))).unwrap();
        let mut syncer = Syncer::new(dir.path(), &JournalOptions::default(), &[]);
        let t0 = std::time::Instant::now();
        assert!(syncer.try_compact(&j.shared, t0), "the first rewrite is tried");
        assert!(!syncer.try_compact(&j.shared, t0 + Duration::from_millis(500)), "retried within its backoff");
        assert!(syncer.try_compact(&j.shared, t0 + Duration::from_secs(1)), "not retried after its backoff");
        // Appends go on in the old file, and nothing in it was lost.
        j.append(Change::Hold(rec("b", 2, 6))).await.unwrap().unwrap();
        assert!(j.shared.lock().rewriting.is_none());
        drop(j);
        fs::remove_dir(dir.path().join(format!("{JOURNAL_FILE}.tmp"))).unwrap();
        let (_, restored) = open(dir.path());
        assert_eq!(sorted(restored), vec![rec("a", 1, 5), rec("b", 2, 6)]);
    }

    fn sorted(mut v: Vec<LeaseRecord>) -> Vec<LeaseRecord> {
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    #[tokio::test]
    async fn holds_survive_reopen_and_releases_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let (j, restored) = open(dir.path());
        assert!(restored.is_empty());
        j.append(Change::Hold(rec("a", 1, 5))).await.unwrap().unwrap();
        j.append(Change::Hold(rec("b", 2, 6))).await.unwrap().unwrap();
        j.append_unacknowledged(Change::Renew { name: "a".into(), lease: 1, lease_ms: 60_000 });
        // A release naming another lease leaves the holder alone.
        j.append(Change::Release { name: "b".into(), lease: 99 }).await.unwrap().unwrap();
        j.append(Change::Release { name: "a".into(), lease: 1 }).await.unwrap().unwrap();
        drop(j);
        let (_, restored) = open(dir.path());
        assert_eq!(sorted(restored), vec![rec("b", 2, 6)]);
    }

    #[tokio::test]
    async fn a_release_is_in_the_file_when_it_is_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = open(dir.path());
        j.append(Change::Hold(rec("a", 1, 5))).await.unwrap().unwrap();
        j.append(Change::Hold(rec("b", 2, 6))).await.unwrap().unwrap();
        j.append_written(Change::Release { name: "a".into(), lease: 1 }).await.unwrap().unwrap();
        // What a process killed now leaves behind: the file as the kernel has it.
        let copy = tempfile::tempdir().unwrap();
        fs::copy(dir.path().join(JOURNAL_FILE), copy.path().join(JOURNAL_FILE)).unwrap();
        assert_eq!(replay(&copy.path().join(JOURNAL_FILE)).unwrap().unwrap().leases, vec![rec("b", 2, 6)]);
    }

    #[tokio::test]
    async fn the_file_is_rewritten_with_the_live_leases_once_it_outgrows_them() {
        let dir = tempfile::tempdir().unwrap();
        let (j, _) = open(dir.path());
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
        let (_, restored) = open(dir.path());
        assert_eq!(restored, vec![rec("kept", 1, 1)]);
    }

    /// A journal file as the service writes one: `BOOT`, `records`, zeros to a whole block.
    fn journal_bytes(records: &[Change], tail: &[u8]) -> (Vec<u8>, usize) {
        let mut bytes = Vec::new();
        format::encode_boot("boot-1", &mut bytes);
        for c in records {
            encode(c, &mut bytes);
        }
        let good = bytes.len();
        bytes.extend_from_slice(tail);
        bytes.resize(PREALLOCATE_BYTES as usize, 0);
        (bytes, good)
    }

    #[test]
    fn a_torn_tail_is_dropped_and_corruption_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(JOURNAL_FILE);
        let mut torn = Vec::new();
        encode(&Change::Hold(rec("b", 2, 6)), &mut torn);
        torn.truncate(torn.len() - 3);
        let (bytes, _) = journal_bytes(&[Change::Hold(rec("a", 1, 5))], &torn);
        fs::write(&path, &bytes).unwrap();
        let (j, restored) = open(dir.path());
        assert_eq!(restored, vec![rec("a", 1, 5)]);
        // The rewrite dropped the torn record: zeros follow the good ones
        // (the rewrite's own `BOOT`, without a boot id, and the lease).
        let mut kept = Vec::new();
        format::encode_boot("", &mut kept);
        encode(&Change::Hold(rec("a", 1, 5)), &mut kept);
        let good = kept.len();
        let rewritten = fs::read(&path).unwrap();
        assert_eq!(records_len(&rewritten), good);
        assert!(rewritten[good..].iter().all(|&b| b == 0) && rewritten.len() > good);
        // A clean stop ends the file with its mark.
        drop(j);
        assert!(replay(&path).unwrap().unwrap().closed);
        // A checksummed record of an unknown kind is corruption.
        let mut bad = Vec::new();
        encode(&Change::Release { name: "a".into(), lease: 1 }, &mut bad);
        bad[8] = 77;
        let crc = crc32fast::hash(&bad[8..]);
        bad[4..8].copy_from_slice(&crc.to_le_bytes());
        let (bytes, at) = journal_bytes(&[], &bad);
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            Journal::open(dir.path(), JournalOptions::default()),
            Err(JournalError::Corrupt { offset, .. }) if offset == at as u64
        ));
    }

    /// Whether opening `bytes` as the journal is refused as not whole, and the problem named.
    fn refused(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(JOURNAL_FILE), bytes).unwrap();
        match Journal::open(dir.path(), JournalOptions::default()) {
            Err(JournalError::NotWhole { problem, .. }) => problem,
            Err(e) => panic!("refused otherwise: {e}"),
            Ok((_, opened)) => panic!("opened with {} leases", opened.leases.len()),
        }
    }

    /// An emptied file, random bytes of a block's length or another one, a
    /// file cut inside a record or at a record's end, a file of zeros: each
    /// is refused, none read as "no leases".
    #[test]
    fn a_journal_that_does_not_read_back_whole_is_refused() {
        let (whole, good) = journal_bytes(&[Change::Hold(rec("a", 1, 5)), Change::Hold(rec("b", 2, 6))], &[]);
        assert!(refused(&[]).contains("is empty"));
        let random: Vec<u8> = (0..PREALLOCATE_BYTES).map(|_| rand::random::<u8>()).collect();
        assert!(refused(&random).contains("does not begin with"));
        assert!(refused(&random[..1000]).contains("not a whole number"));
        assert!(refused(&vec![0; PREALLOCATE_BYTES as usize]).contains("does not begin with"));
        assert!(refused(&whole[..good - 5]).contains("not a whole number"), "cut inside a record");
        assert!(refused(&whole[..good]).contains("not a whole number"), "cut at a record's end");
        // Cut at a block's end inside a record: the record runs past the file.
        let mut long = Vec::new();
        format::encode_boot("boot-1", &mut long);
        let filler = LeaseRecord { client_id: "c".repeat(1000), ..rec("x", 9, 9) };
        while long.len() < PREALLOCATE_BYTES as usize {
            encode(&Change::Hold(filler.clone()), &mut long);
        }
        let cut = &long[..PREALLOCATE_BYTES as usize];
        assert!(refused(cut).contains("ends inside a record"), "{}", refused(cut));
        // A record of another kind first: not a journal the service wrote.
        let mut other = Vec::new();
        encode(&Change::Hold(rec("a", 1, 5)), &mut other);
        other.resize(PREALLOCATE_BYTES as usize, 0);
        assert!(refused(&other).contains("does not begin with"));
        // The whole file opens, with its leases.
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(JOURNAL_FILE), &whole).unwrap();
        assert_eq!(sorted(open(dir.path()).1), vec![rec("a", 1, 5), rec("b", 2, 6)]);
        // And what the service itself writes is whole, with or without a boot id.
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path()));
        assert!(Journal::reads_whole(dir.path()).unwrap());
    }

    /// A start's wait is in the file: a restart before it ran out waits
    /// again, and once it has, `WAIT 0` ends it for every later start.
    #[tokio::test]
    async fn a_starts_wait_survives_a_restart_until_it_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        Journal::write_recovery(dir.path(), 600_000).unwrap();
        let (j, opened) = Journal::open(dir.path(), background("boot-1")).unwrap();
        assert_eq!((opened.grace_ms, opened.leases.len()), (600_000, 0));
        // Killed during the wait (the file as the kernel has it): the next start waits again, on the same boot too.
        let copy = snapshot(dir.path());
        let (_, again) = Journal::open(copy.path(), background("boot-1")).unwrap();
        assert!(again.grace_ms > 590_000 && again.grace_ms <= 600_000, "{}", again.grace_ms);
        drop(j);
        // A wait that ran out is ended in the file by the syncer (here: a short one, polled).
        Journal::write_recovery(dir.path(), 50).unwrap();
        let (j, opened) = Journal::open(dir.path(), background("boot-1")).unwrap();
        assert_eq!(opened.grace_ms, 50);
        let deadline = Instant::now() + Duration::from_secs(30);
        while replay(&snapshot(dir.path()).path().join(JOURNAL_FILE)).unwrap().unwrap().wait_ms != 0 {
            assert!(Instant::now() < deadline, "the wait was never ended in the file");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (_, after) = Journal::open(snapshot(dir.path()).path(), background("boot-1")).unwrap();
        assert_eq!(after.grace_ms, 0);
        drop(j);
    }
}
