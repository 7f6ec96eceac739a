//! The component path: calls through wasmtime's component-model runtime,
//! which lowers and lifts every value itself. It runs any component that
//! passes the compatibility check; the direct path (`direct.rs`) is a faster
//! route for components of the usual shape.

use super::abi::{
    self, AdmitParams, AdmitResults, BatchParams, BatchResults, FenceArg, LockParams, LockResults, SequencerArg,
    SetKeysParams, SetKeysResults, SignedParams, SignedResults, StreamParams, StreamResults,
};
use super::base::contract;
use super::base::{Batch, BatchCodes, Interning, LockMap, PathCalls, Result, Signed, StreamCodes, WorkerStore};
use crate::proof::VerifierKey;
use crate::{Fence, Policy, Sequencer};
use fencing_rules::rules;
use wasmtime::component::{ComponentExportIndex, Func, Instance, ResourceAny, TypedFunc};

/// The export indices of the functions, resolved once per plugin.
#[derive(Clone, Copy)]
pub(crate) struct Exports {
    pub lock_name: ComponentExportIndex,
    pub admit: ComponentExportIndex,
    pub batch: ComponentExportIndex,
    pub stream: ComponentExportIndex,
    pub set_keys: ComponentExportIndex,
    pub signed: ComponentExportIndex,
}

/// One instance's functions, type-checked, plus the lock names interned in it.
pub(crate) struct ComponentCalls {
    /// `lock-name` handles owned by the store, by name.
    locks: LockMap<ResourceAny>,
    lock_name: Func,
    admit: Func,
    batch: Func,
    stream: Func,
    set_keys: Func,
    signed: Func,
}

impl ComponentCalls {
    /// Type-checks each signature once; calls then use unchecked views with
    /// the call's lifetimes.
    pub fn new(store: &mut WorkerStore, instance: &Instance, e: &Exports) -> Result<ComponentCalls> {
        let lock_name = instance.get_typed_func::<LockParams<'static>, LockResults>(&mut *store, e.lock_name)?;
        let admit = instance.get_typed_func::<AdmitParams, AdmitResults>(&mut *store, e.admit)?;
        let batch = instance.get_typed_func::<BatchParams<'static>, BatchResults>(&mut *store, e.batch)?;
        let stream = instance.get_typed_func::<StreamParams<'static>, StreamResults>(&mut *store, e.stream)?;
        let set_keys = instance.get_typed_func::<SetKeysParams<'static>, SetKeysResults>(&mut *store, e.set_keys)?;
        let signed = instance.get_typed_func::<SignedParams<'static>, SignedResults>(&mut *store, e.signed)?;
        Ok(ComponentCalls {
            locks: LockMap::default(),
            lock_name: *lock_name.func(),
            admit: *admit.func(),
            batch: *batch.func(),
            stream: *stream.func(),
            set_keys: *set_keys.func(),
            signed: *signed.func(),
        })
    }
}

/// The fence argument: `f`'s numbers with its lock's handle.
fn fence_arg(f: Option<&Fence>, lock: Option<ResourceAny>) -> Option<FenceArg> {
    f.zip(lock).map(|(f, lock)| FenceArg { lock, high_water: f.high_water, sequence: f.sequence })
}

impl Interning for ComponentCalls {
    type Handle = ResourceAny;

    fn interned_locks(&mut self) -> &mut LockMap<ResourceAny> {
        &mut self.locks
    }

    fn construct(&mut self, store: &mut WorkerStore, name: &str) -> Result<ResourceAny> {
        // SAFETY: `lock_name` was type-checked against `LockParams`/`LockResults` in `new`.
        let f: TypedFunc<LockParams<'_>, LockResults> = unsafe { TypedFunc::new_unchecked(self.lock_name) };
        let (handle,) = f.call(&mut *store, (name,))?;
        Ok(handle)
    }
}

impl PathCalls for ComponentCalls {
    fn interned(&self) -> usize {
        self.locks.len()
    }

    fn admit(&mut self, s: &mut WorkerStore, f: Option<&Fence>, p: &Sequencer, policy: Policy) -> Result<u8> {
        let (lock, fence_lock) = self.handles(s, &p.lock, f)?;
        let current = fence_arg(f, fence_lock);
        let presented = SequencerArg { lock, token: p.token, sequence: p.sequence };
        // SAFETY: `admit` was type-checked against `AdmitParams`/`AdmitResults` in `new`.
        let call: TypedFunc<AdmitParams, AdmitResults> = unsafe { TypedFunc::new_unchecked(self.admit) };
        let (r,) = call.call(&mut *s, (current, presented, policy.into()))?;
        // The guard rebuilds the evidence from the code, so the component's
        // own evidence must be exactly that.
        let decision = abi::decision(r);
        let c = rules::code_of(&decision);
        if rules::expand(f.map(Fence::state), p.write(), c).as_ref() != Some(&decision) {
            return Err(contract(format_args!("`admit` answered {decision:?}, whose evidence is not its inputs'")));
        }
        Ok(c)
    }

    fn admit_batch(&mut self, s: &mut WorkerStore, f: Option<&Fence>, b: Batch<'_>, p: Policy) -> Result<BatchCodes> {
        let args: Vec<abi::BatchWriteArg> = b.writes.iter().map(Into::into).collect();
        let (handle, fence_lock) = self.handles(s, b.lock, f)?;
        let current = fence_arg(f, fence_lock);
        // SAFETY: type-checked against `BatchParams`/`BatchResults` in `new`.
        let call: TypedFunc<BatchParams<'_>, BatchResults> = unsafe { TypedFunc::new_unchecked(self.batch) };
        let (r,) = call.call(&mut *s, (current, handle, &args, p.into()))?;
        Ok((r.verdicts, r.fence.map(Into::into)))
    }

    fn set_keys(&mut self, s: &mut WorkerStore, keys: &[VerifierKey]) -> Result<()> {
        let args: Vec<abi::VerifierKeyArg> = keys.iter().map(Into::into).collect();
        // SAFETY: type-checked against `SetKeysParams`/`SetKeysResults` in `new`.
        let call: TypedFunc<SetKeysParams<'_>, SetKeysResults> = unsafe { TypedFunc::new_unchecked(self.set_keys) };
        let (r,) = call.call(&mut *s, (&args,))?;
        r.map_err(|e| contract(format_args!("set-keys refused checked keys: {}", crate::proof::KeyError::from(e))))
    }

    fn admit_signed(&mut self, s: &mut WorkerStore, f: Option<&Fence>, w: Signed<'_>, p: Policy) -> Result<u8> {
        let (lock, fence_lock) = self.handles(s, &w.presented.lock, f)?;
        let current = fence_arg(f, fence_lock);
        let presented = SequencerArg { lock, token: w.presented.token, sequence: w.presented.sequence };
        // SAFETY: type-checked against `SignedParams`/`SignedResults` in `new`.
        let call: TypedFunc<SignedParams<'_>, SignedResults> = unsafe { TypedFunc::new_unchecked(self.signed) };
        let (code,) = call.call(&mut *s, (current, presented, w.proof, p.into()))?;
        Ok(code as u8)
    }

    fn admit_stream(&mut self, s: &mut WorkerStore, high_water: u64, t: &[u64], p: Policy) -> Result<StreamCodes> {
        // SAFETY: type-checked against `StreamParams`/`StreamResults` in `new`.
        let call: TypedFunc<StreamParams<'_>, StreamResults> = unsafe { TypedFunc::new_unchecked(self.stream) };
        let (r,) = call.call(&mut *s, (high_water, t, p.into()))?;
        Ok((r.verdicts, r.high_water))
    }
}
