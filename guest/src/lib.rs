//! The fencing-token admission rules, written once.
//!
//! Compiled natively this crate is the library a host links as its native
//! check. Compiled for `wasm32-wasip2` it is the `fencing:guard@0.3.0`
//! component: `#![no_std]`, importing nothing, so any component host can run
//! it without providing WASI.
//!
//! # Layout
//! - [`rules`]: the pure admission rules (`admit`, `admit_batch`, `admit_stream`)
//!   and their types, the one definition every host uses (with the `serde`
//!   feature, also their JSON form). Every host, native or Wasm, decides with
//!   this code.
//! - [`accept`] (native only): what a host accepts around the rules: names,
//!   policy spellings, tokens as text and as signed 64-bit, proofs as hex;
//!   one pure function each, with the shared argument vectors in
//!   `tests/vectors/arguments/`.
//! - `component` (wasm only): the WIT bindings in a private `mod bindings`
//!   and the exported type; its submodule `exports` (`exports.rs`) holds the
//!   export bodies, the `lock-name` resource and the one place WIT and rule
//!   types convert.
//! - `runtime` (wasm only): the allocator, panic handler, `memcmp`/`bcmp` and
//!   `cabi_realloc` a zero-import component needs.
//! - [`COMPONENT`] (native only): the component this crate builds, as
//!   committed in `fencing_guard.wasm` beside `Cargo.toml`.

#![no_std]

extern crate alloc;

// The rules use only `core` and `alloc`. Natively the crate is also built as a
// `cdylib`, which needs std's allocator and panic runtime; on wasm the
// `runtime` module provides both.
#[cfg(not(target_family = "wasm"))]
extern crate std;

#[cfg(not(target_family = "wasm"))]
pub mod accept;
pub mod proof;
pub mod rules;

#[cfg(target_family = "wasm")]
mod component;

#[cfg(target_family = "wasm")]
mod runtime;

/// The `fencing:guard@0.3.0` component this crate builds for
/// `wasm32-wasip2`: the bytes of `fencing_guard.wasm`, committed beside
/// `Cargo.toml` and packaged with the crate, which every host embeds (the
/// runtime's `plugin::EMBEDDED`, and through it the engines).
///
/// `scripts/build-component` builds them reproducibly (pinned toolchain,
/// `--locked`, paths remapped) and writes the file; CI's
/// `scripts/build-component --check` fails when a fresh build of these
/// sources differs from it. Native builds only: the component does not
/// carry itself.
#[cfg(not(target_family = "wasm"))]
pub static COMPONENT: &[u8] = include_bytes!("../fencing_guard.wasm");

pub use rules::{
    Admission, BatchOutcome, BatchWrite, Fence, FenceState, Policy, Rejection, Sequencer, StreamOutcome, UnknownPolicy,
    Verdict, admit, admit_batch, admit_stream,
};
