//! Run the fencing check inside a storage engine.
//!
//! A lock service hands each holder a fencing token; a storage engine keeps a
//! durable fence per resource (the lock it is bound to, the highest admitted
//! token, the last sequence under it) and must refuse any write whose token is
//! older. This crate is what the engine embeds to make that decision: a
//! [`Guard`] takes the stored [`Fence`] and the presented [`Sequencer`] and
//! answers with an [`Admission`] (the fence to persist, in the same
//! transaction as the write) or a [`Rejection`] carrying its evidence.
//!
//! The rules are written once, in the `fencing-rules` crate, and reach the
//! engine in one of two forms:
//! - [`NativeGuard`]: the rules linked in as Rust.
//! - [`WasmGuard`]: the `fencing:guard@0.3.0` WebAssembly component (embedded
//!   in this crate, or any compatible `.wasm` loaded as a [`Plugin`]) under
//!   wasmtime. Every call is bounded in time, memory and stack; a call that
//!   traps or exceeds a bound returns a [`GuardFailure`] and the engine must
//!   refuse the write (fail closed). A new plugin can be swapped in while
//!   calls are in flight ([`WasmGuard::swap`]).
//!
//! The crate is synchronous and has no I/O of its own beyond reading plugin
//! files and the optional on-disk cache of compiled plugins.
//!
//! ```
//! use fencing_runtime::{Fence, Guard, Policy, Rejection, Sequencer, WasmGuard};
//!
//! let guard = WasmGuard::embedded(None)?;
//! let stored = Fence { lock: "orders".into(), high_water: 34, sequence: None };
//! let paused = Sequencer { lock: "orders".into(), token: 33, sequence: None };
//! let refused = guard.admit(Some(&stored), &paused, Policy::NonDecreasing)?.unwrap_err();
//! assert_eq!(refused, Rejection::StaleToken { presented: 33, high_water: 34 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! With signing on, the lock service attaches a proof to every grant and the
//! engine builds a [`Verifier`] from the lock service's keys once and asks
//! [`Guard::admit_signed`]: a token without a valid proof for its lock is
//! refused whatever its number ([`proof`] has the format, the keys and the
//! [`proof::Signer`] a lock service makes proofs with).
//!
//! # Layout
//! - `guard.rs`: the [`Guard`] trait, [`Decision`], [`SignedDecision`], [`GuardFailure`], [`GuardKind`].
//! - `native.rs`: [`NativeGuard`], the linked rules.
//! - `accept.rs` ([`accept`]): what a host accepts (names, policies, tokens
//!   as text and as signed 64-bit, proofs as hex: `fencing_rules::accept`'s
//!   rules) and [`accept::host_guard`], the guard a host inside another
//!   program's process builds.
//! - `verifier.rs`: [`Verifier`], the keys a guard checks proofs with.
//! - `key_text.rs` ([`key_text`]): keys and proofs as text (hex, `<id> <algorithm> <hex>`), read alike by every host.
//! - `unfenced.rs`: [`UnfencedGuard`], which admits everything (a baseline, never protection).
//! - `wasm/`: the Wasm guard: `mod.rs` ([`WasmGuard`]: workers, fail-closed
//!   calls, hot swap), `limits.rs` ([`WasmLimits`], the engine, the epoch
//!   ticker, [`EngineOptions`]), `base.rs` (what both call paths share: store state, lock-name
//!   interning, the call-path trait), `abi.rs` (the canonical-ABI types and
//!   the one place they convert to rule types), `component.rs` and
//!   `direct.rs` (the two [`CallPath`]s), `calls.rs` (the enum a worker
//!   holds over them).
//! - `wasm/plugin/` ([`plugin`]): loading a component: `mod.rs` ([`Plugin`],
//!   [`PluginInfo`], [`PluginError`], the embedded component), `compat.rs`
//!   (the contract version check), `compile.rs` (compilation and the on-disk
//!   cache, and the core module of the direct path).
//!
//! # Features
//! - `serde`: `Serialize`/`Deserialize` for the rule types, [`GuardKind`],
//!   [`CallPath`] and [`PluginInfo`].

#![deny(missing_docs)]

pub mod accept;
mod guard;
pub mod key_text;
mod native;
mod unfenced;
mod verifier;
mod wasm;

pub use fencing_rules::proof;
pub use fencing_rules::rules::code;
pub use fencing_rules::{
    Admission, BatchOutcome, BatchWrite, Fence, FenceState, Policy, Rejection, Sequencer, StreamOutcome, UnknownPolicy,
    Verdict,
};
pub use guard::{Decision, Guard, GuardFailure, GuardKind, SignedDecision};
pub use native::NativeGuard;
pub use plugin::{Plugin, PluginError, PluginInfo};
pub use unfenced::UnfencedGuard;
pub use verifier::Verifier;
pub use wasm::plugin;
pub use wasm::{CallPath, EngineOptions, WasmGuard, WasmLimits};
