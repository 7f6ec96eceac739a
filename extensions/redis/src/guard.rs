//! The guard every command asks: the embedded fencing:guard component under
//! wasmtime, or the component named by the module's `PLUGIN` argument
//! (`--loadmodule libfencing_redis.so PLUGIN /path/guard.wasm`), loaded once
//! when the module loads. Only who starts Redis or may run `MODULE LOAD`
//! chooses it: a permissive component could admit any write.

use fencing_runtime::WasmGuard;
use redis_module::{RedisError, RedisString};
use std::path::PathBuf;
use std::sync::OnceLock;

static GUARD: OnceLock<WasmGuard> = OnceLock::new();

/// The module's load arguments: `[PLUGIN path]`.
fn plugin_path(args: &[RedisString]) -> Result<Option<PathBuf>, String> {
    match args {
        [] => Ok(None),
        [word, path] if word.as_slice().eq_ignore_ascii_case(b"PLUGIN") => {
            let path = std::str::from_utf8(path.as_slice()).map_err(|_| "the PLUGIN path is not UTF-8".to_string())?;
            Ok(Some(PathBuf::from(path)))
        }
        _ => Err("the module takes no arguments but `PLUGIN <path to a fencing:guard component>`".into()),
    }
}

/// Loads the guard from the module's arguments; an error message when it cannot.
pub fn load(args: &[RedisString]) -> Result<(), String> {
    let plugin = plugin_path(args)?;
    if GUARD.get().is_some() {
        return Ok(());
    }
    let guard = match &plugin {
        None => WasmGuard::embedded(None).map_err(|e| format!("cannot load the fencing:guard component: {e}"))?,
        Some(path) => {
            WasmGuard::from_file(path, None).map_err(|e| format!("cannot load the plugin {}: {e}", path.display()))?
        }
    };
    let _ = GUARD.set(guard);
    Ok(())
}

/// The loaded guard, or the refusal a write gets without one.
pub fn get() -> Result<&'static WasmGuard, RedisError> {
    GUARD.get().ok_or(RedisError::Str("GUARD_FAILURE the guard is not loaded"))
}
