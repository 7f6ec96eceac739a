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
//! - A data directory with a clock but no journal (written by a version
//!   without one) gets the old rule once: every acquisition waits out the
//!   longest lease ever granted.
//! - Leases expire on `Instant` (monotonic), never on wall time.
//! - Waiters are served first come, first served: a lock that becomes free is
//!   granted only to the head of its queue; a waiter that gives up or whose
//!   caller goes away leaves the queue and hands the turn to the next.
//! - At most `max_held` leases are held at once; one more is refused with
//!   [`LockError::AtCapacity`] after expired ones are settled.
//! - Re-entry (with `reentrant`) needs the lease's own `lock_token`; a
//!   `client_id` is a label, never a capability.

use super::clock::{ClockError, GenerationClock};
use super::journal::{Change, Durable, Journal, JournalError, JournalOptions, LeaseRecord};
use super::metrics::LockMetrics;
use super::table::{Counts, Holder, Shard};
use super::{Acquired, BoxFuture, LeaseStamp, LockError, LockService, ValidAcquire};
use crate::wire::locks::{AcquireRequest, Grant, HeldReason, LeaseRef, Refusal, Released, Renewed, Status};
use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const SHARDS: usize = 64;

/// Whether tokens count per lock or across all locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
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
            boot_id: super::journal::current_boot_id(),
            bound_decay: super::journal::BOUND_DECAY,
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
}

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: GenerationClock,
    journal: Option<Journal>,
    /// Durable ceiling (cache of the clock's): every issued token is below it.
    ceiling: AtomicU64,
    /// Durable longest lease (cache of the clock's).
    max_lease_ms: AtomicU64,
    /// Highest token issued (the counter itself in global mode).
    issued: AtomicU64,
    /// Tokens from before this start are all below `base`.
    base: u64,
    reserving: AtomicBool,
    /// Leases held, in all shards.
    held: AtomicUsize,
    /// Only for a data directory without a journal: when its old leases have surely ended.
    grace_until: Instant,
    next_waiter: AtomicU64,
    cfg: EmbeddedConfig,
    metrics: LockMetrics,
}

/// The embedded lock service. Clones share state.
#[derive(Clone)]
pub struct EmbeddedLocks {
    inner: Arc<Inner>,
}

