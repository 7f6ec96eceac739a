//! Compiling a component, and the on-disk cache of compiled artifacts.
//!
//! Cache invariant: a cached artifact is used only when its key matches the
//! SHA-256 of the component bytes *and* the engine's precompile compatibility
//! hash (wasmtime version and every setting that affects code generation),
//! and when its own SHA-256 matches the digest written beside it. One
//! artifact holds the compiled component and, when there is one, the compiled
//! core module of the direct path. Artifacts are written to a temporary file
//! and renamed into place, so a crash never leaves a half-written artifact
//! under a valid name.

use super::{INTERFACE, PACKAGE, PluginError, hex};
use crate::wasm::direct;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::Path;
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

/// What one load compiles: the component, and the core module that
/// implements the interface when exactly one does.
pub(super) struct Compiled {
    pub(super) component: Component,
    pub(super) core: Option<Module>,
}

pub(super) fn compile(engine: &Engine, bytes: &[u8]) -> Result<Compiled, PluginError> {
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
    format!("{}-{:016x}", hex(sha), h.finish())
}

/// Loads the artifact of `bytes` from `dir`, or compiles it and writes it there.
/// The flag says whether it came from the cache.
pub(super) fn compile_cached(
    engine: &Engine,
    bytes: &[u8],
    sha: &[u8],
    dir: &Path,
) -> Result<(Compiled, bool), PluginError> {
    let key = cache_key(engine, sha);
    let artifact = dir.join(format!("{key}.cwasm"));
    let digest = dir.join(format!("{key}.sha256"));
    if let (Ok(art), Ok(want)) = (std::fs::read(&artifact), std::fs::read_to_string(&digest))
        && hex(&Sha256::digest(&art)) == want.trim()
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
            .and_then(|()| write_atomically(dir, &digest, hex(&Sha256::digest(&art)).as_bytes()));
    }
    Ok((compiled, false))
}

fn write_atomically(dir: &Path, to: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let tmp = to.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, to)
}
