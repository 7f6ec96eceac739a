//! Lock metrics in the shared `/metrics` registry.
//!
//! Families (prefix `fencing_locks_`): `acquisitions`, `contention` (an
//! acquisition found the lock held or in grace), `expiries`, `renewals`,
//! `releases`, `capacity_refusals`, and the gauges `held` and
//! `current_token{lock}`.
//!
//! Invariant: the per-lock gauge has bounded cardinality. The
//! [`MAX_TOKEN_SERIES`] most recently granted locks have a series
//! ([`SeriesBound`], which holds each tracked lock's gauge); granting another lock
//! removes the series of the least recently granted one and counts it in
//! `token_series_evicted`, so a client cannot grow the registry without bound
//! by inventing lock names, and a long-running server still shows the locks
//! in use.

use crate::telemetry::{Metrics, SeriesBound};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

/// Most locks with their own `current_token` series.
pub const MAX_TOKEN_SERIES: usize = 256;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LockLabel {
    lock: String,
}

/// Handles to the lock families; cloning shares them.
#[derive(Clone)]
pub struct LockMetrics {
    pub acquisitions: Counter,
    pub contention: Counter,
    pub expiries: Counter,
    pub renewals: Counter,
    pub releases: Counter,
    /// Acquisitions refused because the table held `max_held` leases.
    pub capacity_refusals: Counter,
    /// Leases held now.
    pub held: Gauge,
    token_series_evicted: Counter,
    tokens: Family<LockLabel, Gauge<u64, AtomicU64>>,
    series: Arc<Mutex<SeriesBound<Gauge<u64, AtomicU64>>>>,
}

impl Default for LockMetrics {
    fn default() -> LockMetrics {
        LockMetrics {
            acquisitions: Counter::default(),
            contention: Counter::default(),
            expiries: Counter::default(),
            renewals: Counter::default(),
            releases: Counter::default(),
            capacity_refusals: Counter::default(),
            held: Gauge::default(),
            token_series_evicted: Counter::default(),
            tokens: Family::default(),
            series: Arc::new(Mutex::new(SeriesBound::new(MAX_TOKEN_SERIES))),
        }
    }
}

impl LockMetrics {
    /// Creates the families and registers them in `metrics`.
    pub fn register(metrics: &Metrics) -> LockMetrics {
        let m = LockMetrics::default();
        metrics.register(|reg| {
            let reg = reg.sub_registry_with_prefix("fencing_locks");
            reg.register("acquisitions", "Leases granted", m.acquisitions.clone());
            reg.register("contention", "Acquisitions that found the lock held or in grace", m.contention.clone());
            reg.register("expiries", "Leases that expired without release", m.expiries.clone());
            reg.register("renewals", "Successful lease renewals", m.renewals.clone());
            reg.register("releases", "Successful releases", m.releases.clone());
            reg.register(
                "capacity_refusals",
                "Acquisitions refused because the lock table held its maximum of leases",
                m.capacity_refusals.clone(),
            );
            reg.register("held", "Leases held now (embedded backend)", m.held.clone());
            reg.register(
                "token_series_evicted",
                "Per-lock token series removed to stay within the series limit",
                m.token_series_evicted.clone(),
            );
            reg.register("current_token", "Latest fencing token issued per lock", m.tokens.clone());
        });
        m
    }

    /// Records a grant of `token` on `lock`, making `lock` the most recently
    /// granted. The bound and the family change under one mutex, so a series
    /// exists exactly for the tracked locks.
    pub fn record_token(&self, lock: &str, token: u64) {
        let mut series = self.series.lock().expect("token series lock");
        let touched = series.touch(lock, || self.tokens.get_or_create(&LockLabel { lock: lock.to_owned() }).clone());
        if let Some(victim) = touched.evicted {
            self.tokens.remove(&LockLabel { lock: victim });
            self.token_series_evicted.inc();
        }
        touched.value.set(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_series_keep_the_most_recently_granted_locks() {
        let metrics = Metrics::new();
        let m = LockMetrics::register(&metrics);
        for i in 0..MAX_TOKEN_SERIES {
            m.record_token(&format!("lock-{i}"), 7);
        }
        m.record_token("lock-0", 9); // lock-0 is now the most recent; lock-1 the least
        m.record_token("new-lock", 3);
        let text = metrics.encode();
        assert!(text.contains("fencing_locks_current_token{lock=\"lock-0\"} 9"), "{text}");
        assert!(text.contains("fencing_locks_current_token{lock=\"new-lock\"} 3"), "{text}");
        assert!(!text.contains("lock=\"lock-1\""), "the least recently granted lock lost its series: {text}");
        assert!(text.contains("lock=\"lock-2\""), "{text}");
        assert_eq!(text.matches("fencing_locks_current_token{").count(), MAX_TOKEN_SERIES, "{text}");
        assert!(text.contains("fencing_locks_token_series_evicted_total 1"), "{text}");
        m.record_token("lock-1", 11); // back, evicting lock-2
        let text = metrics.encode();
        assert!(text.contains("fencing_locks_current_token{lock=\"lock-1\"} 11"), "{text}");
        assert!(!text.contains("lock=\"lock-2\""), "{text}");
        assert!(text.contains("fencing_locks_token_series_evicted_total 2"), "{text}");
    }
}
