//! The Wasm guard: the `fencing:guard` component under wasmtime.
//!
//! One [`Engine`] and one compiled component; an `InstancePre` from which
//! workers are instantiated; each worker is a long-lived `Store` with its
//! instance, used by one call at a time. A thread keeps the worker of its
//! last call in a thread-local slot and its next call runs there, so the
//! common case touches no lock and moves nothing; other idle workers wait in
//! a shared pool.
//!
//! Every call is bounded: an epoch deadline (a ticker thread advances the
//! epoch every tick, `limits.rs`), a memory limit enforced by a store limiter, and
//! a small wasm stack. A call that traps, times out or runs out of memory
//! returns a [`GuardFailure`] and its worker is dropped, never reused: the
//! next call instantiates a fresh one. The guard holds no state of its own,
//! so a new plugin can be swapped in at any time ([`WasmGuard::swap`]).
//!
//! A worker calls the rules by one of two paths ([`CallPath`]): directly into
//! the component's core module (`direct.rs`, the default when the component
//! has that shape) or through wasmtime's component runtime (`component.rs`).
//! Both implement `base::PathCalls` and answer with verdict codes, single
//! decisions included; the codes are checked and the evidence rebuilt here
//! from the inputs, once, for either path.

pub(crate) mod abi;
pub(crate) mod base;
mod calls;
mod component;
pub(crate) mod direct;
mod limits;
pub mod plugin;

use self::base::{Batch, PathCalls, Signed, StoreState, impossible};
use self::calls::Calls;
use self::component::{ComponentCalls, Exports};
use self::direct::{DirectCalls, DirectPre};
pub use self::limits::{EngineOptions, WasmLimits};
use self::limits::{classify, spawn_ticker};
use self::plugin::{INTERFACE, PACKAGE, Plugin, PluginError, PluginInfo};
use crate::{
    BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, GuardKind, Policy, Sequencer, SignedDecision,
    StreamOutcome, Verdict, Verifier,
};
use fencing_rules::rules;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use wasmtime::Engine;
use wasmtime::component::{InstancePre, Linker};

/// How a worker reaches the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "snake_case"))]
pub enum CallPath {
    /// The component's core module, called with the canonical ABI handled by the host.
    Direct,
    /// wasmtime's component-model runtime.
    Component,
}

/// A loaded plugin, ready to instantiate workers.
struct Loaded {
    generation: u64,
    pre: InstancePre<StoreState>,
    exports: Exports,
    /// Set when workers take the direct path.
    direct: Option<DirectPre>,
    info: PluginInfo,
}

/// Distinct lock names a worker interns before it is retired (at its next
/// call its store, and every handle in it, is dropped), which bounds a
/// worker's memory.
const MAX_LOCKS_PER_WORKER: usize = 4096;

/// One store and instance, used by one call at a time.
struct Worker {
    generation: u64,
    store: base::WorkerStore,
    calls: Calls,
    /// The pool of the guard that built it, where it returns when a thread's
    /// slot is taken by another guard's worker.
    home: Weak<Pool>,
    /// The [`Verifier`]'s id whose keys the instance holds (0: none).
    verifier: u64,
}

type Pool = Mutex<Vec<Box<Worker>>>;

static NEXT_GUARD_ID: AtomicU64 = AtomicU64::new(1);

/// A thread's slot: the worker it used last, with its guard's id.
type Slot = Option<(u64, Box<Worker>)>;

thread_local! {
    /// This thread's slot. A call runs on the worker where it lies, so the
    /// common case touches the thread-local once and moves nothing.
    static HOT: RefCell<Slot> = const { RefCell::new(None) };
}

/// This thread's slot, found by a closure that does nothing else, so that
/// it inlines and the call runs outside it. For the guard's own use within
/// one call: the reference must not outlive it.
#[inline(always)]
fn hot_slot<'call>() -> &'call RefCell<Slot> {
    // SAFETY: a thread-local lives as long as its thread, and the reference
    // is used only during one call of the guard, on this thread.
    unsafe { &*HOT.with(|slot| slot as *const RefCell<Slot>) }
}

