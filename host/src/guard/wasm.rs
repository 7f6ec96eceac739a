//! The Wasm guard: the `fencing:guard` component under wasmtime.
//!
//! One [`Engine`] and one compiled component; an `InstancePre` from which
//! workers are instantiated; each worker is a long-lived `Store` with its
//! instance, taken from a pool for one call and returned after it.
//!
//! Every call is bounded: an epoch deadline (a ticker thread advances the
//! epoch every millisecond), a memory limit enforced by a store limiter, and
//! a small wasm stack. A call that traps, times out or runs out of memory
//! returns a [`GuardFailure`] and its worker is dropped, never reused: the
//! next call instantiates a fresh one. The guard holds no state of its own,
//! so a new plugin can be swapped in at any time ([`WasmGuard::swap`]).

use super::abi::{self, AdmitParams, AdmitResults, BatchParams, BatchResults, StreamParams, StreamResults};
use super::plugin::{INTERFACE, PACKAGE, Plugin, PluginError, PluginInfo};
use super::{
    BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, GuardKind, Policy, Sequencer, StreamOutcome,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use wasmtime::component::{ComponentExportIndex, Func, InstancePre, Linker, TypedFunc};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap};

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

/// Per-store state: the memory limiter and whether it refused growth.
struct StoreState {
    memory_bytes: usize,
    refused_growth: bool,
}

impl ResourceLimiter for StoreState {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let ok = desired <= self.memory_bytes;
        self.refused_growth |= !ok;
        Ok(ok)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 10_000)
    }
}

/// A loaded plugin, ready to instantiate workers.
struct Loaded {
    generation: u64,
    pre: InstancePre<StoreState>,
    admit: ComponentExportIndex,
    batch: ComponentExportIndex,
    stream: ComponentExportIndex,
    info: PluginInfo,
}

/// One store and instance, used by one call at a time.
struct Worker {
    generation: u64,
    store: Store<StoreState>,
    admit: Func,
    batch: Func,
    stream: Func,
}

/// The component-backed [`Guard`].
pub struct WasmGuard {
    engine: Engine,
    limits: WasmLimits,
    loaded: RwLock<Arc<Loaded>>,
    generation: AtomicU64,
    pool: Mutex<Vec<Worker>>,
    failures: AtomicU64,
    stop_ticker: Arc<AtomicBool>,
}

impl WasmGuard {
    /// An engine configured for bounded calls.
    pub fn engine(limits: &WasmLimits) -> Result<Engine, PluginError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.max_wasm_stack(limits.max_stack);
        Engine::new(&config).map_err(|e| PluginError::Invalid(format!("engine: {e:#}")))
    }

    /// Builds a guard around `plugin`, which must have been compiled with `engine`.
    pub fn new(engine: Engine, plugin: Plugin, limits: WasmLimits) -> Result<WasmGuard, PluginError> {
        let loaded = Arc::new(prepare(&engine, plugin, 1)?);
        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), stop_ticker.clone());
        let guard = WasmGuard {
            engine,
            limits,
            loaded: RwLock::new(loaded),
            generation: AtomicU64::new(1),
            pool: Mutex::new(Vec::new()),
            failures: AtomicU64::new(0),
            stop_ticker,
        };
        // Instantiate once now so a plugin that cannot start fails at load, not on the first write.
        let worker = guard.build_worker().map_err(|e| PluginError::Instantiate(e.to_string()))?;
        guard.pool.lock().expect("pool lock").push(worker);
        Ok(guard)
    }

    /// The embedded component with default limits and an optional cache directory.
    pub fn embedded(cache: Option<&std::path::Path>) -> Result<WasmGuard, PluginError> {
        let limits = WasmLimits::default();
        let engine = Self::engine(&limits)?;
        let plugin = Plugin::embedded(&engine, cache)?;
        Self::new(engine, plugin, limits)
    }

    /// A component file with default limits and an optional cache directory.
    pub fn from_file(path: &std::path::Path, cache: Option<&std::path::Path>) -> Result<WasmGuard, PluginError> {
        Self::from_file_with(path, cache, WasmLimits::default())
    }

    /// A component file with the given limits.
    pub fn from_file_with(
        path: &std::path::Path,
        cache: Option<&std::path::Path>,
        limits: WasmLimits,
    ) -> Result<WasmGuard, PluginError> {
        let engine = Self::engine(&limits)?;
        let plugin = Plugin::from_file(&engine, path, cache)?;
        Self::new(engine, plugin, limits)
    }

    /// The engine the guard compiles plugins with.
    pub fn engine_ref(&self) -> &Engine {
        &self.engine
    }

    /// Replaces the plugin without a restart. The new plugin is checked and
    /// instantiated before it takes over; on error the old one stays. Calls
    /// in flight finish on the old plugin; later calls use the new one.
    pub fn swap(&self, plugin: Plugin) -> Result<(), PluginError> {
        let generation = self.generation.load(Ordering::Acquire) + 1;
        let loaded = Arc::new(prepare(&self.engine, plugin, generation)?);
        let worker = build_worker_from(&self.engine, &loaded, &self.limits)
            .map_err(|e| PluginError::Instantiate(e.to_string()))?;
        *self.loaded.write().expect("plugin lock") = loaded;
        self.generation.store(generation, Ordering::Release);
        let mut pool = self.pool.lock().expect("pool lock");
        pool.clear();
        pool.push(worker);
        Ok(())
    }

    /// Loads `path` and swaps it in.
    pub fn swap_file(
        &self,
        path: &std::path::Path,
        cache: Option<&std::path::Path>,
    ) -> Result<PluginInfo, PluginError> {
        let plugin = Plugin::from_file(&self.engine, path, cache)?;
        let info = plugin.info.clone();
        self.swap(plugin)?;
        Ok(info)
    }

    /// Description of the plugin currently in use.
    pub fn info(&self) -> PluginInfo {
        self.loaded.read().expect("plugin lock").info.clone()
    }

    /// How many calls failed closed since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn build_worker(&self) -> Result<Worker, GuardFailure> {
        let loaded = self.loaded.read().expect("plugin lock").clone();
        build_worker_from(&self.engine, &loaded, &self.limits)
    }

    /// Runs `f` on a pooled worker under the call limits. A failed worker is dropped.
    fn call<R>(&self, f: impl FnOnce(&mut Worker) -> wasmtime::Result<R>) -> Result<R, GuardFailure> {
        let current = self.generation.load(Ordering::Acquire);
        let pooled = self.pool.lock().expect("pool lock").pop();
        let mut worker = match pooled {
            Some(w) if w.generation == current => w,
            _ => self.build_worker()?,
        };
        let ticks = self.limits.deadline.as_millis().max(1) as u64;
        worker.store.set_epoch_deadline(ticks);
        match f(&mut worker) {
            Ok(r) => {
                self.pool.lock().expect("pool lock").push(worker);
                Ok(r)
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                let failure = classify(&e, worker.store.data().refused_growth);
                tracing::warn!(reason = failure.reason(), error = %format!("{e:#}"), "guard call failed closed; instance discarded");
                Err(failure)
            }
        }
    }
}

