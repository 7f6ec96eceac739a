//! Metrics in Prometheus text format, shared by every subsystem.
//!
//! Each subsystem registers its families into the one [`Metrics`] registry
//! when it is built; `GET /metrics` encodes the registry. [`SeriesBound`]
//! keeps the per-resource label values of any family to a fixed number.

use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::registry::Registry;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The process-wide registry.
#[derive(Clone, Default)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
}

impl Metrics {
    /// A new empty registry.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Registers families under `prefix` (e.g. `fencing_storage`).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        f(&mut self.registry.lock().expect("metrics registry"))
    }

    /// The registry in Prometheus text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let reg = self.registry.lock().expect("metrics registry");
        prometheus_client::encoding::text::encode(&mut out, &reg).expect("encoding to a String cannot fail");
        out
    }

    /// The `GET /metrics` handler.
    pub fn handler(&self) -> impl IntoResponse + use<> {
        ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], self.encode())
    }
}

/// A key's touch of a [`SeriesBound`].
pub struct Touched<'a, V> {
    /// The key's state (created by `init` if the key was not tracked).
    pub value: &'a mut V,
    /// A key evicted to make room, whose series the caller must remove.
    pub evicted: Option<String>,
}

/// Bounds the cardinality of per-resource label values, evicting the least
/// recently touched key to make room for a new one.
///
/// Invariant: at most `capacity` keys are tracked, and a caller creates a
/// labelled series only for a tracked key, so a client cannot grow the
/// registry without bound by inventing resource names. Each key carries a
/// caller-defined value `V` and the tick of its last touch; `by_tick` holds
/// exactly the tracked keys, ordered from least to most recently touched.
pub struct SeriesBound<V> {
    capacity: usize,
    tick: u64,
    by_key: HashMap<String, (u64, V)>,
    by_tick: BTreeMap<u64, String>,
}

impl<V> SeriesBound<V> {
    /// An empty bound holding at most `capacity` keys (at least one).
    pub fn new(capacity: usize) -> SeriesBound<V> {
        SeriesBound { capacity: capacity.max(1), tick: 0, by_key: HashMap::new(), by_tick: BTreeMap::new() }
    }

    /// Marks `key` as the most recently used, tracking it (with `init()`) if
    /// it was not, and evicting the least recently used key when full.
    pub fn touch(&mut self, key: &str, init: impl FnOnce() -> V) -> Touched<'_, V> {
        self.tick += 1;
        let tick = self.tick;
        let mut evicted = None;
        if let Some((last, _)) = self.by_key.get_mut(key) {
            // A tracked key moves to the newest tick with the name it has, so
            // touching it (every grant, every write) allocates nothing.
            let old = std::mem::replace(last, tick);
            let name = self.by_tick.remove(&old).expect("by_tick holds every tracked key");
            self.by_tick.insert(tick, name);
        } else {
            if self.by_key.len() >= self.capacity
                && let Some((_, victim)) = self.by_tick.pop_first()
            {
                self.by_key.remove(&victim);
                evicted = Some(victim);
            }
            self.by_key.insert(key.to_owned(), (tick, init()));
            self.by_tick.insert(tick, key.to_owned());
        }
        let (_, value) = self.by_key.get_mut(key).expect("tracked above");
        Touched { value, evicted }
    }

    /// The state of `key` if it is tracked; does not count as a use.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.by_key.get(key).map(|(_, v)| v)
    }

    /// How many keys are tracked.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys<V>(b: &SeriesBound<V>) -> Vec<&str> {
        b.by_tick.values().map(String::as_str).collect()
    }

    #[test]
    fn evicts_the_least_recently_touched_key() {
        let mut b = SeriesBound::new(2);
        assert_eq!(b.touch("a", || 1).evicted, None);
        assert_eq!(b.touch("b", || 2).evicted, None);
        assert_eq!(b.touch("a", || 99).evicted, None, "a is now the most recent");
        let t = b.touch("c", || 3);
        assert_eq!(t.evicted.as_deref(), Some("b"));
        assert_eq!(*t.value, 3);
        assert_eq!(keys(&b), ["a", "c"]);
        assert_eq!(b.get("a"), Some(&1), "touching a tracked key keeps its state");
        assert_eq!(b.get("b"), None);
        assert_eq!(b.len(), 2);
    }

    #[test]
    fn capacity_is_at_least_one() {
        let mut b = SeriesBound::new(0);
        assert_eq!(b.touch("a", || ()).evicted, None);
        assert_eq!(b.touch("b", || ()).evicted.as_deref(), Some("a"));
        assert_eq!(keys(&b), ["b"]);
    }
}
