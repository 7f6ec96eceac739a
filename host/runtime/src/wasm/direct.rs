//! The direct call path: the component's own core module, called with the
//! canonical ABI lowered and lifted here instead of by wasmtime's component
//! runtime (as the Python and Node packages do).
//!
//! Why: a component-model call pays per-call bookkeeping (export and funcref
//! lookups, resource scopes) that a core call does not; `docs/guard.md` has
//! the measured floors of both. The rules run in the same sandbox either way:
//! same engine, same store, the same epoch deadline and memory limit, the
//! same fail-closed handling.
//!
//! Shape: the path is used only for a component with exactly one core module
//! that exports `memory`, `cabi_realloc` and the `fencing:guard/check`
//! functions with the flat signatures the canonical ABI gives `wit/guard.wit`,
//! and imports nothing but the `lock-name` resource intrinsics. That is what
//! `wit-component` emits for a guest written against the WIT (checked by
//! [`find`]); any other component runs on the component path.
//!
//! ABI invariants relied on (canonical ABI; layouts in [`layout`]):
//! - a `borrow<lock-name>` passed to the component that defines the resource
//!   is lowered as its rep, which `[resource-new]` received from the guest;
//! - a single decision takes `admit-code`, whose parameters and result are
//!   all flat scalars: the verdict code comes back in a register (the guard
//!   refuses a code impossible for the inputs and expands it);
//! - results wider than one flat value come back through a pointer into guest
//!   memory; the host checks its bounds and alignment and lifts it with the
//!   canonical ABI's validation (an unknown discriminant, a list out of
//!   bounds) so a broken plugin fails the call closed, never misleads it;
//! - lists passed in are allocated by the guest's `cabi_realloc` and owned by
//!   the guest afterwards; lists passed out are freed by `cabi_post_*`.

use super::abi::{self, PolicyArg, u64_at};
use super::base::{
    Batch, BatchCodes, Interning, LockMap, PathCalls, Result, Signed, StoreState, StreamCodes, WorkerStore,
};
use super::base::{contract, impossible};
use crate::proof::VerifierKey;
use crate::{Fence, Policy, Sequencer};
use std::ops::Range;
use wasmtime::{Caller, Engine, ExternType, InstancePre, Linker, Memory, Module, TypedFunc, ValType};

type AdmitFlat = (i32, i32, i64, i32, i64, i32, i64, i32, i64, i32);
type BatchFlat = (i32, i32, i64, i32, i64, i32, i32, i32, i32);
type StreamFlat = (i64, i32, i32, i32);
type SignedFlat = (i32, i32, i64, i32, i64, i32, i64, i32, i64, i32, i32, i32);

/// Byte layouts of the types that cross through memory (canonical ABI).
mod layout {
    /// `batch-outcome`: size 40, align 8.
    pub const BATCH: (usize, usize) = (40, 8);
    /// `stream-outcome`: size 16, align 8.
    pub const STREAM: (usize, usize) = (16, 8);
    /// `batch-write`: size 24, align 8.
    pub const BATCH_WRITE: (usize, usize) = (24, 8);
    /// `verifier-key`: size 16, align 4 (id, algorithm, material pointer and length).
    pub const VERIFIER_KEY: (usize, usize) = (16, 4);
    /// `result<_, key-error>`: size 12, align 4.
    pub const KEY_RESULT: (usize, usize) = (12, 4);
}

/// Live handles a store may create through `[resource-new]`: a guest that
/// creates more is broken (the host interns at most a few thousand names).
const MAX_HANDLES: usize = 1 << 16;

/// Finds, in component `bytes`, the byte range of the one core module that
/// implements interface `iface` (e.g. `fencing:guard/check@0.3.0`).
pub fn find(bytes: &[u8], iface: &str) -> Option<Range<usize>> {
    let admit = format!("{iface}#admit");
    let mut found = None;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let Ok(wasmparser::Payload::ModuleSection { unchecked_range, .. }) = payload else { continue };
        let module = bytes.get(unchecked_range.clone())?;
        if exports_name(module, &admit) {
            if found.is_some() {
                return None; // Two candidates: ambiguous, leave it to the component path.
            }
            found = Some(unchecked_range);
        }
    }
    found
}

fn exports_name(module: &[u8], name: &str) -> bool {
    wasmparser::Parser::new(0).parse_all(module).any(|p| match p {
        Ok(wasmparser::Payload::ExportSection(s)) => s.into_iter().any(|e| e.is_ok_and(|e| e.name == name)),
        _ => false,
    })
}

