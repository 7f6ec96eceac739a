//! Metrics in Prometheus text format, shared by every subsystem.
//!
//! Each subsystem registers its families into the one [`Metrics`] registry
//! when it is built; `GET /metrics` encodes the registry.

use axum::http::header;
use axum::response::IntoResponse;
use prometheus_client::registry::Registry;
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