impl EmbeddedLocks {
    /// Opens the service: reads the clock, restores the journal's leases and reserves the first range.
    pub fn open(cfg: EmbeddedConfig, metrics: LockMetrics) -> Result<EmbeddedLocks, OpenError> {
        let (clock, previous) = GenerationClock::open(cfg.data_dir.as_deref())?;
        let base = previous.ceiling;
        let chunk = cfg.reserve_chunk.max(1);
        let durable = clock.advance(base.saturating_add(chunk), previous.max_lease_ms)?;
        let mut grace_until = Instant::now();
        let (journal, restored) = match &cfg.data_dir {
            None => (None, Vec::new()),
            Some(dir) => {
                if !dir.join(super::journal::JOURNAL_FILE).exists() && previous.max_lease_ms > 0 {
                    grace_until += Duration::from_millis(previous.max_lease_ms);
                    tracing::info!(grace_ms = previous.max_lease_ms, "no lease journal: waiting out earlier leases");
                }
                let options = JournalOptions {
                    background_grants: cfg.background_grants,
                    boot_id: cfg.boot_id.clone(),
                    bound_decay: cfg.bound_decay,
                };
                let (journal, opened) = Journal::open(dir, options)?;
                if opened.grace_ms > 0 {
                    grace_until = grace_until.max(Instant::now() + Duration::from_millis(opened.grace_ms));
                    tracing::warn!(
                        grace_ms = opened.grace_ms,
                        "the machine restarted since the lease journal was written and grants were answered \
                         ahead of their sync: waiting out the longest such lease"
                    );
                }
                (Some(journal), opened.leases)
            }
        };
        let inner = Inner {
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

    async fn acquire_inner(&self, req: ValidAcquire) -> Result<Acquired, LockError> {
        let presented = req.lock_token.as_deref().and_then(super::parse_lease_id);
        if presented.is_some() && !self.inner.cfg.reentrant {
            return Err(LockError::invalid("lock_token", "re-entry is not enabled on this server (--reentrant)"));
        }
        let req = req.into_inner();
        let inner = &self.inner;
        inner.ensure_lease_durable(req.lease_duration_ms)?;
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms.unwrap_or(0));
        let mut queued: Option<WaiterGuard> = None;
        loop {
            let now = Instant::now();
            if inner.held.load(Ordering::Acquire) >= inner.cfg.max_held {
                inner.sweep_all(now);
            }
            let step = {
                let mut shard = inner.shard(&req.resource_id);
                let counts = inner.counts();
                shard.sweep_some(now, &counts);
                if now >= inner.grace_until {
                    shard.entry(&req.resource_id, inner.base);
                    let free = shard.settle(&req.resource_id, now, &counts);
                    let entry = shard.get_mut(&req.resource_id).expect("entry created above");
                    let my_turn = match &queued {
                        Some(w) => entry.waiters.front().map(|(id, _)| *id) == Some(w.id),
                        None => entry.waiters.is_empty(),
                    };
                    if free && my_turn {
                        let (grant, durable) = inner.grant(&mut shard, &req, queued.is_some(), now)?;
                        Step::Granted(grant, durable)
                    } else if let (Some(h), Some(id)) = (&entry.holder, presented)
                        && h.lease == id
                    {
                        let (grant, durable) = inner.regrant(&mut shard, &req, now);
                        Step::Regranted(grant, durable)
                    } else {
                        let remaining = entry.holder.as_ref().map(|h| h.expires - now).unwrap_or_default();
                        self.wait_or_refuse(&mut shard, &req, &mut queued, HeldReason::Held, remaining, now, deadline)
                    }
                } else {
                    let remaining = inner.grace_until - now;
                    self.wait_or_refuse(
                        &mut shard,
                        &req,
                        &mut queued,
                        HeldReason::GracePeriod,
                        remaining,
                        now,
                        deadline,
                    )
                }
            };
            let (wake_at, notify) = match step {
                Step::Granted(grant, durable) => {
                    drop(queued);
                    return self.await_grant(grant, durable).await.map(Acquired::Granted);
                }
                Step::Regranted(grant, durable) => {
                    return await_durable(durable).await.map(|()| Acquired::Granted(grant));
                }
                Step::Refused(refusal) => return Ok(Acquired::Refused(refusal)),
                Step::Wait(wake_at, notify) => (wake_at, notify),
            };
            let sleep = tokio::time::sleep_until(wake_at.max(now + Duration::from_millis(1)).into());
            match notify {
                Some(n) => {
                    tokio::select! {
                        _ = n.notified() => {}
                        _ = sleep => {}
                    }
                }
                None => sleep.await,
            }
        }
    }

    /// Refuses `req` once its deadline has passed; otherwise queues it (on a
    /// held lock) and says until when to wait.
    #[allow(clippy::too_many_arguments)]
    fn wait_or_refuse(
        &self,
        shard: &mut Shard,
        req: &AcquireRequest,
        queued: &mut Option<WaiterGuard>,
        reason: HeldReason,
        remaining: Duration,
        now: Instant,
        deadline: Instant,
    ) -> Step {
        if now >= deadline {
            self.inner.metrics.contention.inc();
            shard.note_idle(&req.resource_id);
            return Step::Refused(Refusal {
                resource_id: req.resource_id.clone(),
                lock_acquired: false,
                reason,
                remaining_lease_ms: ceil_ms(remaining),
            });
        }
        if queued.is_none() && reason == HeldReason::Held {
            let id = self.inner.next_waiter.fetch_add(1, Ordering::Relaxed);
            let notify = Arc::new(Notify::new());
            let entry = shard.get_mut(&req.resource_id).expect("entry created by the caller");
            entry.waiters.push_back((id, notify.clone()));
            *queued = Some(WaiterGuard { locks: self.clone(), resource_id: req.resource_id.clone(), id, notify });
        }
        let notify = queued.as_ref().map(|w| w.notify.clone());
        Step::Wait((now + remaining).min(deadline), notify)
    }

    /// Answers a grant once the journal holds it; if it cannot, undoes the
    /// grant (unless the lease already changed) and reports the backend unavailable.
    async fn await_grant(&self, grant: Grant, durable: Option<Durable>) -> Result<Grant, LockError> {
        let Err(e) = await_durable(durable).await else { return Ok(grant) };
        let lease = super::parse_lease_id(&grant.lock_token).expect("the service formatted it");
        let inner = &self.inner;
        let mut shard = inner.shard(&grant.resource_id);
        if shard.get_mut(&grant.resource_id).and_then(|e| e.holder.as_ref()).is_some_and(|h| h.lease == lease) {
            shard.unhold(&grant.resource_id, &inner.counts());
            if let Some(j) = &inner.journal {
                j.append_unacknowledged(Change::Release { name: grant.resource_id.as_str().into(), lease });
            }
        }
        tracing::error!(error = %e, lock = %grant.resource_id, "grant undone: the lease journal could not hold it");
        Err(e)
    }

    fn renew_inner(&self, lease: LeaseRef) -> Result<Renewed, LockError> {
        let inner = &self.inner;
        let (token, lease_ms) = self.with_lease(&lease, |shard, name, id, now| {
            let entry = shard.get_mut(name).expect("with_lease found the entry");
            let h = entry.holder.as_mut().expect("with_lease found the holder");
            h.expires = now + Duration::from_millis(h.lease_ms);
            inner.metrics.renewals.inc();
            if let Some(j) = &inner.journal {
                j.append_unacknowledged(Change::Renew { name: name.into(), lease: id, lease_ms: h.lease_ms });
            }
            (h.token, h.lease_ms)
        })?;
        Ok(Renewed { resource_id: lease.resource_id, renewed: true, fencing_token: token, lease_duration_ms: lease_ms })
    }

    async fn release_inner(&self, lease: LeaseRef) -> Result<Released, LockError> {
        let inner = &self.inner;
        let (token, durable) = self.with_lease(&lease, |shard, name, id, _| {
            let h = shard.unhold(name, &inner.counts()).expect("with_lease found the holder");
            inner.metrics.releases.inc();
            let durable =
                inner.journal.as_ref().map(|j| j.append_written(Change::Release { name: name.into(), lease: id }));
            (h.token, durable)
        })?;
        await_durable(durable).await?;
        Ok(Released { resource_id: lease.resource_id, released: true, fencing_token: token })
    }

    /// Runs `f` on the shard of the lock `lease` names, under its mutex, once
    /// expiry is settled and `lease` is known to hold it (the entry exists
    /// and its holder's lease is `lease`'s id, passed to `f`).
    ///
    /// Errors: `lease` fails [`super::validate_lease`]; `LeaseExpired` when it is
    /// the lock's most recently expired lease; `WrongLease` when the lock is
    /// unknown or any other lease (or none) holds it.
    fn with_lease<T>(
        &self,
        lease: &LeaseRef,
        f: impl FnOnce(&mut Shard, &str, u128, Instant) -> T,
    ) -> Result<T, LockError> {
        let id = super::validate_lease(lease)?;
        let inner = &self.inner;
        let now = Instant::now();
        let name = lease.resource_id.as_str();
        let mut shard = inner.shard(name);
        let counts = inner.counts();
        shard.sweep_some(now, &counts);
        shard.settle(name, now, &counts);
        let entry = shard.get_mut(name).ok_or(LockError::WrongLease)?;
        if entry.holder.as_ref().is_some_and(|h| h.lease == id) {
            Ok(f(&mut shard, name, id, now))
        } else if entry.expired_lease == Some(id) {
            Err(LockError::LeaseExpired)
        } else {
            Err(LockError::WrongLease)
        }
    }

    fn status_inner(&self, resource_id: String) -> Result<Status, LockError> {
        super::validate_name("resource_id", &resource_id)?;
        let inner = &self.inner;
        let now = Instant::now();
        let mut shard = inner.shard(&resource_id);
        shard.settle(&resource_id, now, &inner.counts());
        let mut status = Status {
            resource_id: resource_id.clone(),
            held: false,
            client_id: None,
            fencing_token: None,
            remaining_ms: None,
            waiters: 0,
        };
        if let Some(entry) = shard.get_mut(&resource_id) {
            status.waiters = entry.waiters.len() as u64;
            if let Some(h) = &entry.holder {
                status.held = true;
                status.client_id = Some(h.client_id.clone());
                status.fencing_token = Some(h.token);
                status.remaining_ms = Some(ceil_ms(h.expires - now));
            }
        }
        Ok(status)
    }
}

/// What one pass of the acquisition loop decided, acted on outside the shard's mutex.
enum Step {
    Granted(Grant, Option<Durable>),
    Regranted(Grant, Option<Durable>),
    Refused(Refusal),
    Wait(Instant, Option<Arc<Notify>>),
}

async fn await_durable(durable: Option<Durable>) -> Result<(), LockError> {
    let Some(durable) = durable else { return Ok(()) };
    match durable.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(LockError::Unavailable(e.to_string())),
        Err(_) => Err(LockError::Unavailable(JournalError::Stopped.to_string())),
    }
}