/// A core module checked to have the direct-call shape, ready to instantiate.
#[derive(Clone)]
pub struct DirectPre {
    pre: InstancePre<StoreState>,
    iface: String,
}

impl DirectPre {
    /// Checks `module`'s imports and exports against the shape and links the
    /// resource intrinsics. `Err` says why the shape does not match.
    pub fn new(engine: &Engine, module: &Module, iface: &str) -> std::result::Result<DirectPre, String> {
        use ValType::{I32, I64};
        let intrinsics = format!("[export]{iface}");
        for import in module.imports() {
            let ok = import.module() == intrinsics
                && matches!(
                    import.name(),
                    "[resource-new]lock-name" | "[resource-drop]lock-name" | "[resource-rep]lock-name"
                );
            if !ok {
                return Err(format!("imports {}::{}", import.module(), import.name()));
            }
        }
        let func =
            |name: &str, params: &[ValType], results: &[ValType], required: bool| -> std::result::Result<(), String> {
                match module.get_export(name) {
                    Some(ExternType::Func(f)) => {
                        let same = |a: &mut dyn ExactSizeIterator<Item = ValType>, b: &[ValType]| {
                            a.len() == b.len() && a.zip(b).all(|(x, y)| ValType::eq(&x, y))
                        };
                        if same(&mut f.params(), params) && same(&mut f.results(), results) {
                            Ok(())
                        } else {
                            Err(format!("`{name}` has type {f:?}"))
                        }
                    }
                    None if !required => Ok(()),
                    _ => Err(format!("no function `{name}`")),
                }
            };
        if !matches!(module.get_export("memory"), Some(ExternType::Memory(_))) {
            return Err("no exported memory".into());
        }
        func("cabi_realloc", &[I32, I32, I32, I32], &[I32], true)?;
        func(&format!("{iface}#[constructor]lock-name"), &[I32, I32], &[I32], true)?;
        func(&format!("{iface}#admit-code"), &[I32, I32, I64, I32, I64, I32, I64, I32, I64, I32], &[I32], true)?;
        func(&format!("{iface}#admit-batch"), &[I32, I32, I64, I32, I64, I32, I32, I32, I32], &[I32], true)?;
        func(&format!("{iface}#admit-stream"), &[I64, I32, I32, I32], &[I32], true)?;
        func(&format!("{iface}#set-keys"), &[I32, I32], &[I32], true)?;
        let signed = [I32, I32, I64, I32, I64, I32, I64, I32, I64, I32, I32, I32];
        func(&format!("{iface}#admit-signed"), &signed, &[I32], true)?;
        func(&format!("cabi_post_{iface}#set-keys"), &[I32], &[], false)?;
        func(&format!("cabi_post_{iface}#admit-batch"), &[I32], &[], false)?;
        func(&format!("cabi_post_{iface}#admit-stream"), &[I32], &[], false)?;

        let mut linker = Linker::<StoreState>::new(engine);
        let link = |r: wasmtime::Result<&mut Linker<StoreState>>| r.map(drop).map_err(|e| format!("{e:#}"));
        link(linker.func_wrap(&intrinsics, "[resource-new]lock-name", |mut c: Caller<'_, StoreState>, rep: i32| {
            let handles = &mut c.data_mut().handles;
            if handles.len() >= MAX_HANDLES {
                return Err(wasmtime::Error::msg("plugin created too many lock-name handles"));
            }
            handles.push(Some(rep as u32));
            Ok(handles.len() as i32)
        }))?;
        link(linker.func_wrap(&intrinsics, "[resource-rep]lock-name", |c: Caller<'_, StoreState>, h: i32| {
            c.data().rep(h).map(|r| r as i32)
        }))?;
        // Dropping an own handle would run the destructor; the rules never
        // drop one (the host owns every handle), so the rep is simply released.
        link(linker.func_wrap(&intrinsics, "[resource-drop]lock-name", |mut c: Caller<'_, StoreState>, h: i32| {
            c.data().rep(h)?;
            c.data_mut().handles[h as usize - 1] = None;
            Ok(())
        }))?;
        let pre = linker.instantiate_pre(module).map_err(|e| format!("{e:#}"))?;
        Ok(DirectPre { pre, iface: iface.to_owned() })
    }
}

