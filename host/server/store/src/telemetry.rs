//! Storage metrics and flapping detection.
//!
//! Families (all prefixed `fencing_storage_`): `writes_admitted`,
//! `writes_rejected{reason}`, `guard_failures{reason}`, `term_changes`,
//! `write_latency_seconds`, `high_water{resource}`, `flapping{resource}`,
//! `flap_events`, `tracked_resources`.
//!
//! Bounded cardinality: per-resource series exist only for the `max_tracked`
//! most recently written resources. Writing a resource makes it the most
//! recent; when a new resource would exceed the bound, the least recently
//! written one is evicted and its series are removed from the registry
//! ([`SeriesBound`]).
//!
//! Flapping: a resource flaps when more than `max_term_changes` admitted
//! writes began a new token within the last `window`. The state is
//! recomputed on each term change of that resource and decays on later writes.

use fencing_base::telemetry::SeriesBound;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// When a resource counts as flapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlapConfig {
    /// Term changes allowed per window before the resource flaps.
    pub max_term_changes: u32,
    /// The sliding window.
    pub window: Duration,
    /// Most resources with per-resource series.
    pub max_tracked: usize,
}

impl Default for FlapConfig {
    fn default() -> FlapConfig {
        FlapConfig { max_term_changes: 10, window: Duration::from_secs(10), max_tracked: 1000 }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    resource: String,
}

struct Tracked {
    terms: VecDeque<Instant>,
    flapping: bool,
}

/// The storage families, registered once into the shared registry.
pub struct StorageMetrics {
    config: FlapConfig,
    admitted: Counter,
    rejected: Family<ReasonLabels, Counter>,
    guard_failures: Family<ReasonLabels, Counter>,
    term_changes: Counter,
    latency: Histogram,
    high_water: Family<ResourceLabels, Gauge<u64, AtomicU64>>,
    flapping: Family<ResourceLabels, Gauge>,
    flap_events: Counter,
    tracked_resources: Gauge,
    stored_bytes: Gauge<u64, AtomicU64>,
    space_refusals: Family<ReasonLabels, Counter>,
    recency: Mutex<SeriesBound<Tracked>>,
}

impl StorageMetrics {
    /// Builds the families and registers them into `metrics`.
    pub fn new(metrics: &fencing_base::telemetry::Metrics, config: FlapConfig) -> StorageMetrics {
        let m = StorageMetrics {
            config,
            admitted: Counter::default(),
            rejected: Family::default(),
            guard_failures: Family::default(),
            term_changes: Counter::default(),
            // 50 µs .. ~1.6 s
            latency: Histogram::new(exponential_buckets(50e-6, 2.0, 16)),
            high_water: Family::default(),
            flapping: Family::default(),
            flap_events: Counter::default(),
            tracked_resources: Gauge::default(),
            stored_bytes: Gauge::default(),
            space_refusals: Family::default(),
            recency: Mutex::new(SeriesBound::new(config.max_tracked)),
        };
        metrics.register(|reg: &mut Registry| {
            let reg = reg.sub_registry_with_prefix("fencing_storage");
            reg.register("writes_admitted", "Writes admitted by the guard and committed", m.admitted.clone());
            reg.register("writes_rejected", "Writes refused by the guard, by reason", m.rejected.clone());
            reg.register(
                "guard_failures",
                "Writes refused because the guard failed (fail closed)",
                m.guard_failures.clone(),
            );
            reg.register("term_changes", "Admitted writes that began a new token", m.term_changes.clone());
            reg.register("write_latency_seconds", "Write latency including durable commit", m.latency.clone());
            reg.register("high_water", "Current high-water per recently written resource", m.high_water.clone());
            reg.register("flapping", "1 while the resource's token advances faster than the limit", m.flapping.clone());
            reg.register("flap_events", "Transitions of a resource into flapping", m.flap_events.clone());
            reg.register(
                "tracked_resources",
                "Resources with per-resource series (bounded)",
                m.tracked_resources.clone(),
            );
            reg.register("stored_bytes", "Bytes of all stored objects (embedded store)", m.stored_bytes.clone());
            reg.register(
                "space_refusals",
                "Writes refused with 507, by reason (quota: --max-store-bytes; disk_full)",
                m.space_refusals.clone(),
            );
        });
        m
    }

