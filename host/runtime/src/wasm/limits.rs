//! The bounds on every call into a component, and how a broken call is named.
//!
//! Time: an epoch deadline, advanced by one ticker thread per guard every
//! tick: a tenth of the deadline, between 1 and 10 ms (so a deadline is
//! enforced to within about 10%, and a host with many guards, such as a
//! database with one per backend, is not woken a thousand times a second per guard). Memory: a store limiter refuses growth past the limit.
//! Stack: the engine's maximum wasm stack. A call that crosses any bound
//! traps; [`classify`] turns the trap into the [`GuardFailure`] the caller sees.
//!
//! [`EngineOptions`] say how much of the process the engine may take: a host
//! that owns its process (the reference server) lets wasmtime install signal
//! handlers and compile on a thread pool; a host that lives inside another
//! program's process (a database backend) turns both off. Either way the
//! ticker thread blocks every signal, so the host's handlers always run on the
//! host's own threads.

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
    /// Wall-clock budget of one call (rounded up to whole ticks; see the module docs).
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
    /// How often the epoch advances: a tenth of the deadline, within 1..=10 ms.
    pub(crate) fn tick(&self) -> Duration {
        (self.deadline / 10).clamp(Duration::from_millis(1), Duration::from_millis(10))
    }

    /// The deadline in epoch ticks, rounded up, at least one.
    pub(crate) fn ticks(&self) -> u64 {
        self.deadline.as_nanos().div_ceil(self.tick().as_nanos()).max(1) as u64
    }

    /// A store for one worker, bounded by these limits.
    pub(crate) fn store(&self, engine: &Engine) -> Store<StoreState> {
        let mut store = Store::new(engine, StoreState::new(self.memory_bytes));
        store.limiter(|s| s);
        store.set_epoch_deadline(self.ticks());
        store
    }
}

/// What the engine may take from the process it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// Let wasmtime install process-wide handlers for `SIGSEGV`, `SIGILL`,
    /// `SIGFPE` and `SIGBUS`, so linear-memory bounds are enforced by guard
    /// pages (faster code, a large virtual reservation per memory). Off:
    /// no handler is installed, every access is bounds-checked explicitly and
    /// a memory reserves only the memory limit.
    pub signal_handlers: bool,
    /// Compile on wasmtime's thread pool. Off: compile on the calling thread.
    pub parallel_compilation: bool,
}

impl Default for EngineOptions {
    /// A host that owns its process: handlers and the thread pool on.
    fn default() -> Self {
        EngineOptions { signal_handlers: true, parallel_compilation: true }
    }
}

impl EngineOptions {
    /// For a host inside another program's process (a database backend):
    /// no signal handlers, no compile threads, a small memory reservation.
    pub fn shared_process() -> Self {
        EngineOptions { signal_handlers: false, parallel_compilation: false }
    }
}

/// An engine configured for bounded calls under `limits`.
pub(crate) fn engine(limits: &WasmLimits, options: EngineOptions) -> Result<Engine, PluginError> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    config.max_wasm_stack(limits.max_stack);
    config.parallel_compilation(options.parallel_compilation);
    if !options.signal_handlers {
        config.signals_based_traps(false);
        config.memory_reservation(limits.memory_bytes as u64);
        config.memory_guard_size(0);
    }
    Engine::new(&config).map_err(|e| PluginError::Invalid(format!("engine: {e:#}")))
}

/// Advances `engine`'s epoch every `tick` until `stop` is set. The
/// thread starts with every signal blocked (the mask is inherited from the
/// spawning thread, blocked only around the spawn), so it never runs a
/// signal handler of the host.
pub(crate) fn spawn_ticker(engine: Engine, tick: Duration, stop: Arc<AtomicBool>) {
    let _blocked = SignalsBlocked::new();
    std::thread::Builder::new()
        .name("guard-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(tick);
                engine.increment_epoch();
            }
        })
        .expect("spawn epoch ticker");
}

/// Blocks every signal on the current thread until dropped, then restores
/// the previous mask.
struct SignalsBlocked {
    #[cfg(unix)]
    previous: libc::sigset_t,
}

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        #[cfg(unix)]
        // SAFETY: both sets are valid, initialized `sigset_t`s owned by this
        // frame; `pthread_sigmask` only reads `all` and writes `previous`.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut previous: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut previous);
            SignalsBlocked { previous }
        }
        #[cfg(not(unix))]
        SignalsBlocked {}
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: `previous` is the mask `pthread_sigmask` returned in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.previous, std::ptr::null_mut());
        }
    }
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
