//! A deliberately misbehaving `fencing:guard@0.1.0` component for the host's
//! fault-handling tests. `admit` misbehaves by the presented lock name:
//! `loop` spins forever, `trap` executes `unreachable`, `hog` allocates until
//! its memory runs out; every other name gets the real rules (the same
//! `rules.rs` the guest ships), so a test can see the next call succeed.
//! The export bodies, conversions and runtime shims are the guest's own
//! `exports.rs` and `runtime.rs`.

#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

#[path = "../../../../guest/src/rules.rs"]
#[allow(dead_code)]
mod rules;

/// The guest's allocator, panic handler, `memcmp`/`bcmp` and `cabi_realloc`.
#[path = "../../../../guest/src/runtime.rs"]
mod runtime;

mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "guard",
        generate_all,
    });
}

use bindings::exports::fencing::guard::check as wit;

/// The guest's export bodies and WIT conversions, after the misbehaviour check.
#[path = "../../../../guest/src/exports.rs"]
mod exports;

struct Component;

bindings::export!(Component with_types_in bindings);

/// An interned lock name.
pub struct LockName(String);

impl wit::GuestLockName for LockName {
    fn new(name: String) -> Self {
        LockName(name)
    }
}

/// Misbehaves as the lock name asks; returns for any other name.
fn misbehave(name: &str) {
    match name {
        "loop" => loop {
            core::hint::black_box(());
        },
        "trap" => core::arch::wasm32::unreachable(),
        "hog" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut block = Vec::with_capacity(1 << 20);
                block.resize(1 << 20, 1u8);
                hoard.push(core::hint::black_box(block));
            }
        }
        _ => {}
    }
}

impl wit::Guest for Component {
    type LockName = LockName;

    fn admit(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        policy: wit::Policy,
    ) -> Result<wit::Admission, wit::Rejection> {
        let name = &presented.lock.get::<LockName>().0;
        misbehave(name);
        let same = || current.as_ref().is_some_and(|f| f.lock.get::<LockName>().0 == *name);
        exports::admit(current.as_ref(), same, &presented, policy)
    }

    fn admit_batch(
        current: Option<wit::Fence<'_>>,
        lock: wit::LockNameBorrow<'_>,
        writes: Vec<wit::BatchWrite>,
        policy: wit::Policy,
    ) -> wit::BatchOutcome {
        let name = &lock.get::<LockName>().0;
        misbehave(name);
        let wrong_lock = current.as_ref().is_some_and(|f| f.lock.get::<LockName>().0 != *name);
        exports::admit_batch(current.as_ref(), wrong_lock, writes, policy)
    }

    fn admit_stream(high_water: u64, tokens: Vec<u64>, policy: wit::Policy) -> wit::StreamOutcome {
        exports::admit_stream(high_water, tokens, policy)
    }
}
