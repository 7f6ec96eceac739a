//! The component export: the WIT bindings in a private `mod bindings` and
//! the exported type. The export bodies, the `lock-name` resource and the
//! WIT conversions live in `exports.rs`, the runtime shims in `runtime.rs`.
//!
//! Compiled only for `target_family = "wasm"`.

use crate::{proof, rules};

mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "guard",
        generate_all,
        // The module has no static constructors to run (the component
        // imports nothing, not even WASI), so the exports skip the call
        // that would run them: a call and a load on every decision.
        disable_run_ctors_once_workaround: true,
    });
}

use bindings::exports::fencing::guard::check as wit;

/// The export bodies, `lock-name` and WIT conversions, shared with the misbehaving test component.
#[path = "exports.rs"]
mod exports;

/// The type the bindings export.
struct Component;

bindings::export!(Component with_types_in bindings);

/// Called by `admit` and `admit-batch` with the presented lock name before
/// the rules run. The shipped component runs the rules as they are.
#[inline(always)]
fn before_call(_lock: &wit::LockNameBorrow<'_>) {}

/// Whether a single decision under this lock answers against the rules. The
/// shipped component never does.
#[inline(always)]
fn lies(_lock: &wit::LockNameBorrow<'_>) -> bool {
    false
}