/// The component-backed [`Guard`].
pub struct WasmGuard {
    engine: Engine,
    limits: WasmLimits,
    /// `limits.ticks()`, computed once (it divides 128-bit durations).
    deadline_ticks: u64,
    /// Whether plugins of the direct shape take the direct path.
    prefer_direct: bool,
    loaded: RwLock<Arc<Loaded>>,
    generation: AtomicU64,
    /// Identifies this guard's workers in the threads' slots.
    id: u64,
    pool: Arc<Pool>,
    failures: AtomicU64,
    instances: AtomicU64,
    stop_ticker: Arc<AtomicBool>,
}

impl Worker {
    fn retired(&self) -> bool {
        self.calls.interned() > MAX_LOCKS_PER_WORKER
    }
}

impl WasmGuard {
    /// An engine configured for bounded calls, for a host that owns its process.
    pub fn engine(limits: &WasmLimits) -> Result<Engine, PluginError> {
        limits::engine(limits, EngineOptions::default())
    }

    /// An engine configured for bounded calls, taking from the process only
    /// what `options` allow.
    pub fn engine_with(limits: &WasmLimits, options: EngineOptions) -> Result<Engine, PluginError> {
        limits::engine(limits, options)
    }

    /// Builds a guard around `plugin`, which must have been compiled with
    /// `engine`. Calls take the direct path when the plugin has its shape.
    pub fn new(engine: Engine, plugin: Plugin, limits: WasmLimits) -> Result<WasmGuard, PluginError> {
        Self::with_path(engine, plugin, limits, CallPath::Direct)
    }

