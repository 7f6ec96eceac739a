//! Plugin loading: the embedded component's shape, version and import
//! checks on foreign components (written as component WAT text), the on-disk
//! cache of compiled artifacts.

use fencing_runtime::{Guard, Plugin, PluginError, Policy, Sequencer, WasmGuard, WasmLimits, plugin};
use std::path::{Path, PathBuf};

/// A component exporting `fencing:guard/check@0.4.0`, a breaking version for 0.3 hosts.
const V040: &str = include_str!("../../../../tests/plugins/check-0.4.0.wat");

/// A component with the right export that imports a capability.
const IMPORTS: &str = r#"(component
  (import "wasi:clocks/monotonic-clock@0.2.0" (instance $clock (export "now" (func (result u64)))))
  (core module $m (func (export "f")))
  (core instance $i (instantiate $m))
  (func $f (canon lift (core func $i "f")))
  (instance $check (export "admit" (func $f)))
  (export "fencing:guard/check@0.3.0" (instance $check))
)"#;

fn engine() -> wasmtime::Engine {
    WasmGuard::engine(&WasmLimits::default()).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn works(plugin: Plugin, engine: wasmtime::Engine) {
    let g = WasmGuard::new(engine, plugin, WasmLimits::default()).unwrap();
    let s = Sequencer { lock: "orders".into(), token: 3, sequence: None };
    assert!(g.admit(None, &s, Policy::NonDecreasing).unwrap().is_ok());
}

#[test]
fn embedded_component_imports_nothing_and_is_small() {
    assert!(plugin::EMBEDDED.len() < 128 * 1024, "component is {} bytes", plugin::EMBEDDED.len());
    let p = Plugin::embedded(&engine(), None).unwrap();
    assert_eq!(p.info.imports, Vec::<String>::new());
    assert_eq!(p.info.package.as_deref(), Some("fencing:guard/check@0.3.0"));
    let check = p.info.exports.iter().find(|e| e.starts_with("fencing:guard/check@0.3.0")).unwrap();
    for f in ["[constructor]lock-name", "admit", "admit-code", "admit-batch", "admit-stream"] {
        assert!(check.contains(f), "{check} lacks {f}");
    }
    assert!(p.info.compatible);
}

#[test]
fn newer_contract_version_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "v030.wat", V040);
    let err = Plugin::from_file(&engine(), &path, None).err().expect("0.4.0 must be refused");
    let PluginError::Incompatible(msg) = &err else { panic!("wrong error: {err}") };
    assert!(msg.contains("0.4.0") && msg.contains("0.3.0"), "{msg}");
    let err = WasmGuard::from_file(&path, None).err().expect("guard refuses it too");
    assert!(err.to_string().contains("fencing:guard@0.4.0"), "{err}");
}

#[test]
fn component_with_imports_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "imports.wat", IMPORTS);
    let err = Plugin::from_file(&engine(), &path, None).err().expect("imports must be refused");
    let PluginError::Incompatible(msg) = &err else { panic!("wrong error: {err}") };
    assert!(msg.contains("wasi:clocks/monotonic-clock@0.2.0") && msg.contains("imports"), "{msg}");
}

#[test]
fn second_load_comes_from_cache() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine();
    assert!(!Plugin::embedded(&engine, Some(dir.path())).unwrap().info.from_cache);
    let cached = Plugin::embedded(&engine, Some(dir.path())).unwrap();
    assert!(cached.info.from_cache);
    works(cached, engine);
}

fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    v.sort();
    v
}

#[test]
fn truncated_or_corrupted_artifact_is_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine();
    Plugin::embedded(&engine, Some(dir.path())).unwrap();
    let [artifact] = &artifacts(dir.path())[..] else { panic!("expected one artifact") };
    let good = std::fs::read(artifact).unwrap();

    std::fs::write(artifact, &good[..good.len() / 2]).unwrap();
    let p = Plugin::embedded(&engine, Some(dir.path())).unwrap();
    assert!(!p.info.from_cache, "a truncated artifact was loaded");
    assert_eq!(std::fs::read(artifact).unwrap(), good, "the recompiled artifact replaced the truncated one");

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x5a;
    std::fs::write(artifact, &flipped).unwrap();
    let p = Plugin::embedded(&engine, Some(dir.path())).unwrap();
    assert!(!p.info.from_cache, "a corrupted artifact was loaded");
    works(p, engine.clone());
    assert!(Plugin::embedded(&engine, Some(dir.path())).unwrap().info.from_cache, "cache repaired");
}

#[test]
fn cache_of_an_engine_with_other_settings_is_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    Plugin::embedded(&engine(), Some(dir.path())).unwrap();
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(false);
    let other = wasmtime::Engine::new(&config).unwrap();
    let p = Plugin::embedded(&other, Some(dir.path())).unwrap();
    assert!(!p.info.from_cache, "an artifact compiled for other settings was loaded");
    let both = artifacts(dir.path());
    assert_eq!(both.len(), 2, "each engine has its own cache key");

    // Even under the other engine's key (digest included), the foreign artifact is never used.
    let read = |p: &PathBuf| (std::fs::read(p).unwrap(), std::fs::read(p.with_extension("sha256")).unwrap());
    let (a, b) = (read(&both[0]), read(&both[1]));
    for (to, (art, digest)) in [(&both[0], b), (&both[1], a)] {
        std::fs::write(to, art).unwrap();
        std::fs::write(to.with_extension("sha256"), digest).unwrap();
    }
    let p = Plugin::embedded(&other, Some(dir.path())).unwrap();
    assert!(!p.info.from_cache, "a renamed foreign artifact was loaded");
    let p = Plugin::embedded(&engine(), Some(dir.path())).unwrap();
    assert!(!p.info.from_cache, "a renamed foreign artifact was loaded");
}
