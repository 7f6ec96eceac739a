//! The embedded service's lock table: one shard of locks, its expiry heap
//! and its idle list. Every operation costs the same whether the table holds
//! ten names or ten million.
//!
//! Invariants:
//! - an entry is held (a holder, unexpired or not yet noticed expired), has
//!   waiters, or is idle; only idle entries are ever dropped;
//! - every holder has an item in the shard's expiry heap at or before its
//!   deadline, so [`Shard::sweep`] finds every expired holder without
//!   scanning the map; a renewed holder's item is pushed again at its new
//!   deadline when the old one comes due;
//! - every entry that became idle is pushed on the idle list; when the list
//!   outgrows [`IDLE_PER_SHARD`], its oldest names are dropped from the map if
//!   they are still idle, and the shard's `evicted_max` keeps the highest
//!   token any dropped entry had, which is where a re-created entry starts;
//! - `held` (shared by all shards) counts holders, expired ones included
//!   until a sweep settles them.

use super::metrics::LockMetrics;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::Notify;

/// Idle names a shard keeps (for their token sequence and expired-lease answers) before dropping the oldest.
pub const IDLE_PER_SHARD: usize = 1024;
/// Expired heap items a shard settles per operation: each operation pushes at most one, so the heap keeps up.
const SWEEP_PER_OP: usize = 4;

pub struct Holder {
    pub lease: u128,
    pub client_id: String,
    pub token: u64,
    pub lease_ms: u64,
    pub expires: Instant,
}

pub struct Entry {
    pub holder: Option<Holder>,
    pub last_token: u64,
    /// The most recent lease that expired, to tell "expired" from "wrong" on renew/release.
    pub expired_lease: Option<u128>,
    pub waiters: VecDeque<(u64, Arc<Notify>)>,
}

impl Entry {
    fn new(holder: Option<Holder>, last_token: u64) -> Entry {
        Entry { holder, last_token, expired_lease: None, waiters: VecDeque::new() }
    }

    fn is_idle(&self) -> bool {
        self.holder.is_none() && self.waiters.is_empty()
    }

    pub fn wake_head(&self) {
        if let Some((_, n)) = self.waiters.front() {
            n.notify_one();
        }
    }
}

/// What the shards share: the holder count and the metrics.
pub struct Counts<'a> {
    pub held: &'a AtomicUsize,
    pub metrics: &'a LockMetrics,
}

impl Counts<'_> {
    /// One more holder; false (and nothing counted) when that would pass `max`.
    pub fn try_add(&self, max: usize) -> bool {
        if self.held.fetch_add(1, Ordering::AcqRel) >= max {
            self.held.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        self.metrics.held.inc();
        true
    }

    /// One holder fewer.
    pub fn remove(&self) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        self.metrics.held.dec();
    }
}

#[derive(Default)]
pub struct Shard {
    map: HashMap<Arc<str>, Entry>,
    /// Highest last token among entries dropped from this shard.
    evicted_max: u64,
    expiries: BinaryHeap<Reverse<(Instant, u128, Arc<str>)>>,
    idle: VecDeque<Arc<str>>,
}

impl Shard {
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Entry> {
        self.map.get_mut(name)
    }

    /// The entry for `name`, created (idle, not yet listed) with the highest
    /// token it could have had: `floor`, or what dropped entries had.
    pub fn entry(&mut self, name: &str, floor: u64) -> &mut Entry {
        if !self.map.contains_key(name) {
            let start = self.token_floor(floor);
            self.map.insert(name.into(), Entry::new(None, start));
        }
        self.map.get_mut(name).expect("inserted above")
    }

    /// Restores a lease held before a restart: `name`, not yet in the shard,
    /// held by `holder`, its next token above `floor` and the holder's. One
    /// lookup and no copy of the name, which counts at a restart with a
    /// million leases.
    pub fn restore(&mut self, name: Arc<str>, holder: Holder, floor: u64) {
        self.expiries.push(Reverse((holder.expires, holder.lease, name.clone())));
        let last_token = self.token_floor(floor).max(holder.token);
        let replaced = self.map.insert(name, Entry::new(Some(holder), last_token));
        debug_assert!(replaced.is_none(), "a lease restored twice");
    }

    /// Where a name new to the shard starts its tokens: above `floor` and
    /// above every token of a name the shard dropped (it may be that name).
    fn token_floor(&self, floor: u64) -> u64 {
        floor.max(self.evicted_max)
    }

    /// Makes `holder` the holder of `name` (whose entry exists), counted in `held` by the caller.
    pub fn hold(&mut self, name: &str, holder: Holder) {
        let key = self.map.get_key_value(name).expect("entry exists").0.clone();
        self.expiries.push(Reverse((holder.expires, holder.lease, key)));
        self.map.get_mut(name).expect("entry exists").holder = Some(holder);
    }

    /// Pushes a heap item at the deadline of `name`'s holder, after a
    /// change that may have moved it earlier (a re-entrant grant with a
    /// shorter lease). A later deadline needs none: the earlier item re-pushes it.
    pub fn rearm(&mut self, name: &str) {
        if let Some((key, Entry { holder: Some(h), .. })) = self.map.get_key_value(name) {
            self.expiries.push(Reverse((h.expires, h.lease, key.clone())));
        }
    }