    /// As [`WasmGuard::new`], with `CallPath::Component` forcing the
    /// component path for every plugin.
    pub fn with_path(
        engine: Engine,
        plugin: Plugin,
        limits: WasmLimits,
        path: CallPath,
    ) -> Result<WasmGuard, PluginError> {
        let prefer_direct = path == CallPath::Direct;
        let loaded = Arc::new(prepare(&engine, plugin, 1, prefer_direct)?);
        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), limits.tick(), stop_ticker.clone());
        let guard = WasmGuard {
            engine,
            limits,
            deadline_ticks: limits.ticks(),
            prefer_direct,
            loaded: RwLock::new(loaded),
            generation: AtomicU64::new(1),
            id: NEXT_GUARD_ID.fetch_add(1, Ordering::Relaxed),
            pool: Arc::new(Mutex::new(Vec::new())),
            failures: AtomicU64::new(0),
            instances: AtomicU64::new(0),
            stop_ticker,
        };
        // Instantiate once now so a plugin that cannot start fails at load, not on the first write.
        let worker = guard.build_worker().map_err(|e| PluginError::Instantiate(e.to_string()))?;
        guard.pool.lock().expect("pool lock").push(Box::new(worker));
        Ok(guard)
    }

    /// The embedded component with default limits and an optional cache directory.
    pub fn embedded(cache: Option<&std::path::Path>) -> Result<WasmGuard, PluginError> {
        Self::embedded_on(cache, CallPath::Direct)
    }

    /// As [`WasmGuard::embedded`], with the call path chosen as in [`WasmGuard::with_path`].
    pub fn embedded_on(cache: Option<&std::path::Path>, path: CallPath) -> Result<WasmGuard, PluginError> {
        let limits = WasmLimits::default();
        let engine = Self::engine(&limits)?;
        let plugin = Plugin::embedded(&engine, cache)?;
        Self::with_path(engine, plugin, limits, path)
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
        let loaded = Arc::new(prepare(&self.engine, plugin, generation, self.prefer_direct)?);
        let worker = build_worker_from(&self.engine, &loaded, &self.limits, &self.pool)
            .map_err(|e| PluginError::Instantiate(e.to_string()))?;
        self.instances.fetch_add(1, Ordering::Relaxed);
        *self.loaded.write().expect("plugin lock") = loaded;
        self.generation.store(generation, Ordering::Release);
        let mut pool = self.pool.lock().expect("pool lock");
        pool.clear();
        pool.push(Box::new(worker));
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

    /// The path calls take with the current plugin.
    pub fn call_path(&self) -> CallPath {
        match self.loaded.read().expect("plugin lock").direct {
            Some(_) => CallPath::Direct,
            None => CallPath::Component,
        }
    }

    /// How many calls failed closed since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// How many instances were created since start: one at load, one per
    /// swap, and one for every worker that replaced a discarded one or that
    /// concurrency required.
    pub fn instances_created(&self) -> u64 {
        self.instances.load(Ordering::Relaxed)
    }

    /// Instantiates a fresh worker from the current `InstancePre` and drops
    /// it: the cost a call pays after a failure discarded its worker.
    pub fn instantiate(&self) -> Result<(), GuardFailure> {
        self.build_worker().map(drop)
    }

    fn build_worker(&self) -> Result<Worker, GuardFailure> {
        let loaded = self.loaded.read().expect("plugin lock").clone();
        self.instances.fetch_add(1, Ordering::Relaxed);
        build_worker_from(&self.engine, &loaded, &self.limits, &self.pool)
    }

    /// Fills this thread's slot with a worker of this guard's current
    /// generation: one from the pool, else a new one. A worker the slot held
    /// goes back to its own guard's pool, or is dropped if it is this
    /// guard's (then it is outdated or retired).
    #[cold]
    #[inline(never)]
    fn refill(&self, slot: &mut Slot, generation: u64) -> Result<(), GuardFailure> {
        if let Some((id, displaced)) = slot.take()
            && id != self.id
            && let Some(pool) = displaced.home.upgrade()
        {
            pool.lock().expect("pool lock").push(displaced);
        }
        let pooled = self.pool.lock().expect("pool lock").pop();
        let worker = match pooled {
            Some(w) if w.generation == generation => w,
            _ => Box::new(self.build_worker()?),
        };
        *slot = Some((self.id, worker));
        Ok(())
    }

    /// Runs `f` under the call limits on this thread's worker, which stays
    /// in the thread's slot.
    #[inline]
    fn call<R>(&self, f: impl FnOnce(&mut Worker) -> wasmtime::Result<R>) -> Result<R, GuardFailure> {
        // A failure comes out of `run` boxed, one pointer wide, so that a
        // small `R` (a verdict code) comes back in registers, not through the stack.
        self.run(f).map_err(|failure| *failure)
    }

    /// [`WasmGuard::call`] with its failure boxed.
    #[inline]
    fn run<R>(&self, f: impl FnOnce(&mut Worker) -> wasmtime::Result<R>) -> Result<R, Box<GuardFailure>> {
        let generation = self.generation.load(Ordering::Acquire);
        // No call re-enters the guard (the rules import nothing that calls
        // back), so the slot stays borrowed for the whole call.
        let mut slot = hot_slot().borrow_mut();
        if !matches!(&*slot, Some((id, w)) if *id == self.id && w.generation == generation && !w.retired()) {
            self.refill(&mut slot, generation).map_err(Box::new)?;
        }
        let (_, worker) = slot.as_mut().expect("refill filled the slot");
        worker.store.set_epoch_deadline(self.deadline_ticks);
        f(worker).map_err(|e| self.discard(&mut slot, &e))
    }

    /// Fails a call whose answer broke the contract after it came back:
    /// this thread's worker, the one that answered, is dropped as after a trap.
    #[cold]
    #[inline(never)]
    fn broken(&self, e: wasmtime::Error) -> GuardFailure {
        *self.discard(&mut hot_slot().borrow_mut(), &e)
    }

    /// Drops the worker of a failed call, never to be reused (its instance
    /// may be in any state), and names the failure.
    #[cold]
    #[inline(never)]
    fn discard(&self, slot: &mut Slot, e: &wasmtime::Error) -> Box<GuardFailure> {
        let refused_growth = slot.as_ref().is_some_and(|(_, w)| w.store.data().refused_growth);
        *slot = None;
        self.failures.fetch_add(1, Ordering::Relaxed);
        Box::new(classify(e, refused_growth))
    }
}

