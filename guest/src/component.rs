//! The component export: WIT bindings, the interned `lock-name` resource and
//! how two names compare. The export bodies and the WIT conversions live in
//! `exports.rs`, the runtime shims in `runtime.rs`.
//!
//! Compiled only for `target_family = "wasm"`.

use crate::rules;
use alloc::string::String;
use alloc::vec::Vec;

mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "guard",
        generate_all,
    });
}

use bindings::exports::fencing::guard::check as wit;

/// The export bodies and WIT conversions, shared with the misbehaving test component.
#[path = "exports.rs"]
mod exports;

struct Component;

bindings::export!(Component with_types_in bindings);

/// An interned lock name: the `lock-name` resource's representation.
pub struct LockName(String);

impl wit::GuestLockName for LockName {
    fn new(name: String) -> Self {
        LockName(name)
    }
}

/// Whether two interned names are the same lock: equal bytes. The pointer
/// check only skips comparing a handle with itself.
#[inline]
fn same_lock(a: &LockName, b: &LockName) -> bool {
    core::ptr::eq(a, b) || a.0 == b.0
}

impl wit::Guest for Component {
    type LockName = LockName;

    fn admit(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        policy: wit::Policy,
    ) -> Result<wit::Admission, wit::Rejection> {
        let same =
            || current.as_ref().is_some_and(|f| same_lock(f.lock.get::<LockName>(), presented.lock.get::<LockName>()));
        exports::admit(current.as_ref(), same, &presented, policy)
    }

    fn admit_batch(
        current: Option<wit::Fence<'_>>,
        lock: wit::LockNameBorrow<'_>,
        writes: Vec<wit::BatchWrite>,
        policy: wit::Policy,
    ) -> wit::BatchOutcome {
        let wrong_lock = current.as_ref().is_some_and(|f| !same_lock(f.lock.get::<LockName>(), lock.get::<LockName>()));
        exports::admit_batch(current.as_ref(), wrong_lock, writes, policy)
    }

    fn admit_stream(high_water: u64, tokens: Vec<u64>, policy: wit::Policy) -> wit::StreamOutcome {
        exports::admit_stream(high_water, tokens, policy)
    }
}
