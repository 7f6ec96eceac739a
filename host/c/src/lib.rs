//! `libfencing_guard`: the fencing check for C and C++ storage engines.
//!
//! A C ABI over `fencing-runtime`, built as `libfencing_guard.so` and
//! `libfencing_guard.a`, declared by the hand-written header
//! `include/fencing_guard.h` (the contract a C caller reads: ownership,
//! errors, threads). The guard is the one an in-process host builds
//! ([`fencing_runtime::accept::host_guard`]: the embedded `fencing:guard`
//! component under wasmtime, no signal handlers, no compile threads), and
//! every argument is read by the rules of [`fencing_runtime::accept`], so a
//! name with a NUL byte or bytes that are not UTF-8 is refused by the rule,
//! never truncated. No panic unwinds into the caller: every entry point runs
//! inside [`status::entry`], which turns a panic into `FENCING_ERR_INTERNAL`.
//!
//! docs/c-api.md is the user's guide; `scripts/test-c` runs the C tests and
//! the RocksDB example, `scripts/c-api install` installs the library.
//!
//! # Layout
//! - `status.rs`: statuses, the caller's `fencing_error`, [`status::entry`].
//! - `types.rs`: the header's structs (`#[repr(C)]`, layout pinned) and
//!   decisions as `fencing_verdict`s.
//! - `args.rs`: reading the caller's arguments (names, policies, counts,
//!   proofs), names checked once per thread and value.
//! - `guard.rs`: the opaque guard: open, close, verifier keys.
//! - `decide.rs`: `fencing_admit`, `_signed`, `_batch`, `_stream`.
//! - `accept.rs`: the argument rules as entry points, the ABI version,
//!   `fencing_reason`.

// Every exported function is `unsafe extern "C"` with its contract in the header.
#![allow(clippy::missing_safety_doc)]

pub mod accept;
pub mod args;
pub mod decide;
pub mod guard;
pub mod status;
pub mod types;