    /// Records the latency of any write that reached the engine.
    pub fn observe_latency(&self, elapsed: Duration) {
        self.latency.observe(elapsed.as_secs_f64());
    }

    /// Sets the bytes of all stored objects.
    pub fn set_stored_bytes(&self, bytes: u64) {
        self.stored_bytes.set(bytes);
    }

    /// Records a write refused with 507, by reason (`quota`, `disk_full`).
    pub fn space_refused(&self, reason: &'static str) {
        self.space_refusals.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Records a rejection by reason.
    pub fn rejected(&self, reason: &'static str) {
        self.rejected.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Records a guard failure by reason.
    pub fn guard_failed(&self, reason: &'static str) {
        self.guard_failures.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Records an admitted write; returns true when the resource is (now) flapping.
    pub fn admitted(&self, resource: &str, high_water: u64, new_term: bool) -> bool {
        self.admitted.inc();
        if new_term {
            self.term_changes.inc();
        }
        let now = Instant::now();
        let mut r = self.recency.lock().expect("recency lock");
        let touched = r.touch(resource, || Tracked { terms: VecDeque::new(), flapping: false });
        if let Some(victim) = touched.evicted {
            let labels = ResourceLabels { resource: victim };
            self.high_water.remove(&labels);
            self.flapping.remove(&labels);
        }
        let entry = touched.value;
        if new_term {
            entry.terms.push_back(now);
        }
        while entry.terms.front().is_some_and(|t| now.duration_since(*t) > self.config.window) {
            entry.terms.pop_front();
        }
        let flapping = entry.terms.len() > self.config.max_term_changes as usize;
        let started = flapping && !entry.flapping;
        entry.flapping = flapping;
        let tracked = r.len() as i64;
        drop(r);
        let labels = ResourceLabels { resource: resource.to_owned() };
        self.high_water.get_or_create(&labels).set(high_water);
        self.flapping.get_or_create(&labels).set(i64::from(flapping));
        self.tracked_resources.set(tracked);
        if started {
            self.flap_events.inc();
            tracing::warn!(
                resource,
                high_water,
                max_term_changes = self.config.max_term_changes,
                window = ?self.config.window,
                "resource is flapping: its fencing token advances faster than the configured rate"
            );
        }
        flapping
    }

    /// Whether `resource` is currently flapping (false for untracked resources).
    pub fn is_flapping(&self, resource: &str) -> bool {
        let now = Instant::now();
        let r = self.recency.lock().expect("recency lock");
        r.get(resource).is_some_and(|t| {
            t.terms.iter().filter(|at| now.duration_since(**at) <= self.config.window).count()
                > self.config.max_term_changes as usize
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencing_base::telemetry::Metrics;

    #[test]
    fn cardinality_is_bounded_to_most_recent() {
        let metrics = Metrics::new();
        let m = StorageMetrics::new(&metrics, FlapConfig { max_tracked: 2, ..FlapConfig::default() });
        m.admitted("a", 1, true);
        m.admitted("b", 1, true);
        m.admitted("a", 2, true); // a is now the most recent
        m.admitted("c", 1, true); // evicts b
        let text = metrics.encode();
        assert!(text.contains("resource=\"a\""), "{text}");
        assert!(text.contains("resource=\"c\""), "{text}");
        assert!(!text.contains("resource=\"b\""), "{text}");
        assert!(text.contains("fencing_storage_tracked_resources 2"), "{text}");
    }

    #[test]
    fn flapping_after_too_many_term_changes() {
        let metrics = Metrics::new();
        let cfg = FlapConfig { max_term_changes: 3, window: Duration::from_secs(60), max_tracked: 10 };
        let m = StorageMetrics::new(&metrics, cfg);
        for t in 1..=3 {
            assert!(!m.admitted("r", t, true));
        }
        assert!(!m.admitted("r", 3, false), "same-token writes do not count");
        assert!(m.admitted("r", 4, true));
        assert!(m.is_flapping("r"));
        assert!(!m.is_flapping("other"));
        assert!(metrics.encode().contains("fencing_storage_flap_events_total 1"));
    }
}