impl StoreState {
    /// The rep behind a live `lock-name` handle of this store.
    fn rep(&self, handle: i32) -> Result<u32> {
        (handle as usize)
            .checked_sub(1)
            .and_then(|i| self.handles.get(i).copied().flatten())
            .ok_or_else(|| wasmtime::Error::msg(format!("unknown lock-name handle {handle}")))
    }
}

/// One instance's entry points, plus the lock names interned in it.
pub struct DirectCalls {
    memory: Memory,
    realloc: TypedFunc<(i32, i32, i32, i32), i32>,
    new_lock: TypedFunc<(i32, i32), i32>,
    admit_code: TypedFunc<AdmitFlat, i32>,
    batch: TypedFunc<BatchFlat, i32>,
    post_batch: Option<TypedFunc<i32, ()>>,
    stream: TypedFunc<StreamFlat, i32>,
    post_stream: Option<TypedFunc<i32, ()>>,
    set_keys: TypedFunc<(i32, i32), i32>,
    post_set_keys: Option<TypedFunc<i32, ()>>,
    signed: TypedFunc<SignedFlat, i32>,
    /// Lock name to the rep of its `lock-name`, owned by this instance.
    locks: LockMap<u32>,
}

impl DirectCalls {
    /// Instantiates `pre` in `store`.
    pub fn instantiate(store: &mut WorkerStore, pre: &DirectPre) -> Result<DirectCalls> {
        let i = pre.pre.instantiate(&mut *store)?;
        let iface = &pre.iface;
        let memory = i.get_memory(&mut *store, "memory").ok_or_else(|| wasmtime::Error::msg("no memory"))?;
        Ok(DirectCalls {
            memory,
            realloc: i.get_typed_func(&mut *store, "cabi_realloc")?,
            new_lock: i.get_typed_func(&mut *store, &format!("{iface}#[constructor]lock-name"))?,
            admit_code: i.get_typed_func(&mut *store, &format!("{iface}#admit-code"))?,
            batch: i.get_typed_func(&mut *store, &format!("{iface}#admit-batch"))?,
            post_batch: i.get_typed_func(&mut *store, &format!("cabi_post_{iface}#admit-batch")).ok(),
            stream: i.get_typed_func(&mut *store, &format!("{iface}#admit-stream"))?,
            post_stream: i.get_typed_func(&mut *store, &format!("cabi_post_{iface}#admit-stream")).ok(),
            set_keys: i.get_typed_func(&mut *store, &format!("{iface}#set-keys"))?,
            post_set_keys: i.get_typed_func(&mut *store, &format!("cabi_post_{iface}#set-keys")).ok(),
            signed: i.get_typed_func(&mut *store, &format!("{iface}#admit-signed"))?,
            locks: LockMap::default(),
        })
    }

    /// `cabi_realloc(0, 0, align, size)`, checked like the canonical ABI checks it.
    fn alloc(&self, store: &mut WorkerStore, size: usize, align: usize) -> Result<usize> {
        let size32 =
            i32::try_from(size).map_err(|_| contract(format_args!("{size} bytes do not fit a 32-bit memory")))?;
        let ptr = self.realloc.call(&mut *store, (0, 0, align as i32, size32))? as u32 as usize;
        let len = self.memory.data_size(&*store);
        if !ptr.is_multiple_of(align) || ptr.checked_add(size).is_none_or(|end| end > len) {
            return Err(contract(format_args!("cabi_realloc returned {ptr:#x} for {size} bytes")));
        }
        Ok(ptr)
    }

    /// Copies `bytes` into guest memory allocated for them; their address.
    fn lower_bytes(&self, store: &mut WorkerStore, bytes: &[u8]) -> Result<usize> {
        let ptr = self.alloc(store, bytes.len(), 1)?;
        self.memory.data_mut(&mut *store)[ptr..ptr + bytes.len()].copy_from_slice(bytes);
        Ok(ptr)
    }
}

impl PathCalls for DirectCalls {
    #[inline]
    fn interned(&self) -> usize {
        self.locks.len()
    }

    #[inline]
    fn admit(&mut self, s: &mut WorkerStore, f: Option<&Fence>, p: &Sequencer, policy: Policy) -> Result<u8> {
        let (lock, rep) = self.handles(s, &p.lock, f)?;
        let [fd, fl, fh, fs, fv] = flat_fence(f, rep);
        let (ps, pv) = option(p.sequence);
        let args =
            (fd as i32, fl as i32, fh, fs as i32, fv, lock as i32, p.token as i64, ps as i32, pv, policy_arg(policy));
        let c = self.admit_code.call(&mut *s, args)?;
        u8::try_from(c).map_err(|_| impossible(c))
    }

