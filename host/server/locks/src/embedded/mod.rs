//! The embedded lock service: leases in memory and in a group-committed
//! journal, tokens from a durable generation clock.
//!
//! Invariants:
//! - Tokens: each lock's next token is `last + 1`, where a lock seen for the
//!   first time (or dropped from memory while idle) starts from the highest
//!   token that could have been issued for it (the previous run's durable
//!   ceiling, or the highest token of any dropped entry of its shard). Before
//!   a token is returned it is below the durable ceiling; ranges of
//!   `reserve_chunk` tokens are reserved ahead of use in the background, so
//!   the hot path never waits for the clock except when it outruns the reserve.
//! - Exclusion across restarts: a grant is acknowledged only once the
//!   journal holds it durably (with `background_grants`, once it is in the
//!   journal's file and its lease within the journal's synced bound), and a
//!   release once it is written to the journal's file (synced right after;
//!   see `journal/mod.rs` for why a release lost with the machine is safe,
//!   and how a restart after a new boot waits out lost background grants).
//!   A restart restores every lease the
//!   journal holds, with its lease id and token, re-armed for its full
//!   duration from the restart. A holder's own deadline (last renewal +
//!   duration, on its clock) ends before the restored one (restart +
//!   duration), so no lease from before the restart can still be running
//!   when the lock is next granted. Locks the journal does not hold are free
//!   at once.
//! - A lease journal that does not read back whole (emptied, cut short,
//!   overwritten), or a missing one in a directory whose clock says leases
//!   were granted, cannot say which leases are held: the service refuses to
//!   start ([`OpenError::LeasesUnknown`], naming the recovery command),
//!   never reads it as "no leases". `fencing admin recover-leases` then
//!   writes a journal that makes the next start grant nothing until the
//!   longest lease ever granted has run out (the clock keeps it durable
//!   before any such lease is granted), and that wait survives a restart.
//! - A missing clock in a directory whose journal shows the service ran
//!   there would start tokens again from zero: refused too
//!   ([`OpenError::ClockMissing`]).
//! - Leases expire on `Instant` (monotonic), never on wall time.
//! - Waiters are served first come, first served: a lock that becomes free is
//!   granted only to the head of its queue; a waiter that gives up or whose
//!   caller goes away leaves the queue and hands the turn to the next.
//! - At most `max_held` leases are held at once; one more is refused with
//!   [`LockError::AtCapacity`] after expired ones are settled.
//! - Re-entry (with `reentrant`) needs the lease's own `lock_token`; a
//!   `client_id` is a label, never a capability.

mod acquire;
mod lease_ops;
mod state;

use self::state::LockState;
use crate::clock::{ClockError, GenerationClock};
use crate::journal::{Journal, JournalError, JournalOptions};
use crate::metrics::LockMetrics;
use crate::table::{Holder, Shard};
use crate::{Acquired, BoxFuture, LockError, LockService, ValidAcquire};
use fencing_api::wire::locks::{LeaseRef, Released, Renewed, Status};
use std::hash::RandomState;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shards of the lock table, each under its own mutex.
const SHARDS: usize = 64;

/// Whether tokens count per lock or across all locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenMode {
    /// Each lock has its own sequence (`1, 2, 3` on a fresh service).
    #[default]
    PerLock,
    /// One counter for every lock: a token also orders grants across locks.
    Global,
}

/// Settings of the embedded service.
#[derive(Debug, Clone)]
pub struct EmbeddedConfig {
    /// Where the generation clock and the lease journal live; `None` keeps
    /// both in memory (no crash safety).
    pub data_dir: Option<PathBuf>,
    pub token_mode: TokenMode,
    /// Re-acquiring a held lock with its lease's `lock_token` returns the same lease and token.
    pub reentrant: bool,
    /// Tokens reserved per durable write of the clock.
    pub reserve_chunk: u64,
    /// Most leases held at once.
    pub max_held: usize,
    /// Answer grants once the journal has written them, ahead of their sync
    /// (`--lease-sync background`, what `fencing serve` runs by default; see
    /// `journal/mod.rs` for what a machine crash then costs). Off in
    /// `Default`, the stricter mode: each grant waits for its sync.
    pub background_grants: bool,
    /// This boot of the machine; see `JournalOptions::boot_id` (`None` if unknown).
    pub boot_id: Option<String>,
    /// With background grants, how often the journal's bound on their leases
    /// falls to the longest lease answered ahead since (`JournalOptions::bound_decay`).
    pub bound_decay: Duration,
}

/// Default [`EmbeddedConfig::max_held`].
pub const DEFAULT_MAX_HELD: usize = 1_000_000;

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig {
            data_dir: None,
            token_mode: TokenMode::PerLock,
            reentrant: false,
            reserve_chunk: 1 << 20,
            max_held: DEFAULT_MAX_HELD,
            background_grants: false,
            boot_id: crate::journal::current_boot_id(),
            bound_decay: crate::journal::BOUND_DECAY,
        }
    }
}

/// Why the service could not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The journal is missing or not whole: which leases are held is unknown.
    #[error(
        "{problem}, so the lock service cannot tell which leases are held (leases of up to {max_lease_ms} ms \
         have been granted here); it will not start and guess. Keep a copy of the data directory if you want \
         to look into it, then start over waiting out every lease that may be held (the first grant waits \
         {max_lease_ms} ms; tokens stay above every one handed out): \
         fencing admin recover-leases --data-dir {}",
        crate::secrets::shell_quote(dir)
    )]
    LeasesUnknown { dir: PathBuf, problem: String, max_lease_ms: u64 },
    /// The clock is missing where the journal shows the service ran.
    #[error(
        "the generation clock {}/locks-clock is missing, but the lease journal beside it shows this lock \
         service has granted leases here: started now, it would hand out tokens from 1 again, below tokens \
         already given out. Recreate it above every token this service has handed out (the highest high_water \
         your storage shows for its resources will do), keeping the journal's leases: \
         fencing admin bump-tokens --data-dir {} --to <TOKEN> --keep-leases",
        dir.display(),
        crate::secrets::shell_quote(dir)
    )]
    ClockMissing { dir: PathBuf },
}

