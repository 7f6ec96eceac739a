//! The embedded lock service: leases in memory, tokens from a durable
//! generation clock, crash safety by a grace period.
//!
//! Invariants:
//! - Tokens: each lock's next token is `last + 1`, where a lock seen for the
//!   first time (or evicted from memory while free) starts from the highest
//!   token that could have been issued for it (the previous run's durable
//!   ceiling, or the highest token of any evicted entry of its shard). Before a
//!   token is returned it is below the durable ceiling; ranges of
//!   `reserve_chunk` tokens are reserved ahead of use in the background, so
//!   the hot path never waits for the disk except when it outruns the reserve.
//! - Exclusion across crashes: the longest lease ever granted is durable
//!   before such a lease is granted; after a restart every acquisition is
//!   refused (or waits) until that long has passed on the monotonic clock, so
//!   no lease from before the crash can still be running when the first new
//!   one is granted.
//! - Leases expire on `Instant` (monotonic), never on wall time.
//! - Waiters are served first come, first served: a lock that becomes free is
//!   granted only to the head of its queue; a waiter that gives up or whose
//!   caller goes away leaves the queue and hands the turn to the next.

use super::clock::{ClockError, GenerationClock};
use super::metrics::LockMetrics;
use super::{Acquired, BoxFuture, LeaseStamp, LockError, LockService, ValidAcquire};
use crate::wire::locks::{AcquireRequest, Grant, HeldReason, LeaseRef, Refusal, Released, Renewed, Status};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

const SHARDS: usize = 64;
/// A shard evicts free, idle entries once it holds this many.
const EVICT_AT: usize = 16_384;

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
    /// Where the generation clock lives; `None` keeps it in memory (no crash safety).
    pub data_dir: Option<PathBuf>,
    pub token_mode: TokenMode,
    /// Re-acquiring a held lock with the same `client_id` returns the same lease and token.
    pub reentrant: bool,
    /// Tokens reserved per durable write of the clock.
    pub reserve_chunk: u64,
}

impl Default for EmbeddedConfig {
    fn default() -> Self {
        EmbeddedConfig { data_dir: None, token_mode: TokenMode::PerLock, reentrant: false, reserve_chunk: 1 << 20 }
    }
}

struct Holder {
    lease: u128,
    client_id: String,
    token: u64,
    lease_ms: u64,
    expires: Instant,
}

struct Entry {
    holder: Option<Holder>,
    last_token: u64,
    /// The most recent lease that expired, to tell "expired" from "wrong" on renew/release.
    expired_lease: Option<u128>,
    waiters: VecDeque<(u64, Arc<Notify>)>,
}

impl Entry {
    /// Clears an expired holder (counting the expiry); true when the lock is free.
    fn settle(&mut self, now: Instant, metrics: &LockMetrics) -> bool {
        match &self.holder {
            None => true,
            Some(h) if h.expires <= now => {
                self.expired_lease = Some(h.lease);
                self.holder = None;
                metrics.expiries.inc();
                true
            }
            Some(_) => false,
        }
    }

    fn wake_head(&self) {
        if let Some((_, n)) = self.waiters.front() {
            n.notify_one();
        }
    }
}

#[derive(Default)]
struct Shard {
    map: HashMap<String, Entry>,
    /// Highest last token among entries evicted from this shard.
    evicted_max: u64,
}

struct Inner {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    clock: GenerationClock,
    /// Durable ceiling (cache of the clock's): every issued token is below it.
    ceiling: AtomicU64,
    /// Durable longest lease (cache of the clock's).
    max_lease_ms: AtomicU64,
    /// Highest token issued (the counter itself in global mode).
    issued: AtomicU64,
    /// Tokens from before this start are all below `base`.
    base: u64,
    reserving: AtomicBool,
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
    /// Opens the service: reads the clock, reserves the first range and starts the grace period.
    pub fn open(cfg: EmbeddedConfig, metrics: LockMetrics) -> Result<EmbeddedLocks, ClockError> {
        let (clock, previous) = GenerationClock::open(cfg.data_dir.as_deref())?;
        let base = previous.ceiling;
        let chunk = cfg.reserve_chunk.max(1);
        let durable = clock.advance(base.saturating_add(chunk), previous.max_lease_ms)?;
        let grace_until = Instant::now() + Duration::from_millis(previous.max_lease_ms);
        if previous.max_lease_ms > 0 {
            tracing::info!(
                grace_ms = previous.max_lease_ms,
                base,
                "lock service restarted: waiting out earlier leases"
            );
        }
        let inner = Inner {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: RandomState::new(),
            clock,
            ceiling: AtomicU64::new(durable.ceiling),
            max_lease_ms: AtomicU64::new(durable.max_lease_ms),
            issued: AtomicU64::new(base),
            base,
            reserving: AtomicBool::new(false),
            grace_until,
            next_waiter: AtomicU64::new(0),
            cfg,
            metrics,
        };
        Ok(EmbeddedLocks { inner: Arc::new(inner) })
    }

