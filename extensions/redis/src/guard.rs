//! The guard every command asks: the embedded fencing:guard component under
//! wasmtime, loaded once when the module loads.

use fencing_runtime::WasmGuard;
use std::sync::OnceLock;

static GUARD: OnceLock<WasmGuard> = OnceLock::new();

/// Loads the guard; an error message when it cannot.
pub fn load() -> Result<(), String> {
    if GUARD.get().is_some() {
        return Ok(());
    }
    let guard = WasmGuard::embedded(None).map_err(|e| format!("cannot load the fencing:guard component: {e}"))?;
    let _ = GUARD.set(guard);
    Ok(())
}

/// The loaded guard.
pub fn get() -> Option<&'static WasmGuard> {
    GUARD.get()
}