    fn admit_batch(&mut self, s: &mut WorkerStore, f: Option<&Fence>, b: Batch<'_>, p: Policy) -> Result<BatchCodes> {
        let (rep, fence_rep) = self.handles(s, b.lock, f)?;
        let [fd, fl, fh, fs, fv] = flat_fence(f, fence_rep);
        let (size, align) = layout::BATCH_WRITE;
        let bytes = b.writes.len().checked_mul(size).ok_or_else(|| contract("batch too large"))?;
        let ptr = self.alloc(s, bytes, align)?;
        let dst = &mut self.memory.data_mut(&mut *s)[ptr..ptr + bytes];
        for (d, w) in dst.chunks_exact_mut(size).zip(b.writes) {
            let (some, v) = option(w.sequence);
            d[0..8].copy_from_slice(&w.token.to_le_bytes());
            d[8..16].copy_from_slice(&(some as u64).to_le_bytes());
            d[16..24].copy_from_slice(&(v as u64).to_le_bytes());
        }
        let n = b.writes.len() as i32;
        let ret = self
            .batch
            .call(&mut *s, (fd as i32, fl as i32, fh, fs as i32, fv, rep as i32, ptr as i32, n, policy_arg(p)))?;
        let mem = self.memory.data(&*s);
        let record = view(mem, ret, layout::BATCH)?;
        let codes = list_u8(mem, record)?.to_vec();
        let fence = abi::fence_state_at(record, 8)?;
        if let Some(post) = &self.post_batch {
            post.call(&mut *s, ret)?;
        }
        Ok((codes, fence))
    }

    fn set_keys(&mut self, s: &mut WorkerStore, keys: &[VerifierKey]) -> Result<()> {
        let materials: Vec<usize> = keys.iter().map(|k| self.lower_bytes(s, &k.material)).collect::<Result<_>>()?;
        let (size, align) = layout::VERIFIER_KEY;
        let ptr = self.alloc(s, keys.len() * size, align)?;
        let dst = &mut self.memory.data_mut(&mut *s)[ptr..ptr + keys.len() * size];
        for ((d, k), material) in dst.chunks_exact_mut(size).zip(keys).zip(materials) {
            d.fill(0);
            d[0..4].copy_from_slice(&k.id.to_le_bytes());
            d[4] = abi::KeyAlgorithmArg::from(k.algorithm) as u8;
            d[8..12].copy_from_slice(&(material as u32).to_le_bytes());
            d[12..16].copy_from_slice(&(k.material.len() as u32).to_le_bytes());
        }
        let ret = self.set_keys.call(&mut *s, (ptr as i32, keys.len() as i32))?;
        let result = view(self.memory.data(&*s), ret, layout::KEY_RESULT)?;
        let (disc, case) = (result[0], result[4]);
        if let Some(post) = &self.post_set_keys {
            post.call(&mut *s, ret)?;
        }
        match disc {
            0 => Ok(()),
            1 => Err(contract(format_args!("set-keys refused checked keys (key-error case {case})"))),
            d => Err(contract(format_args!("result discriminant {d}"))),
        }
    }

    fn admit_signed(&mut self, s: &mut WorkerStore, f: Option<&Fence>, w: Signed<'_>, p: Policy) -> Result<u8> {
        let (lock, rep) = self.handles(s, &w.presented.lock, f)?;
        let proof = self.lower_bytes(s, w.proof)?;
        let [fd, fl, fh, fs, fv] = flat_fence(f, rep);
        let (ps, pv) = option(w.presented.sequence);
        let token = w.presented.token as i64;
        let (proof, len) = (proof as i32, w.proof.len() as i32);
        let args =
            (fd as i32, fl as i32, fh, fs as i32, fv, lock as i32, token, ps as i32, pv, proof, len, policy_arg(p));
        let c = self.signed.call(&mut *s, args)?;
        u8::try_from(c).map_err(|_| impossible(c))
    }

