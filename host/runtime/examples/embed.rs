//! A storage engine's view of the fencing check, in one screen.
//!
//! Run: `cargo run -p fencing-runtime --example embed [-- PLUGIN.wasm]`
//!
//! The engine keeps one fence per resource beside its data. For each write it
//! asks the guard, and persists the admitted fence in the same transaction as
//! the data; a refused write changes nothing. Here the "table" is a map.

use fencing_runtime::{Fence, Guard, Policy, Sequencer, WasmGuard};
use std::collections::HashMap;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let guard = match std::env::args_os().nth(1) {
        Some(path) => WasmGuard::from_file(path.as_ref(), None)?,
        None => WasmGuard::embedded(None)?,
    };
    let info = guard.info();
    println!(
        "guard: {} ({}, {} bytes, call path {:?})",
        info.source,
        info.package.unwrap_or_default(),
        info.size,
        guard.call_path()
    );

    let mut fences: HashMap<&str, Fence> = HashMap::new();
    let resource = "storage:customer-orders-bucket";
    // Client 1 holds token 33, pauses past its lease; client 2 gets 34 and writes; client 1 wakes up.
    for (who, token) in [("client 1", 33), ("client 2", 34), ("client 2", 34), ("client 1 (after its pause)", 33)] {
        let presented = Sequencer { lock: resource.into(), token, sequence: None };
        match guard.admit(fences.get(resource), &presented, Policy::NonDecreasing)? {
            Ok(admitted) => {
                // In a real engine: write the data and this fence in one transaction.
                let fence =
                    Fence { lock: presented.lock, high_water: admitted.high_water, sequence: admitted.sequence };
                println!("{who}: token {token} admitted, fence now at {}", fence.high_water);
                fences.insert(resource, fence);
            }
            Err(rejection) => println!("{who}: token {token} refused: {} ({rejection:?})", rejection.reason()),
        }
    }
    Ok(())
}