    /// Clears `name`'s holder (release or undone grant) and lists it idle when it is.
    pub fn unhold(&mut self, name: &str, counts: &Counts) -> Option<Holder> {
        let entry = self.map.get_mut(name)?;
        let h = entry.holder.take()?;
        counts.remove();
        entry.wake_head();
        self.note_idle(name);
        Some(h)
    }

    /// Settles `name`'s holder if its lease has run out; true when the lock is free.
    pub fn settle(&mut self, name: &str, now: Instant, counts: &Counts) -> bool {
        let Some(entry) = self.map.get_mut(name) else { return true };
        match &entry.holder {
            None => true,
            Some(h) if h.expires <= now => {
                entry.expired_lease = Some(h.lease);
                entry.holder = None;
                counts.remove();
                counts.metrics.expiries.inc();
                entry.wake_head();
                self.note_idle(name);
                true
            }
            Some(_) => false,
        }
    }

    /// Settles up to `limit` holders whose heap items are due.
    pub fn sweep(&mut self, now: Instant, limit: usize, counts: &Counts) {
        for _ in 0..limit {
            let due = matches!(self.expiries.peek(), Some(Reverse((at, _, _))) if *at <= now);
            if !due {
                return;
            }
            let Reverse((_, lease, name)) = self.expiries.pop().expect("peeked");
            let Some(entry) = self.map.get(&name) else { continue };
            match &entry.holder {
                Some(h) if h.lease == lease && h.expires > now => {
                    // Renewed since: due again at the new deadline.
                    self.expiries.push(Reverse((h.expires, lease, name)));
                }
                Some(h) if h.lease == lease => {
                    self.settle(&name, now, counts);
                }
                _ => {}
            }
        }
    }

    /// The per-operation sweep.
    pub fn sweep_some(&mut self, now: Instant, counts: &Counts) {
        self.sweep(now, SWEEP_PER_OP, counts);
    }

    /// Lists `name` idle if it is, dropping the oldest idle names beyond the shard's allowance.
    pub fn note_idle(&mut self, name: &str) {
        let Some((key, entry)) = self.map.get_key_value(name) else { return };
        if !entry.is_idle() {
            return;
        }
        self.idle.push_back(key.clone());
        while self.idle.len() > IDLE_PER_SHARD {
            let old = self.idle.pop_front().expect("longer than the allowance");
            if self.map.get(&old).is_some_and(Entry::is_idle) {
                let e = self.map.remove(&old).expect("present");
                self.evicted_max = self.evicted_max.max(e.last_token);
            }
        }
        if self.map.capacity() > 64 && self.map.len() < self.map.capacity() / 4 {
            self.map.shrink_to(self.map.len() * 2);
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn holder(lease: u128, token: u64, expires: Instant) -> Holder {
        Holder { lease, client_id: "c".into(), token, lease_ms: 1, expires }
    }

    #[test]
    fn idle_names_beyond_the_allowance_are_dropped_and_remembered() {
        let held = AtomicUsize::new(0);
        let metrics = LockMetrics::default();
        let counts = Counts { held: &held, metrics: &metrics };
        let mut shard = Shard::default();
        let later = Instant::now() + Duration::from_secs(60);
        for i in 0..(IDLE_PER_SHARD + 10) as u64 {
            let name = format!("n{i}");
            shard.entry(&name, 0).last_token = i + 1;
            shard.hold(&name, holder(i as u128, i + 1, later));
            assert!(counts.try_add(usize::MAX));
            shard.unhold(&name, &counts);
        }
        assert_eq!(held.load(Ordering::Acquire), 0);
        assert_eq!(shard.len(), IDLE_PER_SHARD);
        // A dropped name comes back above every token the dropped entries had.
        assert_eq!(shard.entry("n0", 0).last_token, 10);
        // A held name is never dropped.
        shard.entry("keep", 0);
        shard.hold("keep", holder(7, 1, later));
        for i in 0..2 * IDLE_PER_SHARD {
            shard.entry(&format!("m{i}"), 0);
            shard.note_idle(&format!("m{i}"));
        }
        assert!(shard.get_mut("keep").is_some_and(|e| e.holder.is_some()));
    }

    #[test]
    fn sweep_settles_expired_holders_and_keeps_renewed_ones() {
        let held = AtomicUsize::new(0);
        let metrics = LockMetrics::default();
        let counts = Counts { held: &held, metrics: &metrics };
        assert!(counts.try_add(2) && counts.try_add(2) && !counts.try_add(2));
        let mut shard = Shard::default();
        let t0 = Instant::now();
        shard.entry("a", 0);
        shard.hold("a", holder(1, 1, t0 + Duration::from_millis(10)));
        shard.entry("b", 0);
        shard.hold("b", holder(2, 1, t0 + Duration::from_millis(10)));
        shard.get_mut("b").unwrap().holder.as_mut().unwrap().expires = t0 + Duration::from_millis(100);
        shard.sweep(t0 + Duration::from_millis(20), usize::MAX, &counts);
        assert!(shard.get_mut("a").unwrap().holder.is_none());
        assert_eq!(shard.get_mut("a").unwrap().expired_lease, Some(1));
        assert!(shard.get_mut("b").unwrap().holder.is_some(), "renewed holder kept");
        assert_eq!(held.load(Ordering::Acquire), 1);
        shard.sweep(t0 + Duration::from_millis(200), usize::MAX, &counts);
        assert!(shard.get_mut("b").unwrap().holder.is_none());
        assert_eq!(held.load(Ordering::Acquire), 0);
        assert_eq!(metrics.expiries.get(), 2);
    }
}