    fn admit_stream(&mut self, s: &mut WorkerStore, high_water: u64, t: &[u64], p: Policy) -> Result<StreamCodes> {
        let bytes = t.len().checked_mul(8).ok_or_else(|| contract("stream too large"))?;
        let ptr = self.alloc(s, bytes, 8)?;
        let dst = &mut self.memory.data_mut(&mut *s)[ptr..ptr + bytes];
        for (d, token) in dst.chunks_exact_mut(8).zip(t) {
            d.copy_from_slice(&token.to_le_bytes());
        }
        let ret = self.stream.call(&mut *s, (high_water as i64, ptr as i32, t.len() as i32, policy_arg(p)))?;
        let mem = self.memory.data(&*s);
        let record = view(mem, ret, layout::STREAM)?;
        let codes = list_u8(mem, record)?.to_vec();
        let high_water = u64_at(record, 8);
        if let Some(post) = &self.post_stream {
            post.call(&mut *s, ret)?;
        }
        Ok((codes, high_water))
    }
}

impl Interning for DirectCalls {
    type Handle = u32;

    fn interned_locks(&mut self) -> &mut LockMap<u32> {
        &mut self.locks
    }

    /// Lowers `name` into guest memory and calls the constructor; the handle
    /// it returns names the rep the host keeps.
    fn construct(&mut self, store: &mut WorkerStore, name: &str) -> Result<u32> {
        let ptr = self.alloc(store, name.len(), 1)?;
        self.memory.data_mut(&mut *store)[ptr..ptr + name.len()].copy_from_slice(name.as_bytes());
        let handle = self.new_lock.call(&mut *store, (ptr as i32, name.len() as i32))?;
        store.data().rep(handle)
    }
}

/// The `size` bytes at `ptr`, which must be aligned to `align` and in bounds.
fn view(mem: &[u8], ptr: i32, (size, align): (usize, usize)) -> Result<&[u8]> {
    let at = ptr as u32 as usize;
    if !at.is_multiple_of(align) {
        return Err(contract(format_args!("misaligned return pointer {at:#x}")));
    }
    mem.get(at..at + size).ok_or_else(|| contract(format_args!("return pointer {at:#x} out of bounds")))
}

/// The `list<u8>` whose (pointer, length) pair opens `record`.
fn list_u8<'m>(mem: &'m [u8], record: &[u8]) -> Result<&'m [u8]> {
    let ptr = u32::from_le_bytes(record[0..4].try_into().expect("4 bytes")) as usize;
    let len = u32::from_le_bytes(record[4..8].try_into().expect("4 bytes")) as usize;
    mem.get(ptr..ptr + len).ok_or_else(|| contract(format_args!("verdict list {ptr:#x}+{len} out of bounds")))
}

/// The flat `option<fence>`: discriminant, lock rep, high-water, sequence discriminant and value.
fn flat_fence(f: Option<&Fence>, rep: Option<u32>) -> [i64; 5] {
    match f.zip(rep) {
        None => [0; 5],
        Some((f, rep)) => {
            let (some, v) = option(f.sequence);
            [1, rep as i64, f.high_water as i64, some, v]
        }
    }
}

/// The flat (discriminant, value) of an `option<u64>`.
fn option(v: Option<u64>) -> (i64, i64) {
    v.map_or((0, 0), |v| (1, v as i64))
}

