//! What a host accepts, and the guard a host process builds.
//!
//! The text and integer rules (names, policies, tokens as text and as signed
//! 64-bit, proofs as hex) are [`fencing_rules::accept`]'s, re-exported here
//! so that an engine depends on this crate alone; `tests/vectors/arguments/`
//! holds the shared argument vectors every host runs.
//!
//! [`host_guard`] is the guard an engine builds inside another program's
//! process (a database backend, redis-server, a C or C++ engine, a language
//! runtime): wasmtime installs no signal handler and starts no compile
//! thread, so the program that loaded the engine keeps its own signal
//! handling and threads. Every in-process host builds its guard with it.

use std::path::Path;

pub use fencing_rules::accept::*;

use crate::{EngineOptions, Plugin, PluginError, WasmGuard, WasmLimits};

/// The guard of a host inside another program's process: the component at
/// `plugin` (or the embedded one), compiled once or loaded from `cache`,
/// under the default limits and [`EngineOptions::shared_process`].
pub fn host_guard(plugin: Option<&Path>, cache: Option<&Path>) -> Result<WasmGuard, PluginError> {
    let limits = WasmLimits::default();
    let engine = WasmGuard::engine_with(&limits, EngineOptions::shared_process())?;
    let plugin = match plugin {
        None => Plugin::embedded(&engine, cache)?,
        Some(path) => Plugin::from_file(&engine, path, cache)?,
    };
    WasmGuard::new(engine, plugin, limits)
}
