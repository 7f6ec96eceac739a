//! Loading a `fencing:guard` component: compile or load from the on-disk
//! cache, check that it implements a compatible version of the contract, and
//! describe it for `fencing plugin inspect`. A compatible component whose
//! core module has the direct-call shape (`direct.rs`) also gets that module
//! compiled, so calls can take the direct path.
//!
//! Cache invariant: a cached artifact is used only when its key matches the
//! SHA-256 of the component bytes *and* the engine's precompile compatibility
//! hash (wasmtime version and every setting that affects code generation),
//! and when its own SHA-256 matches the digest written beside it. One
//! artifact holds the compiled component and, when there is one, the
//! compiled core module of the direct path. Artifacts
//! are written to a temporary file and renamed into place, so a crash never
//! leaves a half-written artifact under a valid name.

use super::direct::{self, DirectPre};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;
use wasmtime::{Engine, Module};

/// The WIT package this host implements.
pub const PACKAGE: &str = "fencing:guard";
/// The version of the contract this host was built against.
pub const VERSION: (u64, u64, u64) = (0, 1, 0);
/// The interface the host calls.
pub const INTERFACE: &str = "check";

/// The component built from `guest/`, embedded in the host binary.
pub static EMBEDDED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/fencing_guest.wasm"));

/// Why a plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("cannot read plugin {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("not a valid WebAssembly component: {0}")]
    Invalid(String),
    #[error("incompatible plugin: {0}")]
    Incompatible(String),
    #[error("plugin cannot be instantiated: {0}")]
    Instantiate(String),
}

/// What `fencing plugin inspect` reports.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PluginInfo {
    /// Where the component came from (`<embedded>` for the built-in one).
    pub source: String,
    /// Size of the component in bytes.
    pub size: u64,
    /// SHA-256 of the component bytes, hex.
    pub sha256: String,
    /// The exported `fencing:guard` interface, e.g. `fencing:guard/check@0.1.0`.
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
    pub component: Component,
    /// The core module for the direct path, when the component has its shape.
    pub direct: Option<DirectPre>,
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
            sha256: hex::encode(sha),
            package: None,
            exports: Vec::new(),
            imports: Vec::new(),
            compatible: false,
            problem: None,
            from_cache,
            call_path: String::new(),
        };
        let ty = component.component_type();
        for (name, item) in ty.imports(engine) {
            info.imports.push(name.to_owned());
            let _ = item;
        }
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
        info.problem = compatibility_problem(&info);
        info.compatible = info.problem.is_none();
        let direct = match (&info.package, core) {
            (Some(iface), Some(module)) if info.compatible => DirectPre::new(engine, &module, iface),
            (_, None) => Err("no single core module implements the interface".into()),
            _ => Err("incompatible".into()),
        };
        info.call_path = match &direct {
            Ok(_) => "direct".into(),
            Err(why) => format!("component ({why})"),
        };
        Ok(Plugin { component, direct: direct.ok(), info })
    }
}

/// Checks the export name's version against [`VERSION`] by semver rules
/// (for 0.x, the minor version is the breaking one) and that nothing is imported.
fn compatibility_problem(info: &PluginInfo) -> Option<String> {
    let Some(export) = &info.package else {
        return Some(format!(
            "the component does not export `{PACKAGE}/{INTERFACE}` (exports: {})",
            if info.exports.is_empty() { "none".into() } else { info.exports.join("; ") }
        ));
    };
    let version = export.split_once('@').map(|(_, v)| v);
    let Some(version) = version else {
        return Some(format!("`{export}` carries no version; this host needs {PACKAGE}@{}", version_string()));
    };
    let parts: Vec<u64> = version.split(['.', '-', '+']).take(3).filter_map(|p| p.parse().ok()).collect();
    let [major, minor, _patch] = parts[..] else {
        return Some(format!("`{export}` has an unreadable version `{version}`"));
    };
    let (want_major, want_minor, _) = VERSION;
    let compatible = if want_major == 0 { major == 0 && minor == want_minor } else { major == want_major };
    if !compatible {
        return Some(format!(
            "the plugin implements {PACKAGE}@{version}, but this host speaks {PACKAGE}@{} (compatible: {})",
            version_string(),
            if want_major == 0 { format!("0.{want_minor}.x") } else { format!("{want_major}.x") }
        ));
    }
    if !info.imports.is_empty() {
        return Some(format!(
            "the plugin imports {}, but this host provides no imports (a guard must be pure)",
            info.imports.join(", ")
        ));
    }
    None
}