/// The flat form of the `policy` enum: its case index, which is what
/// `abi::PolicyArg`'s discriminants are (the one WIT conversion of a policy).
fn policy_arg(p: Policy) -> i32 {
    PolicyArg::from(p) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_area_must_be_aligned_and_in_bounds() {
        let mem = vec![0u8; 64];
        assert!(view(&mem, 8, layout::BATCH).is_ok());
        assert!(view(&mem, 4, layout::BATCH).unwrap_err().to_string().contains("misaligned"));
        assert!(view(&mem, 32, layout::BATCH).unwrap_err().to_string().contains("out of bounds"));
        assert!(view(&mem, -8, layout::STREAM).unwrap_err().to_string().contains("out of bounds"));
    }

    #[test]
    fn lists_must_lie_in_memory() {
        let mut mem = vec![7u8; 32];
        mem[0..4].copy_from_slice(&16u32.to_le_bytes());
        mem[4..8].copy_from_slice(&16u32.to_le_bytes());
        let record = mem[0..8].to_vec();
        assert_eq!(list_u8(&mem, &record).unwrap(), &[7u8; 16][..]);
        let mut long = record.clone();
        long[4..8].copy_from_slice(&17u32.to_le_bytes());
        assert!(list_u8(&mem, &long).is_err());
        let mut far = record;
        far[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(list_u8(&mem, &far).is_err());
    }

    #[test]
    fn options_lift_like_the_canonical_abi() {
        let mut b = [0u8; 16];
        assert_eq!(abi::option_at(&b, 0).unwrap(), None);
        b[0] = 1;
        b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(abi::option_at(&b, 0).unwrap(), Some(u64::MAX));
        b[0] = 2;
        assert!(abi::option_at(&b, 0).unwrap_err().to_string().contains("discriminant 2"));
        assert_eq!(option(None), (0, 0));
        assert_eq!(option(Some(u64::MAX)), (1, -1));
    }

    #[test]
    fn only_the_module_exporting_the_interface_is_found() {
        let iface = "fencing:guard/check@0.3.0";
        let component = wat::parse_str(
            r#"(component
                (core module $shim (func (export "other")))
                (core module $main (func (export "fencing:guard/check@0.3.0#admit"))))"#,
        )
        .unwrap();
        let range = find(&component, iface).expect("one module implements the interface");
        assert!(exports_name(&component[range], &format!("{iface}#admit")));
        assert_eq!(find(&component, "fencing:guard/check@0.4.0"), None);
        let two = wat::parse_str(
            r#"(component
                (core module (func (export "fencing:guard/check@0.3.0#admit")))
                (core module (func (export "fencing:guard/check@0.3.0#admit"))))"#,
        )
        .unwrap();
        assert_eq!(find(&two, iface), None, "two candidates are ambiguous");
    }

    /// The rules compare two handles by their names' bytes: a host that
    /// passes distinct handles of one name (none of ours does, each interns)
    /// gets the same answer as with one handle.
    #[test]
    fn distinct_handles_of_one_name_are_one_lock() {
        use crate::wasm::{WasmLimits, limits};
        use fencing_rules::rules::code;
        let limits = WasmLimits::default();
        let engine = limits::engine(&limits, Default::default()).unwrap();
        let plugin = crate::Plugin::embedded(&engine, None).unwrap();
        let mut store = limits.store(&engine);
        let mut calls = DirectCalls::instantiate(&mut store, plugin.direct.as_ref().unwrap()).unwrap();
        let orders = calls.construct(&mut store, "storage:orders").unwrap();
        let again = calls.construct(&mut store, "storage:orders").unwrap();
        let other = calls.construct(&mut store, "storage:orderz").unwrap();
        assert_ne!(orders, again, "two constructions, two handles");
        let mut decide = |fence_lock: u32, lock: u32| {
            // A fence at 5 under `fence_lock`, token 6 presented under `lock`.
            let args = (1, fence_lock as i32, 5, 0, 0, lock as i32, 6, 0, 0, policy_arg(Policy::NonDecreasing));
            calls.admit_code.call(&mut store, args).unwrap() as u8
        };
        assert_eq!(decide(orders, orders), code::ADMITTED_NEW_TERM);
        assert_eq!(decide(orders, again), code::ADMITTED_NEW_TERM);
        assert_eq!(decide(again, orders), code::ADMITTED_NEW_TERM);
        assert_eq!(decide(orders, other), code::WRONG_LOCK);
        assert_eq!(decide(other, again), code::WRONG_LOCK);
    }

    #[test]
    fn shape_mismatches_are_named() {
        let engine = Engine::default();
        let iface = "fencing:guard/check@0.3.0";
        let module = |wat: &str| Module::new(&engine, wat).unwrap();
        let err = |m: &Module| DirectPre::new(&engine, m, iface).err().expect("shape refused");
        let wasi = module(r#"(module (import "wasi:cli/environment@0.2.0" "get-arguments" (func)))"#);
        assert!(err(&wasi).contains("imports wasi:cli/environment@0.2.0::get-arguments"));
        assert!(err(&module("(module)")).contains("no exported memory"));
        let no_realloc = module(r#"(module (memory (export "memory") 1))"#);
        assert!(err(&no_realloc).contains("no function `cabi_realloc`"));
        let wrong = module(
            r#"(module (memory (export "memory") 1)
                (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) i32.const 0)
                (func (export "fencing:guard/check@0.3.0#[constructor]lock-name") (param i32 i64) (result i32) i32.const 0))"#,
        );
        assert!(err(&wrong).contains("`fencing:guard/check@0.3.0#[constructor]lock-name` has type"));
    }
}
