//! Loading a `fencing:guard` component: compile it (or load it from the
//! on-disk cache, `compile.rs`), check that it implements a compatible
//! version of the contract (`compat.rs`), and describe it ([`PluginInfo`],
//! what `fencing plugin inspect` prints). A compatible component whose core
//! module has the direct-call shape also gets that module compiled, so calls
//! can take the direct path.

mod compat;
mod compile;

use crate::wasm::direct::DirectPre;
use compile::{Compiled, compile, compile_cached};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

/// The WIT package this host implements.
pub const PACKAGE: &str = "fencing:guard";
/// The version of the contract this host was built against.
pub const VERSION: (u64, u64, u64) = (0, 3, 0);
/// The interface the host calls.
pub const INTERFACE: &str = "check";

/// The component built from `guest/` for `wasm32-wasip2`, embedded in this
/// crate: the committed `fencing_rules::COMPONENT`, or, built with
/// `FENCING_BUILD_COMPONENT=1` in a checkout, the component `build.rs` just
/// built from the sources.
#[cfg(not(fencing_component_from_source))]
pub static EMBEDDED: &[u8] = fencing_rules::COMPONENT;
/// The component built from `guest/` for `wasm32-wasip2`, embedded in this
/// crate: built by `build.rs` from the checkout's sources
/// (`FENCING_BUILD_COMPONENT=1`).
#[cfg(fencing_component_from_source)]
pub static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fencing_rules.wasm"));

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read.
    #[error("cannot read plugin {path}: {source}")]
    Read {
        /// The plugin file.
        path: PathBuf,
        /// Why reading failed.
        source: std::io::Error,
    },
    /// The bytes are not a component wasmtime can compile (or the engine could not be built).
    #[error("not a valid WebAssembly component: {0}")]
    Invalid(String),
    /// A valid component that does not implement a compatible `fencing:guard` (the message says what differs).
    #[error("incompatible plugin: {0}")]
    Incompatible(String),
    /// Compatible, but creating an instance failed.
    #[error("plugin cannot be instantiated: {0}")]
    Instantiate(String),
}

/// A component's description: what `fencing plugin inspect` reports.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct PluginInfo {
    /// Where the component came from (`<embedded>` for the built-in one).
    pub source: String,
    /// Size of the component in bytes.
    pub size: u64,
    /// SHA-256 of the component bytes, hex.
    pub sha256: String,
    /// The exported `fencing:guard` interface, e.g. `fencing:guard/check@0.3.0`.
    pub package: Option<String>,
    /// Every export: instance names with their functions.
    pub exports: Vec<String>,
    /// Every import (a compatible plugin has none).
    pub imports: Vec<String>,
    /// Whether this host can run it.
    pub compatible: bool,
    /// Why not, when it cannot.
    pub problem: Option<String>,
    /// Whether the compiled artifact came from the on-disk cache.
    pub from_cache: bool,
    /// How calls reach the rules: `direct` (the core module, ABI handled by
    /// the host) or `component` (wasmtime's component runtime), with the
    /// reason when the direct path is not possible.
    pub call_path: String,
}

/// A compiled, compatibility-checked component.
#[derive(Clone)]
pub struct Plugin {
    /// The compiled component.
    pub component: Component,
    /// The core module for the direct path, when the component has its shape.
    pub(crate) direct: Option<DirectPre>,
    /// Its description.
    pub info: PluginInfo,
}

impl Plugin {
    /// Loads the embedded component.
    pub fn embedded(engine: &Engine, cache: Option<&Path>) -> Result<Plugin, PluginError> {
        Self::from_bytes(engine, EMBEDDED, "<embedded>", cache)
    }

    /// Loads a component file.
    pub fn from_file(engine: &Engine, path: &Path, cache: Option<&Path>) -> Result<Plugin, PluginError> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read { path: path.to_owned(), source })?;
        Self::from_bytes(engine, &bytes, &path.display().to_string(), cache)
    }

    /// Compiles (or loads from `cache`) and checks a component. Fails with
    /// [`PluginError::Incompatible`] when it does not implement this host's contract.
    pub fn from_bytes(
        engine: &Engine,
        bytes: &[u8],
        source: &str,
        cache: Option<&Path>,
    ) -> Result<Plugin, PluginError> {
        let plugin = Self::describe(engine, bytes, source, cache)?;
        match &plugin.info.problem {
            None => Ok(plugin),
            Some(problem) => Err(PluginError::Incompatible(problem.clone())),
        }
    }

    /// Compiles and describes a component without rejecting incompatible ones.
    pub fn describe(engine: &Engine, bytes: &[u8], source: &str, cache: Option<&Path>) -> Result<Plugin, PluginError> {
        let sha = Sha256::digest(bytes);
        let (compiled, from_cache) = match cache {
            Some(dir) => compile_cached(engine, bytes, &sha, dir)?,
            None => (compile(engine, bytes)?, false),
        };
        let Compiled { component, core } = compiled;
        let mut info = PluginInfo {
            source: source.to_owned(),
            size: bytes.len() as u64,
            sha256: hex(&sha),
            package: None,
            exports: Vec::new(),
            imports: Vec::new(),
            compatible: false,
            problem: None,
            from_cache,
            call_path: String::new(),
        };
        let ty = component.component_type();
        info.imports.extend(ty.imports(engine).map(|(name, _)| name.to_owned()));
        for (name, item) in ty.exports(engine) {
            match item.ty {
                ComponentItem::ComponentInstance(inst) => {
                    let funcs: Vec<&str> = inst
                        .exports(engine)
                        .filter(|(_, ty)| matches!(ty.ty, ComponentItem::ComponentFunc(_)))
                        .map(|(n, _)| n)
                        .collect();
                    info.exports.push(format!("{name} {{{}}}", funcs.join(", ")));
                }
                _ => info.exports.push(name.to_owned()),
            }
            if name.starts_with(&format!("{PACKAGE}/{INTERFACE}")) {
                info.package = Some(name.to_owned());
            }
        }
        info.problem = compat::compatibility_problem(&info);
        info.compatible = info.problem.is_none();
        let direct = match (&info.package, core) {
            (Some(iface), Some(module)) if info.compatible => DirectPre::new(engine, &module, iface),
            (_, None) => Err(String::from("no single core module implements the interface")),
            _ => Err("incompatible".into()),
        };
        info.call_path = match &direct {
            Ok(_) => "direct".into(),
            Err(why) => format!("component ({why})"),
        };
        Ok(Plugin { component, direct: direct.ok(), info })
    }
}

/// Lowercase hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
