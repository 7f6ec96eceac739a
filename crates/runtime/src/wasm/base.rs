//! What both call paths share, so that arrows run one way: the per-store
//! state, lock-name interning, the contract error, and [`PathCalls`], the
//! trait each path implements and the guard calls.
//!
//! Invariant: a path never decides anything itself. It passes the inputs to
//! the component and lifts the component's answer; an answer outside the
//! contract is an error ([`contract`]), so the call fails closed.

use crate::proof::VerifierKey;
use crate::{BatchWrite, Decision, Fence, FenceState, Policy, Sequencer};
use std::collections::HashMap;
use wasmtime::{ResourceLimiter, Store};

/// A worker's store.
pub(crate) type WorkerStore = Store<StoreState>;

/// Lock names interned in one worker, to the worker's handle or rep for each.
/// Names come from clients, so the hasher is randomly seeded. The name found
/// last is kept beside the map: a run of writes under one lock (the common
/// case) costs one comparison per call instead of a hash and a comparison.
pub(crate) struct LockMap<H> {
    map: HashMap<Box<str>, H, foldhash::fast::RandomState>,
    /// The name of the last lookup that found a handle (its buffer is reused), and that handle.
    last: (String, Option<H>),
}

impl<H: Copy> Default for LockMap<H> {
    fn default() -> Self {
        LockMap { map: HashMap::default(), last: (String::new(), None) }
    }
}

impl<H: Copy> LockMap<H> {
    /// The handle interned for `name`, if any.
    #[inline]
    pub(crate) fn get(&mut self, name: &str) -> Option<H> {
        if let (last, Some(handle)) = &self.last
            && last == name
        {
            return Some(*handle);
        }
        let handle = *self.map.get(name)?;
        self.last.0.clear();
        self.last.0.push_str(name);
        self.last.1 = Some(handle);
        Some(handle)
    }

    /// Records `name`'s handle.
    pub(crate) fn insert(&mut self, name: &str, handle: H) {
        self.map.insert(name.into(), handle);
    }

    /// How many names are interned.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Verdict codes of a batch and the fence after it.
pub(crate) type BatchCodes = (Vec<u8>, Option<FenceState>);

/// Verdict codes of a stream and the high-water mark after it.
pub(crate) type StreamCodes = (Vec<u8>, u64);

/// One instance's way into the rules. The guard rebuilds batch and stream
/// evidence from the codes, once, for either path.
pub(crate) trait PathCalls: Send {
    /// Lock names interned so far (bounds the worker's memory).
    fn interned(&self) -> usize;
    /// `admit`.
    fn admit(&mut self, s: &mut WorkerStore, f: Option<&Fence>, p: &Sequencer, policy: Policy) -> Result<Decision>;
    /// `admit-batch`, as verdict codes.
    fn admit_batch(&mut self, s: &mut WorkerStore, f: Option<&Fence>, b: Batch<'_>, p: Policy) -> Result<BatchCodes>;
    /// `admit-stream`, as verdict codes.
    fn admit_stream(&mut self, s: &mut WorkerStore, high_water: u64, t: &[u64], p: Policy) -> Result<StreamCodes>;
    /// `set-keys`; keys the host checked, so a refusal breaks the contract.
    fn set_keys(&mut self, s: &mut WorkerStore, keys: &[VerifierKey]) -> Result<()>;
    /// `admit-signed`, as its verdict code.
    fn admit_signed(&mut self, s: &mut WorkerStore, f: Option<&Fence>, w: Signed<'_>, p: Policy) -> Result<u8>;
}

/// A signed write: the presented sequencer and its proof.
#[derive(Clone, Copy)]
pub(crate) struct Signed<'a> {
    /// The presented lock, token and sequence.
    pub presented: &'a Sequencer,
    /// The proof bytes.
    pub proof: &'a [u8],
}

/// The writes of one batch and the lock they are presented under.
#[derive(Clone, Copy)]
pub(crate) struct Batch<'a> {
    /// The presented lock.
    pub lock: &'a str,
    /// The writes, in order.
    pub writes: &'a [BatchWrite],
}

/// wasmtime's result, the error type of every call into a component.
pub(crate) type Result<T> = wasmtime::Result<T>;

/// Per-store state: the memory limiter, whether it refused growth, and the
/// `lock-name` handle table of the direct path (handle `i + 1` has rep
/// `handles[i]`; `None` once dropped).
pub(crate) struct StoreState {
    pub(crate) memory_bytes: usize,
    pub(crate) refused_growth: bool,
    pub(crate) handles: Vec<Option<u32>>,
}

impl StoreState {
    /// A fresh store's state under a memory limit.
    pub(crate) fn new(memory_bytes: usize) -> StoreState {
        StoreState { memory_bytes, refused_growth: false, handles: Vec::new() }
    }
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

/// How a call path interns lock names: each name's `lock-name` is constructed
/// once per worker and its handle (a `ResourceAny`, or a rep on the direct
/// path) reused by every later call. The lookup, and the sharing of one handle
/// between a fence and a sequencer naming the same lock, are written here once.
pub(crate) trait Interning {
    /// What a path holds for one constructed `lock-name`.
    type Handle: Copy;

    /// The worker's interned names.
    fn interned_locks(&mut self) -> &mut LockMap<Self::Handle>;

    /// Constructs `name`'s `lock-name` in the instance.
    fn construct(&mut self, store: &mut WorkerStore, name: &str) -> Result<Self::Handle>;

    /// The handle of `name`, constructed on first use.
    #[inline]
    fn lock(&mut self, store: &mut WorkerStore, name: &str) -> Result<Self::Handle> {
        if let Some(handle) = self.interned_locks().get(name) {
            return Ok(handle);
        }
        let handle = self.construct(store, name)?;
        self.interned_locks().insert(name, handle);
        Ok(handle)
    }

    /// The handles of the presented lock and of the fence's lock (when there
    /// is a fence), each interned on first use. Equal names share one
    /// handle, so the rules see one handle for one name.
    #[inline]
    fn handles(
        &mut self,
        store: &mut WorkerStore,
        presented: &str,
        fence: Option<&Fence>,
    ) -> Result<(Self::Handle, Option<Self::Handle>)> {
        let lock = self.lock(store, presented)?;
        let fence_lock = match fence {
            None => None,
            Some(f) if f.lock == presented => Some(lock),
            Some(f) => Some(self.lock(store, &f.lock)?),
        };
        Ok((lock, fence_lock))
    }
}

/// A plugin's answer that breaks the contract (wrong length, unknown code,
/// out-of-bounds pointer): the call fails closed like a trap.
pub(crate) fn contract(what: impl std::fmt::Display) -> wasmtime::Error {
    wasmtime::Error::msg(format!("plugin broke the fencing:guard contract: {what}"))
}
