//! A deliberately misbehaving `fencing:guard@0.3.0` component for the
//! runtime's fault-handling tests. `admit` and `admit-batch` misbehave by the
//! presented lock name: `loop` spins forever, `trap` executes `unreachable`,
//! `hog` allocates until its memory runs out, and a single decision under
//! `lie` answers `stale-token` (with evidence for it) whatever the token,
//! breaking the contract without failing; every other name gets the real
//! rules, so a test can see the next call succeed. Everything but the
//! misbehaviour is the guest's own code, included by `#[path]`: the rules
//! (`rules.rs`, `proof.rs`), the export bodies and conversions (`exports.rs`) and the
//! runtime shims (`runtime.rs`).

#![no_std]

extern crate alloc;

use alloc::vec::Vec;

/// Misbehaves as the lock name asks; returns for any other name.
fn before_call(lock: &wit::LockNameBorrow<'_>) {
    match exports::name(lock) {
        "loop" => loop {
            core::hint::black_box(());
        },
        "trap" => core::arch::wasm32::unreachable(),
        "hog" => {
            // Reserved, never written: each block grows linear memory by a
            // mebibyte at once, so the memory limit is reached in microseconds,
            // long before the time limit even on a loaded machine.
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let block: Vec<u8> = Vec::with_capacity(1 << 20);
                hoard.push(core::hint::black_box(block));
            }
        }
        _ => {}
    }
}

/// Whether a single decision under `lock` answers `stale-token` against the rules.
fn lies(lock: &wit::LockNameBorrow<'_>) -> bool {
    exports::name(lock) == "lie"
}

#[path = "../../../../guest/src/rules.rs"]
#[allow(dead_code)]
mod rules;

#[path = "../../../../guest/src/proof.rs"]
#[allow(dead_code)]
mod proof;

/// The guest's allocator, panic handler, `memcmp`/`bcmp` and `cabi_realloc`.
#[path = "../../../../guest/src/runtime.rs"]
mod runtime;

/// The guest's export bodies, `lock-name` and WIT conversions, with the misbehaviour above.
#[path = "../../../../guest/src/exports.rs"]
mod exports;

use bindings::exports::fencing::guard::check as wit;

/// The type the bindings export.
struct Component;

mod bindings {
    wit_bindgen::generate!({ path: "../../../wit", world: "guard", generate_all });
}

bindings::export!(Component with_types_in bindings);