impl Inner {
    fn shard(&self, resource_id: &str) -> std::sync::MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(resource_id) as usize) % SHARDS;
        self.shards[i].lock().expect("lock shard mutex")
    }

    fn counts(&self) -> Counts<'_> {
        Counts { held: &self.held, metrics: &self.metrics }
    }

    /// Settles every expired lease in every shard: only when the table is at its cap.
    fn sweep_all(&self, now: Instant) {
        for shard in self.shards.iter() {
            shard.lock().expect("lock shard mutex").sweep(now, usize::MAX, &self.counts());
        }
    }

    /// Makes `lease_ms` durable as the longest lease before any such lease is
    /// granted: what a data directory whose journal is lost falls back on.
    fn ensure_lease_durable(&self, lease_ms: u64) -> Result<(), LockError> {
        if lease_ms <= self.max_lease_ms.load(Ordering::Acquire) {
            return Ok(());
        }
        let state = self.clock.advance(0, lease_ms).map_err(|e| LockError::Unavailable(e.to_string()))?;
        self.max_lease_ms.fetch_max(state.max_lease_ms, Ordering::AcqRel);
        Ok(())
    }

    /// The next token after `last` for this lock, below the durable ceiling.
    fn next_token(self: &Arc<Self>, last: u64) -> Result<u64, LockError> {
        let token = match self.cfg.token_mode {
            TokenMode::PerLock => last + 1,
            TokenMode::Global => self.issued.fetch_add(1, Ordering::AcqRel) + 1,
        };
        self.issued.fetch_max(token, Ordering::AcqRel);
        let chunk = self.cfg.reserve_chunk.max(1);
        let ceiling = self.ceiling.load(Ordering::Acquire);
        if token >= ceiling {
            // Outran the reserve: reserve synchronously before handing this token out.
            let state = self.clock.advance(token + chunk, 0).map_err(|e| LockError::Unavailable(e.to_string()))?;
            self.ceiling.fetch_max(state.ceiling, Ordering::AcqRel);
        } else if token + chunk / 2 >= ceiling && !self.reserving.swap(true, Ordering::AcqRel) {
            // The thread holds a weak reference so that dropping the service releases the clock.
            let inner = Arc::downgrade(self);
            std::thread::spawn(move || {
                if let Some(inner) = inner.upgrade() {
                    inner.reserve_ahead(ceiling + chunk)
                }
            });
        }
        Ok(token)
    }

    fn reserve_ahead(&self, target: u64) {
        match self.clock.advance(target, 0) {
            Ok(state) => {
                self.ceiling.fetch_max(state.ceiling, Ordering::AcqRel);
            }
            Err(e) => tracing::error!(error = %e, "cannot reserve fencing tokens ahead"),
        }
        self.reserving.store(false, Ordering::Release);
    }

    /// Grants the free lock `req` names (its entry exists) to `req`, the head
    /// waiter when `waiting`; appends the grant to the journal. The caller
    /// answers only once the returned journal write is durable.
    fn grant(
        self: &Arc<Self>,
        shard: &mut Shard,
        req: &AcquireRequest,
        waiting: bool,
        now: Instant,
    ) -> Result<(Grant, Option<Durable>), LockError> {
        let name = req.resource_id.as_str();
        if !self.counts().try_add(self.cfg.max_held) {
            self.metrics.capacity_refusals.inc();
            shard.note_idle(name);
            return Err(LockError::AtCapacity { limit: self.cfg.max_held });
        }
        let entry = shard.get_mut(name).expect("caller created the entry");
        let token = match self.next_token(entry.last_token) {
            Ok(t) => t,
            Err(e) => {
                self.counts().remove();
                shard.note_idle(name);
                return Err(e);
            }
        };
        if waiting {
            entry.waiters.pop_front();
        }
        entry.last_token = token;
        let lease = LeaseStamp::new();
        let holder = Holder {
            lease: lease.id,
            client_id: req.client_id.clone(),
            token,
            lease_ms: req.lease_duration_ms,
            expires: now + Duration::from_millis(req.lease_duration_ms),
        };
        let durable = self.journal.as_ref().map(|j| j.append(Change::Hold(record(req, &holder))));
        shard.hold(name, holder);
        self.metrics.record_token(name, token);
        self.metrics.acquisitions.inc();
        Ok((grant_body(req, lease, token), durable))
    }

    /// Re-grants `req`'s lock to its holder, who presented the lease's id:
    /// same lease and token, the new duration from now.
    fn regrant(&self, shard: &mut Shard, req: &AcquireRequest, now: Instant) -> (Grant, Option<Durable>) {
        let name = req.resource_id.as_str();
        let entry = shard.get_mut(name).expect("caller checked the holder");
        let h = entry.holder.as_mut().expect("caller checked the holder");
        h.lease_ms = req.lease_duration_ms;
        h.expires = now + Duration::from_millis(req.lease_duration_ms);
        let (lease, token) = (LeaseStamp::of(h.lease), h.token);
        let durable = self.journal.as_ref().map(|j| j.append(Change::Hold(record(req, h))));
        shard.rearm(name);
        self.metrics.acquisitions.inc();
        (grant_body(req, lease, token), durable)
    }
}