/// The embedded lock service. Clones share state.
#[derive(Clone)]
pub struct EmbeddedLocks {
    inner: Arc<LockState>,
}

impl EmbeddedLocks {
    /// Opens the service: reads the clock, restores the journal's leases and reserves the first range.
    pub fn open(cfg: EmbeddedConfig, metrics: LockMetrics) -> Result<EmbeddedLocks, OpenError> {
        let (clock, previous) = GenerationClock::open(cfg.data_dir.as_deref())?;
        if let Some(dir) = &cfg.data_dir {
            check_state_files(dir, previous)?;
        }
        let base = previous.ceiling;
        let chunk = cfg.reserve_chunk.max(1);
        let durable = clock.advance(base.saturating_add(chunk), previous.max_lease_ms)?;
        let mut grace_until = Instant::now();
        let (journal, restored) = match &cfg.data_dir {
            None => (None, Vec::new()),
            Some(dir) => {
                let options = JournalOptions {
                    background_grants: cfg.background_grants,
                    boot_id: cfg.boot_id.clone(),
                    bound_decay: cfg.bound_decay,
                };
                let (journal, opened) = Journal::open(dir, options).map_err(|e| match e {
                    JournalError::NotWhole { path, problem } => OpenError::LeasesUnknown {
                        dir: dir.clone(),
                        problem: format!("the lease journal {} {problem}", path.display()),
                        max_lease_ms: previous.max_lease_ms,
                    },
                    JournalError::Corrupt { path, offset, detail } => OpenError::LeasesUnknown {
                        dir: dir.clone(),
                        problem: format!("the lease journal {} is corrupt at byte {offset} ({detail})", path.display()),
                        max_lease_ms: previous.max_lease_ms,
                    },
                    e => OpenError::Journal(e),
                })?;
                if opened.grace_ms > 0 {
                    // The journal's own deadline: it writes `WAIT 0` from that moment.
                    grace_until = grace_until.max(opened.grace_until);
                    tracing::warn!(
                        grace_ms = opened.grace_ms,
                        "leases this service cannot see may still be running (a recovered lease journal, or grants \
                         answered ahead of their sync before the machine restarted): no lock the journal does not \
                         hold is granted until they have run out"
                    );
                }
                (Some(journal), opened.leases)
            }
        };
        let inner = LockState {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            clock,
            journal,
            ceiling: AtomicU64::new(durable.ceiling),
            max_lease_ms: AtomicU64::new(durable.max_lease_ms),
            issued: AtomicU64::new(base),
            base,
            reserving: AtomicBool::new(false),
            held: AtomicUsize::new(0),
            grace_until,
            next_waiter: AtomicU64::new(0),
            cfg,
            metrics,
        };
        let now = Instant::now();
        let leases = restored.len();
        for r in restored {
            let expires = now + Duration::from_millis(r.lease_ms);
            let holder =
                Holder { lease: r.lease, client_id: r.client_id, token: r.token, lease_ms: r.lease_ms, expires };
            inner.shard(&r.name).restore(r.name, holder, base);
            inner.counts().try_add(usize::MAX);
        }
        if leases > 0 {
            tracing::info!(leases, base, "lock service restarted: restored held leases");
        }
        Ok(EmbeddedLocks { inner: Arc::new(inner) })
    }

    /// Leases held now (expired ones included until settled).
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::Acquire)
    }
}

/// Refuses to open on state files that cannot be trusted: a journal
/// missing where the clock says leases were granted, a clock missing where
/// a journal shows the service ran. (A journal that is there but not whole
/// is refused by its replay.)
fn check_state_files(dir: &std::path::Path, previous: crate::ClockState) -> Result<(), OpenError> {
    use crate::clock::CLOCK_FILE;
    use crate::journal::JOURNAL_FILE;
    let journal = dir.join(JOURNAL_FILE);
    let clock_exists = dir.join(CLOCK_FILE).exists();
    if !clock_exists && journal.metadata().is_ok_and(|m| m.len() > 0) {
        return Err(OpenError::ClockMissing { dir: dir.to_path_buf() });
    }
    if clock_exists && previous.max_lease_ms > 0 && !journal.exists() {
        return Err(OpenError::LeasesUnknown {
            dir: dir.to_path_buf(),
            problem: format!("the lease journal {} is missing", journal.display()),
            max_lease_ms: previous.max_lease_ms,
        });
    }
    Ok(())
}

impl LockService for EmbeddedLocks {
    fn acquire(&self, req: ValidAcquire) -> BoxFuture<'_, Result<Acquired, LockError>> {
        Box::pin(self.acquire_inner(req))
    }
    fn renew(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Renewed, LockError>> {
        Box::pin(std::future::ready(self.renew_inner(lease)))
    }
    fn release(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Released, LockError>> {
        Box::pin(self.release_inner(lease))
    }
    fn status(&self, resource_id: String) -> BoxFuture<'_, Result<Status, LockError>> {
        Box::pin(std::future::ready(self.status_inner(resource_id)))
    }
    fn backend(&self) -> &'static str {
        "embedded"
    }
}
