//! The component path: calls through wasmtime's component-model runtime,
//! which lowers and lifts every value itself. It runs any component that
//! passes the compatibility check; the direct path (`direct.rs`) is a faster
//! route for components of the usual shape.

use super::abi::{
    self, AdmitParams, AdmitResults, BatchParams, BatchResults, FenceArg, LockParams, LockResults, SequencerArg,
    StreamParams, StreamResults,
};
use super::wasm::{Interning, LockMap, StoreState};
use super::{BatchWrite, Decision, Fence, FenceState, Policy, Sequencer};
use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, Func, Instance, ResourceAny, TypedFunc};

impl Interning for ComponentCalls {
    type Handle = ResourceAny;

    fn interned_locks(&mut self) -> &mut LockMap<ResourceAny> {
        &mut self.locks
    }

    fn construct(&mut self, store: &mut Store<StoreState>, name: &str) -> wasmtime::Result<ResourceAny> {
        // SAFETY: `lock_name` was type-checked against `LockParams`/`LockResults` in `new`.
        let f: TypedFunc<LockParams<'_>, LockResults> = unsafe { TypedFunc::new_unchecked(self.lock_name) };
        let (handle,) = f.call(&mut *store, (name,))?;
        Ok(handle)
    }
}

/// The export indices of the four functions, resolved once per plugin.
#[derive(Clone, Copy)]
pub struct Exports {
    pub lock_name: ComponentExportIndex,
    pub admit: ComponentExportIndex,
    pub batch: ComponentExportIndex,
    pub stream: ComponentExportIndex,
}

/// One instance's functions, type-checked, plus the lock names interned in it.
pub struct ComponentCalls {
    /// `lock-name` handles owned by the store, by name.
    locks: LockMap<ResourceAny>,
    lock_name: Func,
    admit: Func,
    batch: Func,
    stream: Func,
}

impl ComponentCalls {
    /// Type-checks each signature once; calls then use unchecked views with
    /// the call's lifetimes.
    pub fn new(store: &mut Store<StoreState>, instance: &Instance, e: &Exports) -> wasmtime::Result<ComponentCalls> {
        let lock_name = instance.get_typed_func::<LockParams<'static>, LockResults>(&mut *store, e.lock_name)?;
        let admit = instance.get_typed_func::<AdmitParams, AdmitResults>(&mut *store, e.admit)?;
        let batch = instance.get_typed_func::<BatchParams<'static>, BatchResults>(&mut *store, e.batch)?;
        let stream = instance.get_typed_func::<StreamParams<'static>, StreamResults>(&mut *store, e.stream)?;
        Ok(ComponentCalls {
            locks: LockMap::default(),
            lock_name: *lock_name.func(),
            admit: *admit.func(),
            batch: *batch.func(),
            stream: *stream.func(),
        })
    }

    /// Lock names interned so far.
    pub fn interned(&self) -> usize {
        self.locks.len()
    }

    /// The fence argument, sharing the presented lock's handle when the names are equal.
    fn fence(
        &mut self,
        store: &mut Store<StoreState>,
        f: Option<&Fence>,
        presented: (&str, ResourceAny),
    ) -> wasmtime::Result<Option<FenceArg>> {
        let Some(f) = f else { return Ok(None) };
        let lock = self.fence_lock(store, f, presented)?;
        Ok(Some(FenceArg { lock, high_water: f.high_water, sequence: f.sequence }))
    }

    pub fn admit(
        &mut self,
        store: &mut Store<StoreState>,
        current: Option<&Fence>,
        presented: &Sequencer,
        policy: Policy,
    ) -> wasmtime::Result<Decision> {
        let lock = self.lock(store, &presented.lock)?;
        let current = self.fence(store, current, (&presented.lock, lock))?;
        let presented = SequencerArg { lock, token: presented.token, sequence: presented.sequence };
        // SAFETY: `admit` was type-checked against `AdmitParams`/`AdmitResults` in `new`.
        let f: TypedFunc<AdmitParams, AdmitResults> = unsafe { TypedFunc::new_unchecked(self.admit) };
        let (r,) = f.call(&mut *store, (current, presented, policy.into()))?;
        Ok(abi::decision(r))
    }

    /// Verdict codes for `writes`, and the fence after them.
    pub fn admit_batch(
        &mut self,
        store: &mut Store<StoreState>,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> wasmtime::Result<(Vec<u8>, Option<FenceState>)> {
        let args: Vec<abi::BatchWriteArg> = writes.iter().map(Into::into).collect();
        let handle = self.lock(store, lock)?;
        let current = self.fence(store, current, (lock, handle))?;
        // SAFETY: type-checked against `BatchParams`/`BatchResults` in `new`.
        let f: TypedFunc<BatchParams<'_>, BatchResults> = unsafe { TypedFunc::new_unchecked(self.batch) };
        let (r,) = f.call(&mut *store, (current, handle, &args, policy.into()))?;
        let fence = r.fence.map(|f| FenceState { high_water: f.high_water, sequence: f.sequence });
        Ok((r.verdicts, fence))
    }

    /// Verdict codes for `tokens`, and the high-water mark after them.
    pub fn admit_stream(
        &mut self,
        store: &mut Store<StoreState>,
        high_water: u64,
        tokens: &[u64],
        policy: Policy,
    ) -> wasmtime::Result<(Vec<u8>, u64)> {
        // SAFETY: type-checked against `StreamParams`/`StreamResults` in `new`.
        let f: TypedFunc<StreamParams<'_>, StreamResults> = unsafe { TypedFunc::new_unchecked(self.stream) };
        let (r,) = f.call(&mut *store, (high_water, tokens, policy.into()))?;
        Ok((r.verdicts, r.high_water))
    }
}
