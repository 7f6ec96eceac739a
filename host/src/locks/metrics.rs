//! Lock metrics in the shared `/metrics` registry.
//!
//! Families (prefix `fencing_locks_`): `acquisitions`, `contention` (an
//! acquisition found the lock held or in grace), `expiries`, `renewals`,
//! `releases`, and the gauge `current_token{lock}`.
//!
//! Invariant: the per-lock gauge has bounded cardinality. Only the first
//! [`MAX_TOKEN_SERIES`] distinct locks get a series ([`SeriesBound`] with
//! [`WhenFull::RefuseNew`]); later locks are counted in `token_series_dropped`
//! instead, so a client cannot grow the registry without bound by inventing
//! lock names.

use crate::telemetry::{Metrics, SeriesBound, WhenFull};
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
    token_series_dropped: Counter,
    tokens: Family<LockLabel, Gauge<u64, AtomicU64>>,
    series: Arc<Mutex<SeriesBound<()>>>,
}

impl Default for LockMetrics {
    fn default() -> LockMetrics {
        LockMetrics {
            acquisitions: Counter::default(),
            contention: Counter::default(),
            expiries: Counter::default(),
            renewals: Counter::default(),
            releases: Counter::default(),
            token_series_dropped: Counter::default(),
            tokens: Family::default(),
            series: Arc::new(Mutex::new(SeriesBound::new(MAX_TOKEN_SERIES, WhenFull::RefuseNew))),
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
                "token_series_dropped",
                "Grants on locks beyond the per-lock series limit",
                m.token_series_dropped.clone(),
            );
            reg.register("current_token", "Latest fencing token issued per lock", m.tokens.clone());
        });
        m
    }

    /// A gauge for `lock`'s current token, or `None` once the series limit is reached.
    pub fn token_gauge(&self, lock: &str) -> Option<Gauge<u64, AtomicU64>> {
        if self.series.lock().expect("token series lock").touch(lock, || ()).is_none() {
            self.token_series_dropped.inc();
            return None;
        }
        Some(self.tokens.get_or_create(&LockLabel { lock: lock.to_string() }).clone())
    }

    /// Records a grant of `token` on `lock` (the etcd backend, which keeps no per-lock entry).
    pub fn record_token(&self, lock: &str, token: u64) {
        if let Some(g) = self.token_gauge(lock) {
            g.set(token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_series_are_bounded_to_the_first_locks() {
        let metrics = Metrics::new();
        let m = LockMetrics::register(&metrics);
        for i in 0..MAX_TOKEN_SERIES {
            m.record_token(&format!("lock-{i}"), 7);
        }
        assert!(m.token_gauge("one-too-many").is_none(), "a new lock beyond the limit gets no series");
        m.record_token("another", 3);
        m.record_token("lock-0", 9);
        let text = metrics.encode();
        assert!(text.contains("fencing_locks_current_token{lock=\"lock-0\"} 9"), "{text}");
        assert!(text.contains("lock=\"lock-255\""), "{text}");
        assert!(!text.contains("one-too-many") && !text.contains("another"), "{text}");
        assert_eq!(text.matches("fencing_locks_current_token{").count(), MAX_TOKEN_SERIES, "{text}");
        assert!(text.contains("fencing_locks_token_series_dropped_total 2"), "{text}");
    }
}
