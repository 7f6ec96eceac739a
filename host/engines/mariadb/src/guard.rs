//! The component inside mariadbd, and the verifier keys it checks proofs with.
//!
//! mariadbd runs one thread per connection (or a pool of them): the library
//! keeps one guard per component for the whole process, built the first time
//! a decision needs it (`CREATE FUNCTION` stays cheap), by
//! [`accept::host_guard`]: wasmtime installs no signal handler (mariadbd keeps
//! SIGSEGV and friends) and starts no compile thread. Each connection's
//! thread keeps its own worker (`fencing-runtime`), so connections never wait
//! for each other here.
//!
//! Which component decides is the administrator's (`fencing.settings`, which
//! only an administrator writes, names a `.wasm` file in mariadbd's plugin
//! directory; empty: the embedded one).
//! The verifier keys come the same way, as text; a [`Verifier`] is built once
//! per distinct text and kept (a rotation is new text).
//!
//! Invariant: a guard that cannot be built, keys that do not parse, or a call
//! that traps or hits a bound is a [`Failure`], never an admission.

use fencing_runtime::{
    Decision, Fence, Guard, Policy, Sequencer, SignedDecision, Verifier, WasmGuard, accept, key_text,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// Why the guard could not decide: `reason: message`, the reason one of
/// `guard_timeout`, `guard_trap`, `guard_out_of_memory`, `guard_unavailable`
/// or `verify_keys`.
pub type Failure = String;

/// Distinct plugins or key sets kept at once; past this the cache starts over.
const MAX_CACHED: usize = 16;

type Built<T> = Result<Arc<T>, Failure>;

/// The embedded component's guard, built once.
fn embedded() -> Built<WasmGuard> {
    static EMBEDDED: OnceLock<Built<WasmGuard>> = OnceLock::new();
    EMBEDDED.get_or_init(|| build(None)).clone()
}

fn build(path: Option<&Path>) -> Built<WasmGuard> {
    accept::host_guard(path, None).map(Arc::new).map_err(|e| format!("guard_unavailable: {e}"))
}

/// The guard of the component `plugin` (empty or NULL: the embedded one), a
/// file in mariadbd's plugin directory ([`plugin_file`]). A plugin that
/// fails to load is remembered, so every decision under it fails at once.
pub fn guard(plugin: Option<&str>) -> Built<WasmGuard> {
    let Some(name) = plugin.filter(|p| !p.is_empty()) else { return embedded() };
    static PLUGINS: OnceLock<Mutex<HashMap<String, Built<WasmGuard>>>> = OnceLock::new();
    let mut plugins = PLUGINS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(built) = plugins.get(name) {
        return built.clone();
    }
    if plugins.len() >= MAX_CACHED {
        plugins.clear();
    }
    let built = plugin_file(name).and_then(|path| build(Some(&path)));
    plugins.insert(name.to_string(), built.clone());
    built
}

/// Largest plugin file read, in bytes (the component is about 100 KiB).
const MAX_PLUGIN_BYTES: u64 = 16 << 20;

/// `name` (a file name, or a path) as a `.wasm` file in the directory this
/// library was loaded from, mariadbd's plugin directory, which only the
/// machine's administrator writes. Any account may call the functions with
/// any text, so no other file is ever read: a function cannot be made to
/// read `/dev/zero` or probe the file system.
fn plugin_file(name: &str) -> Result<PathBuf, Failure> {
    let refused = |why: &str| format!("guard_unavailable: plugin {name:?} {why}");
    // One answer whether a file outside exists or not: nothing to probe with.
    let outside = || refused("must be a .wasm file in mariadbd's plugin directory");
    let dir = library_dir().ok_or_else(|| refused("cannot be checked: the library's directory is unknown"))?;
    let real = dir.join(name).canonicalize().map_err(|_| outside())?;
    if real.parent() != Some(dir.as_path()) || real.extension().is_none_or(|e| e != "wasm") {
        return Err(outside());
    }
    let meta = std::fs::metadata(&real).map_err(|_| outside())?;
    if !meta.is_file() {
        return Err(outside());
    }
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(refused("is larger than 16 MiB"));
    }
    Ok(real)
}

/// The directory this library was loaded from.
fn library_dir() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: a zeroed Dl_info is a valid value for dladdr to fill.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address is of a function of this library; dladdr only reads it.
    let found = unsafe { libc::dladdr(library_dir as *const libc::c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr filled dli_fname with a NUL-terminated path that lives as long as the library.
    let file = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    let file = Path::new(std::ffi::OsStr::from_bytes(file.to_bytes())).canonicalize().ok()?;
    file.parent().map(Path::to_path_buf)
}

/// The verifier of `keys` (`fencing_runtime::key_text`: `<id> <algorithm>
/// <hex>`, by line or comma); `None` when the text is empty or NULL
/// (signing off). Keys that do not parse are a failure naming the line.
pub fn verifier(keys: Option<&str>) -> Result<Option<Arc<Verifier>>, Failure> {
    let Some(text) = keys.filter(|k| !k.trim().is_empty()) else { return Ok(None) };
    if text.len() > MAX_KEYS_TEXT {
        return Err(format!("verify_keys: {} bytes, more than {MAX_KEYS_TEXT}", text.len()));
    }
    static VERIFIERS: OnceLock<Mutex<HashMap<String, Built<Verifier>>>> = OnceLock::new();
    let mut verifiers = VERIFIERS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(built) = verifiers.get(text) {
        return built.clone().map(Some);
    }
    if verifiers.len() >= MAX_CACHED {
        verifiers.clear();
    }
    let built = parse_verifier(text).map(Arc::new);
    verifiers.insert(text.to_string(), built.clone());
    built.map(Some)
}

/// Longest text of keys taken: 64 keys of HMAC's 64 bytes, with room to spare.
const MAX_KEYS_TEXT: usize = 16 << 10;

/// `keys` checked as a set, or why not (`verify_keys: line 2: ...`).
pub fn parse_verifier(text: &str) -> Result<Verifier, Failure> {
    if text.len() > MAX_KEYS_TEXT {
        return Err(format!("verify_keys: {} bytes, more than {MAX_KEYS_TEXT}", text.len()));
    }
    let keys = key_text::parse_verifier_keys(text).map_err(|(line, e)| format!("verify_keys: line {line}: {e}"))?;
    Verifier::new(keys).map_err(|e| format!("verify_keys: {e:?}"))
}

/// One decision, signed when `verifier` is given.
pub fn decide(
    guard: &WasmGuard,
    verifier: Option<&Verifier>,
    current: Option<&Fence>,
    presented: &Sequencer,
    proof: &[u8],
    policy: Policy,
) -> Result<SignedDecision, Failure> {
    guard.admit_with_keys(verifier, current, presented, proof, policy).map_err(|f| format!("{}: {f}", f.reason()))
}

/// One unsigned decision by the embedded component.
pub fn decide_plain(current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, Failure> {
    let guard = embedded()?;
    guard.admit(current, presented, policy).map_err(|f| format!("{}: {f}", f.reason()))
}

/// Which component decides: source, contract, size, digest and call path.
pub fn info(plugin: Option<&str>) -> Result<String, Failure> {
    let guard = guard(plugin)?;
    let i = guard.info();
    Ok(format!(
        "{}: {}, {} bytes, sha256 {}, call path {}",
        plugin.filter(|p| !p.is_empty()).unwrap_or("embedded"),
        i.package.as_deref().unwrap_or("unknown contract"),
        i.size,
        i.sha256,
        i.call_path
    ))
}