impl Drop for WasmGuard {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

fn prepare(engine: &Engine, plugin: Plugin, generation: u64, prefer_direct: bool) -> Result<Loaded, PluginError> {
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
        exports: Exports {
            lock_name: func("[constructor]lock-name")?,
            admit: func("admit")?,
            batch: func("admit-batch")?,
            stream: func("admit-stream")?,
            set_keys: func("set-keys")?,
            signed: func("admit-signed")?,
        },
        pre,
        direct: if prefer_direct { plugin.direct } else { None },
        info: plugin.info,
    })
}

fn build_worker_from(
    engine: &Engine,
    loaded: &Loaded,
    limits: &WasmLimits,
    home: &Arc<Pool>,
) -> Result<Worker, GuardFailure> {
    let mut store = limits.store(engine);
    let unavailable = |e: wasmtime::Error| GuardFailure::Unavailable(format!("{e:#}"));
    let calls = match &loaded.direct {
        Some(direct) => Calls::Direct(DirectCalls::instantiate(&mut store, direct).map_err(unavailable)?),
        None => {
            let instance = loaded.pre.instantiate(&mut store).map_err(unavailable)?;
            Calls::Component(ComponentCalls::new(&mut store, &instance, &loaded.exports).map_err(unavailable)?)
        }
    };
    Ok(Worker { generation: loaded.generation, store, calls, home: Arc::downgrade(home), verifier: 0 })
}

impl Guard for WasmGuard {
    fn kind(&self) -> GuardKind {
        GuardKind::Wasm
    }

    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure> {
        // Only the code crosses back out of the call; the decision is built
        // once, here, in the caller's slot, from inputs read after the call
        // (rather than kept across it).
        let c = self.call(|w| w.calls.admit(&mut w.store, current, presented, policy))?;
        let state = current.map(Fence::state);
        let write = presented.write();
        rules::expand(state, write, c).ok_or_else(|| self.broken(impossible(c)))
    }

    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure> {
        let state = current.map(Fence::state);
        self.call(|w| {
            let (codes, fence) = w.calls.admit_batch(&mut w.store, current, Batch { lock, writes }, policy)?;
            let verdicts = rules::expand_batch(state, writes, &codes)
                .ok_or_else(|| base::contract("batch verdict codes do not match the writes"))?;
            Ok(BatchOutcome { verdicts, fence })
        })
    }

    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure> {
        self.call(|w| {
            let (codes, high_water) = w.calls.admit_stream(&mut w.store, high_water, tokens, policy)?;
            if codes.len() != tokens.len() {
                return Err(base::contract("stream verdict count differs from the token count"));
            }
            let verdicts = Verdict::from_codes(&codes).ok_or_else(|| base::contract("unknown stream verdict code"))?;
            Ok(StreamOutcome { verdicts, high_water })
        })
    }

    fn admit_signed(
        &self,
        verifier: &Verifier,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure> {
        let state = current.map(Fence::state);
        let write = presented.write();
        self.call(|w| {
            if w.verifier != verifier.id() {
                w.calls.set_keys(&mut w.store, verifier.keys())?;
                w.verifier = verifier.id();
            }
            let c = w.calls.admit_signed(&mut w.store, current, Signed { presented, proof }, policy)?;
            abi::signed_decision(state, write, proof, c).ok_or_else(|| impossible(c))
        })
    }
}