impl Drop for WasmGuard {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

fn classify(e: &wasmtime::Error, refused_growth: bool) -> GuardFailure {
    match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => GuardFailure::Timeout,
        _ if refused_growth => GuardFailure::OutOfMemory,
        Some(trap) => GuardFailure::Trap(trap.to_string()),
        None => GuardFailure::Trap(format!("{e:#}")),
    }
}

fn spawn_ticker(engine: Engine, stop: Arc<AtomicBool>) {
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

fn prepare(engine: &Engine, plugin: Plugin, generation: u64) -> Result<Loaded, PluginError> {
    let linker = Linker::<StoreState>::new(engine);
    let pre = linker.instantiate_pre(&plugin.component).map_err(|e| PluginError::Instantiate(format!("{e:#}")))?;
    let export = plugin.info.package.clone().unwrap_or_else(|| format!("{PACKAGE}/{INTERFACE}"));
    let component = &plugin.component;
    let (_, iface) = component
        .get_export(None, &export)
        .ok_or_else(|| PluginError::Incompatible(format!("missing export `{export}`")))?;
    let func = |name: &str| {
        component
            .get_export_index(Some(&iface), name)
            .ok_or_else(|| PluginError::Incompatible(format!("`{export}` has no function `{name}`")))
    };
    Ok(Loaded {
        generation,
        admit: func("admit")?,
        batch: func("admit-batch")?,
        stream: func("admit-stream")?,
        pre,
        info: plugin.info,
    })
}

fn build_worker_from(engine: &Engine, loaded: &Loaded, limits: &WasmLimits) -> Result<Worker, GuardFailure> {
    let mut store = Store::new(engine, StoreState { memory_bytes: limits.memory_bytes, refused_growth: false });
    store.limiter(|s| s);
    store.set_epoch_deadline(limits.deadline.as_millis().max(1) as u64);
    let unavailable = |e: wasmtime::Error| GuardFailure::Unavailable(format!("{e:#}"));
    let instance = loaded.pre.instantiate(&mut store).map_err(unavailable)?;
    // Type-check each signature once; calls then use unchecked views with the call's lifetimes.
    let admit = instance
        .get_typed_func::<AdmitParams<'static>, AdmitResults>(&mut store, &loaded.admit)
        .map_err(unavailable)?;
    let batch = instance
        .get_typed_func::<BatchParams<'static>, BatchResults>(&mut store, &loaded.batch)
        .map_err(unavailable)?;
    let stream = instance
        .get_typed_func::<StreamParams<'static>, StreamResults>(&mut store, &loaded.stream)
        .map_err(unavailable)?;
    Ok(Worker {
        generation: loaded.generation,
        store,
        admit: *admit.func(),
        batch: *batch.func(),
        stream: *stream.func(),
    })
}

impl Guard for WasmGuard {
    fn kind(&self) -> GuardKind {
        GuardKind::Wasm
    }

    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure> {
        self.call(|w| {
            // SAFETY: `w.admit` was type-checked against `AdmitParams`/`AdmitResults` in `build_worker_from`.
            let f: TypedFunc<AdmitParams<'_>, AdmitResults> = unsafe { TypedFunc::new_unchecked(w.admit) };
            let (r,) = f.call(&mut w.store, (current.map(Into::into), presented.into(), policy.into()))?;
            Ok(abi::decision(r))
        })
    }

    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure> {
        let args: Vec<abi::BatchWriteArg> = writes.iter().map(Into::into).collect();
        self.call(|w| {
            // SAFETY: type-checked against `BatchParams`/`BatchResults` in `build_worker_from`.
            let f: TypedFunc<BatchParams<'_>, BatchResults> = unsafe { TypedFunc::new_unchecked(w.batch) };
            let (r,) = f.call(&mut w.store, (current.map(Into::into), lock, &args, policy.into()))?;
            Ok(r.into())
        })
    }

    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure> {
        self.call(|w| {
            // SAFETY: type-checked against `StreamParams`/`StreamResults` in `build_worker_from`.
            let f: TypedFunc<StreamParams<'_>, StreamResults> = unsafe { TypedFunc::new_unchecked(w.stream) };
            let (r,) = f.call(&mut w.store, (high_water, tokens, policy.into()))?;
            Ok(r.into())
        })
    }
}
