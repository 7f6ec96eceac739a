//! The bounds on every call into a component, and how a broken call is named.
//!
//! Time: an epoch deadline, advanced by one ticker thread per guard every
//! millisecond. Memory: a store limiter refuses growth past the limit.
//! Stack: the engine's maximum wasm stack. A call that crosses any bound
//! traps; [`classify`] turns the trap into the [`GuardFailure`] the caller sees.

use super::base::StoreState;
use crate::{GuardFailure, PluginError};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use wasmtime::{Config, Engine, Store, Trap};

/// Bounds on every call into the component.
#[derive(Debug, Clone, Copy)]
pub struct WasmLimits {
    /// Linear memory an instance may grow to.
    pub memory_bytes: usize,
    /// Wall-clock budget of one call (rounded up to whole milliseconds).
    pub deadline: Duration,
    /// Maximum wasm stack.
    pub max_stack: usize,
}

impl Default for WasmLimits {
    fn default() -> Self {
        // The rules need a few pages; a batch of 1M writes needs ~40 MiB.
        WasmLimits { memory_bytes: 64 << 20, deadline: Duration::from_millis(100), max_stack: 256 << 10 }
    }
}

impl WasmLimits {
    /// The deadline in epoch ticks (one per millisecond, at least one).
    pub(crate) fn ticks(&self) -> u64 {
        self.deadline.as_millis().max(1) as u64
    }

    /// A store for one worker, bounded by these limits.
    pub(crate) fn store(&self, engine: &Engine) -> Store<StoreState> {
        let mut store = Store::new(engine, StoreState::new(self.memory_bytes));
        store.limiter(|s| s);
        store.set_epoch_deadline(self.ticks());
        store
    }
}

/// An engine configured for bounded calls under `limits`.
pub(crate) fn engine(limits: &WasmLimits) -> Result<Engine, PluginError> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(limits.max_stack);
    Engine::new(&config).map_err(|e| PluginError::Invalid(format!("engine: {e:#}")))
}

/// Advances `engine`'s epoch every millisecond until `stop` is set.
pub(crate) fn spawn_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("guard-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                engine.increment_epoch();
            }
        })
        .expect("spawn epoch ticker");
}

/// The failure a call's error stands for. `refused_growth`: the store's
/// limiter refused memory during the call.
pub(crate) fn classify(e: &wasmtime::Error, refused_growth: bool) -> GuardFailure {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => GuardFailure::Timeout,
        _ if refused_growth => GuardFailure::OutOfMemory,
        Some(trap) => GuardFailure::Trap(trap.to_string()),
        None => GuardFailure::Trap(format!("{e:#}")),
    }
}