fn version_string() -> String {
    let (a, b, c) = VERSION;
    format!("{a}.{b}.{c}")
}

/// What one load compiles: the component, and the core module that
/// implements the interface when exactly one does.
struct Compiled {
    component: Component,
    core: Option<Module>,
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Compiled, PluginError> {
    let invalid = |e: wasmtime::Error| PluginError::Invalid(format!("{e:#}"));
    let component = Component::new(engine, bytes).map_err(invalid)?;
    let iface = component
        .component_type()
        .exports(engine)
        .map(|(name, _)| name)
        .find(|name| name.starts_with(&format!("{PACKAGE}/{INTERFACE}@")))
        .map(str::to_owned);
    let range = iface.and_then(|iface| direct::find(bytes, &iface));
    let core = match range {
        Some(range) => Some(Module::new(engine, &bytes[range]).map_err(invalid)?),
        None => None,
    };
    Ok(Compiled { component, core })
}

impl Compiled {
    /// One artifact: the component's length (8 bytes LE), the component, then the core module.
    fn serialize(&self) -> wasmtime::Result<Vec<u8>> {
        let component = self.component.serialize()?;
        let core = match &self.core {
            Some(m) => m.serialize()?,
            None => Vec::new(),
        };
        let mut out = Vec::with_capacity(8 + component.len() + core.len());
        out.extend_from_slice(&(component.len() as u64).to_le_bytes());
        out.extend_from_slice(&component);
        out.extend_from_slice(&core);
        Ok(out)
    }

    /// # Safety
    /// `art` must be the exact output of [`Compiled::serialize`] by an engine
    /// with `engine`'s compatibility hash.
    unsafe fn deserialize(engine: &Engine, art: &[u8]) -> Option<Compiled> {
        let (len, rest) = art.split_first_chunk::<8>()?;
        let (component, core) = rest.split_at_checked(usize::try_from(u64::from_le_bytes(*len)).ok()?)?;
        // SAFETY: forwarded from the caller's contract.
        let component = unsafe { Component::deserialize(engine, component) }.ok()?;
        let core = match core.is_empty() {
            true => None,
            // SAFETY: as above.
            false => Some(unsafe { Module::deserialize(engine, core) }.ok()?),
        };
        Some(Compiled { component, core })
    }
}

/// The cache key: component digest plus the engine's compatibility hash.
fn cache_key(engine: &Engine, sha: &[u8]) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{}-{:016x}", hex::encode(sha), h.finish())
}

fn compile_cached(engine: &Engine, bytes: &[u8], sha: &[u8], dir: &Path) -> Result<(Compiled, bool), PluginError> {
    let key = cache_key(engine, sha);
    let artifact = dir.join(format!("{key}.cwasm"));
    let digest = dir.join(format!("{key}.sha256"));
    if let (Ok(art), Ok(want)) = (std::fs::read(&artifact), std::fs::read_to_string(&digest))
        && hex::encode(Sha256::digest(&art)) == want.trim()
    {
        // SAFETY: the artifact was produced by `Compiled::serialize` for an
        // engine with the same compatibility hash (it is part of the key),
        // and its digest proves it is the exact bytes that were written.
        if let Some(compiled) = unsafe { Compiled::deserialize(engine, &art) } {
            return Ok((compiled, true));
        }
    }
    let compiled = compile(engine, bytes)?;
    // The cache is an optimisation: failing to write it never fails the load.
    if let Ok(art) = compiled.serialize() {
        let _ = write_atomically(dir, &artifact, &art)
            .and_then(|()| write_atomically(dir, &digest, hex::encode(Sha256::digest(&art)).as_bytes()));
    }
    Ok((compiled, false))
}

fn write_atomically(dir: &Path, to: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = to.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, to)
}