fn record(req: &AcquireRequest, h: &Holder) -> LeaseRecord {
    LeaseRecord {
        name: req.resource_id.as_str().into(),
        lease: h.lease,
        client_id: h.client_id.clone(),
        token: h.token,
        lease_ms: h.lease_ms,
    }
}

fn grant_body(req: &AcquireRequest, lease: LeaseStamp, token: u64) -> Grant {
    Grant {
        resource_id: req.resource_id.clone(),
        lock_acquired: true,
        lock_token: lease.lock_token,
        fencing_token: token,
        lease_duration_ms: req.lease_duration_ms,
        acquired_at: lease.acquired_at,
    }
}

fn ceil_ms(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000_000) as u64
}

/// A place in a lock's wait queue; leaving (grant, timeout, or the caller going away) frees it.
struct WaiterGuard {
    locks: EmbeddedLocks,
    resource_id: String,
    id: u64,
    notify: Arc<Notify>,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut shard = self.locks.inner.shard(&self.resource_id);
        if let Some(entry) = shard.get_mut(&self.resource_id) {
            let was_head = entry.waiters.front().map(|(id, _)| *id) == Some(self.id);
            entry.waiters.retain(|(id, _)| *id != self.id);
            if was_head {
                entry.wake_head();
            }
            shard.note_idle(&self.resource_id);
        }
    }
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
