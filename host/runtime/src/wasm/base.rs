//! What both call paths share, so that arrows run one way: the per-store
//! state, lock-name interning, the contract error, and [`PathCalls`], the
//! trait each path implements and the guard calls.
//!
//! Invariant: a path never decides anything itself. It passes the inputs to
//! the component and lifts the component's answer; an answer outside the
//! contract is an error ([`contract`]), so the call fails closed.

use crate::proof::VerifierKey;
use crate::{BatchWrite, Fence, FenceState, Policy, Sequencer};
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
    #[inline(always)]
    pub(crate) fn get(&mut self, name: &str) -> Option<H> {
        if let (last, Some(handle)) = &self.last
            && same_name(last, name)
        {
            return Some(*handle);
        }
        self.find(name)
    }

    /// [`LockMap::get`] past the last name: the map, then remember the name.
    #[inline(never)]
    fn find(&mut self, name: &str) -> Option<H> {
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

/// Whether two lock names are the same bytes. Equal to `a == b`, but names
/// of 4 to 32 bytes (most lock names) compare as two overlapping words per
/// side, inline, instead of through a call to `memcmp`: a single decision
/// compares two names, and the calls showed in its profile.
#[inline(always)]
pub(crate) fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // The first and the last `W` bytes of both; for `W <= n <= 2W` they cover every byte.
    macro_rules! ends {
        ($w:ty) => {{
            const W: usize = std::mem::size_of::<$w>();
            let word = |s: &[u8], at: usize| <$w>::from_ne_bytes(s[at..at + W].try_into().expect("W bytes"));
            word(a, 0) == word(b, 0) && word(a, n - W) == word(b, n - W)
        }};
    }
    match n {
        16..=32 => ends!(u128),
        8..=15 => ends!(u64),
        4..=7 => ends!(u32),
        _ => a == b,
    }
}

/// Verdict codes of a batch and the fence after it.
pub(crate) type BatchCodes = (Vec<u8>, Option<FenceState>);

/// Verdict codes of a stream and the high-water mark after it.
pub(crate) type StreamCodes = (Vec<u8>, u64);

/// One instance's way into the rules. Every decision comes back as verdict
/// codes; the guard checks them against the inputs and rebuilds the
/// evidence from them, once, for either path.
pub(crate) trait PathCalls: Send {
    /// Lock names interned so far (bounds the worker's memory).
    fn interned(&self) -> usize;
    /// A single decision, as its verdict code (not yet checked against the inputs).
    fn admit(&mut self, s: &mut WorkerStore, f: Option<&Fence>, p: &Sequencer, policy: Policy) -> Result<u8>;
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
    #[inline(always)]
    fn lock(&mut self, store: &mut WorkerStore, name: &str) -> Result<Self::Handle> {
        match self.interned_locks().get(name) {
            Some(handle) => Ok(handle),
            None => self.intern(store, name),
        }
    }

    /// Constructs and records `name`'s handle: once per name and worker.
    #[cold]
    #[inline(never)]
    fn intern(&mut self, store: &mut WorkerStore, name: &str) -> Result<Self::Handle> {
        let handle = self.construct(store, name)?;
        self.interned_locks().insert(name, handle);
        Ok(handle)
    }

    /// The handles of the presented lock and of the fence's lock (when there
    /// is a fence), each interned on first use. Equal names share one
    /// handle, so the rules see one handle for one name.
    #[inline(always)]
    fn handles(
        &mut self,
        store: &mut WorkerStore,
        presented: &str,
        fence: Option<&Fence>,
    ) -> Result<(Self::Handle, Option<Self::Handle>)> {
        let lock = self.lock(store, presented)?;
        let fence_lock = match fence {
            None => None,
            Some(f) if same_name(&f.lock, presented) => Some(lock),
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

/// A verdict code the rules could not have given for the call's inputs.
#[cold]
#[inline(never)]
pub(crate) fn impossible(c: impl std::fmt::Display) -> wasmtime::Error {
    contract(format_args!("verdict code {c} is impossible for these inputs"))
}

#[cfg(test)]
mod tests {
    use super::same_name;

    #[test]
    fn names_compare_like_their_bytes() {
        let base: String = (0..40u8).map(|i| char::from(b'a' + i % 26)).collect();
        for n in 0..=base.len() {
            let a = &base[..n];
            assert!(same_name(a, a), "{n} bytes");
            assert!(same_name(a, &String::from(a)), "{n} bytes, another buffer");
            for at in 0..n {
                let mut other = a.as_bytes().to_vec();
                other[at] = b'#';
                let other = String::from_utf8(other).unwrap();
                assert!(!same_name(a, &other), "{n} bytes differing at {at}");
            }
            if n > 0 {
                assert!(!same_name(a, &base[..n - 1]), "{n} against {} bytes", n - 1);
            }
        }
    }
}
