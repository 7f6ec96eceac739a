//! The guard every command asks: the embedded fencing:guard component under
//! wasmtime, or the component named by the module's `PLUGIN` argument, and
//! the keys of signed tokens: `VERIFY id algorithm hex` (repeatable: the
//! keys every fenced write's `PROOF` must hold under) and `SIGN id algorithm
//! hex` (the secret `FENCING.ACQUIRE` signs its grants with), all loaded once
//! when the module loads:
//!
//! ```text
//! --loadmodule libfencing_redis.so PLUGIN /path/guard.wasm VERIFY 1 ed25519 <public key hex> SIGN 1 ed25519 <seed hex>
//! ```
//!
//! Only who starts Redis or may run `MODULE LOAD` chooses them: a permissive
//! component could admit any write, and a signing key mints tokens.

use crate::boundary::Refusal;
use fencing_runtime::proof::{Signer, VerifierKey};
use fencing_runtime::{Verifier, WasmGuard, accept, key_text};
use redis_module::RedisString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What a load of the module set up: the guard and the keys.
struct Loaded {
    guard: WasmGuard,
    verifier: Option<Verifier>,
    signer: Option<Signer>,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();

const USAGE: &str = "the module takes `PLUGIN <path to a fencing:guard component>`, `VERIFY <id> <algorithm> <hex>` \
                     (repeatable) and `SIGN <id> <algorithm> <hex>`";

/// The module's load arguments.
#[derive(Default)]
struct Options {
    plugin: Option<PathBuf>,
    verify: Vec<VerifierKey>,
    sign: Option<Signer>,
}

fn utf8<'a>(arg: &'a RedisString, what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(arg.as_slice()).map_err(|_| format!("the {what} is not UTF-8"))
}

/// `<id> <algorithm> <hex>`: a key id, `ed25519` or `hmac-sha256`, and the
/// key's bytes, read as every host reads keys (`fencing_runtime::key_text`).
fn key(
    word: &str,
    id: &RedisString,
    algorithm: &RedisString,
    hex: &RedisString,
) -> Result<key_text::KeyFields, String> {
    key_text::key(utf8(id, "key id")?, utf8(algorithm, "algorithm")?, utf8(hex, "key")?)
        .map_err(|e| format!("{word}: {e}"))
}

fn parse(args: &[RedisString]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut rest = args;
    while let [word, tail @ ..] = rest {
        let upper = word.as_slice().to_ascii_uppercase();
        match (upper.as_slice(), tail) {
            (b"PLUGIN", [path, tail @ ..]) if o.plugin.is_none() => {
                o.plugin = Some(PathBuf::from(utf8(path, "PLUGIN path")?));
                rest = tail;
            }
            (b"VERIFY", [id, algorithm, hex, tail @ ..]) => {
                let (id, algorithm, material) = key("VERIFY", id, algorithm, hex)?;
                o.verify.push(VerifierKey { id, algorithm, material });
                rest = tail;
            }
            (b"SIGN", [id, algorithm, hex, tail @ ..]) if o.sign.is_none() => {
                let (id, algorithm, secret) = key("SIGN", id, algorithm, hex)?;
                let signer = Signer::new(id, algorithm, &secret).ok_or_else(|| {
                    format!(
                        "SIGN {id}: an ed25519 secret is 32 bytes, an hmac-sha256 one 32 to 64, not {}",
                        secret.len()
                    )
                })?;
                o.sign = Some(signer);
                rest = tail;
            }
            _ => return Err(USAGE.into()),
        }
    }
    Ok(o)
}

/// Loads the guard and the keys from the module's arguments, all or
/// nothing: an error message when any of them cannot be loaded.
///
/// A module with a data type cannot be unloaded (Redis refuses `MODULE
/// UNLOAD`), so a process loads the module once; should a second load ever
/// reach this (the library kept mapped after a failed load), it fails
/// rather than keep the first load's guard and keys under the second's
/// arguments.
pub fn load(args: &[RedisString]) -> Result<(), String> {
    let options = parse(args)?;
    let verifier = match options.verify.is_empty() {
        true => None,
        false => Some(Verifier::new(options.verify).map_err(|e| format!("VERIFY: {e}"))?),
    };
    let guard = match &options.plugin {
        None => accept::host_guard(None, None).map_err(|e| format!("cannot load the fencing:guard component: {e}"))?,
        Some(path) => accept::host_guard(Some(path), None)
            .map_err(|e| format!("cannot load the plugin {}: {e}", path.display()))?,
    };
    LOADED
        .set(Loaded { guard, verifier, signer: options.sign })
        .map_err(|_| "the module was loaded in this redis-server process before: restart redis-server to load it with other arguments".to_string())
}

/// The loaded guard, or the refusal a write gets without one.
pub fn get() -> Result<&'static WasmGuard, Refusal> {
    LOADED
        .get()
        .map(|l| &l.guard)
        .ok_or_else(|| Refusal::new("GUARD_FAILURE guard_unavailable the guard is not loaded"))
}

/// The keys every fenced write's proof must hold under (`VERIFY`), if any.
pub fn verifier() -> Option<&'static Verifier> {
    LOADED.get().and_then(|l| l.verifier.as_ref())
}

/// The key grants are signed with (`SIGN`), if any.
pub fn signer() -> Option<&'static Signer> {
    LOADED.get().and_then(|l| l.signer.as_ref())
}