    async fn acquire_inner(&self, req: ValidAcquire) -> Result<Acquired, LockError> {
        let req = req.into_inner();
        let inner = &self.inner;
        inner.ensure_lease_durable(req.lease_duration_ms)?;
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms.unwrap_or(0));
        let mut queued: Option<WaiterGuard> = None;
        loop {
            let now = Instant::now();
            let (wake_at, notify) = {
                let mut shard = inner.shard(&req.resource_id);
                let (reason, remaining) = if now < inner.grace_until {
                    (HeldReason::GracePeriod, inner.grace_until - now)
                } else {
                    let entry = shard_entry(&mut shard, &req.resource_id, inner);
                    let free = entry.settle(now, &inner.metrics);
                    let my_turn = match &queued {
                        Some(w) => entry.waiters.front().map(|(id, _)| *id) == Some(w.id),
                        None => entry.waiters.is_empty(),
                    };
                    if free && my_turn {
                        if queued.is_some() {
                            entry.waiters.pop_front();
                        }
                        return inner.grant(entry, &req, now).map(Acquired::Granted);
                    }
                    if let Some(h) = &entry.holder
                        && inner.cfg.reentrant
                        && h.client_id == req.client_id
                    {
                        return inner.regrant(entry, &req, now).map(Acquired::Granted);
                    }
                    let remaining = entry.holder.as_ref().map(|h| h.expires - now).unwrap_or_default();
                    (HeldReason::Held, remaining)
                };
                if now >= deadline {
                    inner.metrics.contention.inc();
                    return Ok(Acquired::Refused(Refusal {
                        resource_id: req.resource_id.clone(),
                        lock_acquired: false,
                        reason,
                        remaining_lease_ms: ceil_ms(remaining),
                    }));
                }
                if queued.is_none() && reason == HeldReason::Held {
                    let id = inner.next_waiter.fetch_add(1, Ordering::Relaxed);
                    let notify = Arc::new(Notify::new());
                    let entry = shard.map.get_mut(&req.resource_id).expect("entry created above");
                    entry.waiters.push_back((id, notify.clone()));
                    queued =
                        Some(WaiterGuard { locks: self.clone(), resource_id: req.resource_id.clone(), id, notify });
                }
                let notify = queued.as_ref().map(|w| w.notify.clone());
                ((now + remaining).min(deadline), notify)
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

    fn renew_inner(&self, lease: LeaseRef) -> Result<Renewed, LockError> {
        let (token, lease_ms) = self.with_lease(&lease, |entry, now| {
            let h = entry.holder.as_mut().expect("with_lease found the holder");
            h.expires = now + Duration::from_millis(h.lease_ms);
            self.inner.metrics.renewals.inc();
            (h.token, h.lease_ms)
        })?;
        Ok(Renewed { resource_id: lease.resource_id, renewed: true, fencing_token: token, lease_duration_ms: lease_ms })
    }

    fn release_inner(&self, lease: LeaseRef) -> Result<Released, LockError> {
        let token = self.with_lease(&lease, |entry, _| {
            let h = entry.holder.take().expect("with_lease found the holder");
            self.inner.metrics.releases.inc();
            entry.wake_head();
            h.token
        })?;
        Ok(Released { resource_id: lease.resource_id, released: true, fencing_token: token })
    }

    /// Runs `f` on the entry of the lock `lease` names, under its shard lock,
    /// once expiry is settled and `lease` is known to hold it (`entry.holder`
    /// is `Some` and its lease is `lease`'s id).
    ///
    /// Errors: `lease` fails [`super::validate_lease`]; `LeaseExpired` when it is
    /// the lock's most recently expired lease; `WrongLease` when the lock is
    /// unknown or any other lease (or none) holds it.
    fn with_lease<T>(&self, lease: &LeaseRef, f: impl FnOnce(&mut Entry, Instant) -> T) -> Result<T, LockError> {
        let id = super::validate_lease(lease)?;
        let inner = &self.inner;
        let now = Instant::now();
        let mut shard = inner.shard(&lease.resource_id);
        let entry = shard.map.get_mut(&lease.resource_id).ok_or(LockError::WrongLease)?;
        entry.settle(now, &inner.metrics);
        if entry.holder.as_ref().is_some_and(|h| h.lease == id) {
            Ok(f(entry, now))
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
        let mut status = Status {
            resource_id: resource_id.clone(),
            held: false,
            client_id: None,
            fencing_token: None,
            remaining_ms: None,
            waiters: 0,
        };
        if let Some(entry) = shard.map.get_mut(&resource_id) {
            entry.settle(now, &inner.metrics);
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

impl Inner {
    fn shard(&self, resource_id: &str) -> std::sync::MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(resource_id) as usize) % SHARDS;
        self.shards[i].lock().expect("lock shard mutex")
    }

    /// Makes `lease_ms` durable as the longest lease before any such lease is granted.
    fn ensure_lease_durable(&self, lease_ms: u64) -> Result<(), LockError> {
        if lease_ms <= self.max_lease_ms.load(Ordering::Acquire) {
            return Ok(());
        }
        let state = self.clock.advance(0, lease_ms).map_err(|e| LockError::Unavailable(e.to_string()))?;
        self.max_lease_ms.fetch_max(state.max_lease_ms, Ordering::AcqRel);
        Ok(())
    }

    /// The next token for `entry`, below the durable ceiling.
    fn next_token(self: &Arc<Self>, entry: &Entry) -> Result<u64, LockError> {
        let token = match self.cfg.token_mode {
            TokenMode::PerLock => entry.last_token + 1,
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

    fn grant(self: &Arc<Self>, entry: &mut Entry, req: &AcquireRequest, now: Instant) -> Result<Grant, LockError> {
        let token = self.next_token(entry)?;
        let lease = LeaseStamp::new();
        entry.last_token = token;
        entry.holder = Some(Holder {
            lease: lease.id,
            client_id: req.client_id.clone(),
            token,
            lease_ms: req.lease_duration_ms,
            expires: now + Duration::from_millis(req.lease_duration_ms),
        });
        self.metrics.record_token(&req.resource_id, token);
        self.metrics.acquisitions.inc();
        Ok(grant_body(req, lease, token))
    }

    fn regrant(&self, entry: &mut Entry, req: &AcquireRequest, now: Instant) -> Result<Grant, LockError> {
        let h = entry.holder.as_mut().expect("caller checked the holder");
        h.lease_ms = req.lease_duration_ms;
        h.expires = now + Duration::from_millis(req.lease_duration_ms);
        let (lease, token) = (LeaseStamp::of(h.lease), h.token);
        self.metrics.acquisitions.inc();
        Ok(grant_body(req, lease, token))
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

/// The entry for `resource_id`, created at the highest token it could have had.
fn shard_entry<'a>(shard: &'a mut Shard, resource_id: &str, inner: &Inner) -> &'a mut Entry {
    if !shard.map.contains_key(resource_id) {
        if shard.map.len() >= EVICT_AT {
            evict_idle(shard, Instant::now());
        }
        let start = inner.base.max(shard.evicted_max);
        shard.map.insert(
            resource_id.to_string(),
            Entry { holder: None, last_token: start, expired_lease: None, waiters: VecDeque::new() },
        );
    }
    shard.map.get_mut(resource_id).expect("inserted above")
}

/// Drops free entries without waiters, remembering the highest token among them.
fn evict_idle(shard: &mut Shard, now: Instant) {
    let mut evicted_max = shard.evicted_max;
    shard.map.retain(|_, e| {
        let busy = e.holder.as_ref().is_some_and(|h| h.expires > now) || !e.waiters.is_empty();
        if !busy {
            evicted_max = evicted_max.max(e.last_token);
        }
        busy
    });
    shard.evicted_max = evicted_max;
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
        if let Some(entry) = shard.map.get_mut(&self.resource_id) {
            let was_head = entry.waiters.front().map(|(id, _)| *id) == Some(self.id);
            entry.waiters.retain(|(id, _)| *id != self.id);
            if was_head {
                entry.wake_head();
            }
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
        Box::pin(std::future::ready(self.release_inner(lease)))
    }
    fn status(&self, resource_id: String) -> BoxFuture<'_, Result<Status, LockError>> {
        Box::pin(std::future::ready(self.status_inner(resource_id)))
    }
    fn backend(&self) -> &'static str {
        "embedded"
    }
}
