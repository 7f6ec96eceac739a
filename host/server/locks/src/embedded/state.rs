//! The embedded service's shared state ([`LockState`]) and what changes it
//! under a shard's mutex: granting a free lock (the next token, below the
//! durable ceiling, reserved ahead in the background), re-granting a held
//! lease to its holder, and settling expired leases.

use super::{EmbeddedConfig, SHARDS, TokenMode};
use crate::clock::GenerationClock;
use crate::journal::{Change, Durable, Journal, LeaseRecord};
use crate::metrics::LockMetrics;
use crate::table::{Counts, Holder, Shard};
use crate::{LeaseStamp, LockError};
use fencing_api::wire::locks::{AcquireRequest, Grant};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the service shares between its handles: the shards of the lock
/// table, the token clock and its cached ceiling, the journal, the counts.
pub(super) struct LockState {
    pub(super) shards: Box<[Mutex<Shard>]>,
    pub(super) hasher: RandomState,
    pub(super) clock: GenerationClock,
    pub(super) journal: Option<Journal>,
    /// Durable ceiling (cache of the clock's): every issued token is below it.
    pub(super) ceiling: AtomicU64,
    /// Durable longest lease (cache of the clock's).
    pub(super) max_lease_ms: AtomicU64,
    /// Highest token issued (the counter itself in global mode).
    pub(super) issued: AtomicU64,
    /// Tokens from before this start are all below `base`.
    pub(super) base: u64,
    pub(super) reserving: AtomicBool,
    /// Leases held, in all shards.
    pub(super) held: AtomicUsize,
    /// When the leases of a data directory without its journal, or answered
    /// ahead of a sync before the machine restarted, have surely ended.
    pub(super) grace_until: Instant,
    pub(super) next_waiter: AtomicU64,
    pub(super) cfg: EmbeddedConfig,
    pub(super) metrics: LockMetrics,
}

impl LockState {
    pub(super) fn shard(&self, resource_id: &str) -> std::sync::MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(resource_id) as usize) % SHARDS;
        self.shards[i].lock().expect("lock shard mutex")
    }

    pub(super) fn counts(&self) -> Counts<'_> {
        Counts { held: &self.held, metrics: &self.metrics }
    }

    /// Settles every expired lease in every shard: only when the table is at its cap.
    pub(super) fn sweep_all(&self, now: Instant) {
        for shard in self.shards.iter() {
            shard.lock().expect("lock shard mutex").sweep(now, usize::MAX, &self.counts());
        }
    }

    /// Makes `lease_ms` durable as the longest lease before any such lease is
    /// granted: what a data directory whose journal is lost falls back on.
    pub(super) fn ensure_lease_durable(&self, lease_ms: u64) -> Result<(), LockError> {
        if lease_ms <= self.max_lease_ms.load(Ordering::Acquire) {
            return Ok(());
        }
        let state = self.clock.advance(0, lease_ms).map_err(|e| LockError::Unavailable(e.to_string()))?;
        self.max_lease_ms.fetch_max(state.max_lease_ms, Ordering::AcqRel);
        Ok(())
    }

    /// The next token after `last` for this lock, below the durable ceiling.
    pub(super) fn next_token(self: &Arc<Self>, last: u64) -> Result<u64, LockError> {
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
            let state = Arc::downgrade(self);
            std::thread::spawn(move || {
                if let Some(state) = state.upgrade() {
                    state.reserve_ahead(ceiling + chunk)
                }
            });
        }
        Ok(token)
    }

    pub(super) fn reserve_ahead(&self, target: u64) {
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
    pub(super) fn grant(
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
    pub(super) fn regrant(&self, shard: &mut Shard, req: &AcquireRequest, now: Instant) -> (Grant, Option<Durable>) {
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
        fencing_proof: None,
    }
}

/// A duration in whole milliseconds, rounded up.
pub(super) fn ceil_ms(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000_000) as u64
}
