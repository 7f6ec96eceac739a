//! The opaque `fencing_guard`: the guard an in-process host builds
//! (`fencing_runtime::accept::host_guard`: no signal handlers, no compile
//! threads) and the verifier keys set on it.
//!
//! Invariants:
//! - a `fencing_guard*` handed out is a leaked `Box<Handle>`, taken back
//!   only by `fencing_guard_close`;
//! - the keys are replaced whole under a lock, and a signed decision holds
//!   the lock's read side for its whole call, so it runs under one set of
//!   keys, old or new, never a mix; a failed `set_keys` leaves the old set.

use crate::args::{self, MAX_KEYS_TEXT};
use crate::status::{ERR_KEYS, ERR_LOAD, Error, FencingError, Status, entry};
use crate::types::CKey;
use fencing_runtime::proof::{Algorithm, HMAC_KEY_BYTES, KeyError, MAX_KEYS, VerifierKey};
use fencing_runtime::{Verifier, WasmGuard, accept, key_text};
use std::ffi::{CStr, OsStr, c_char};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::RwLock;

/// What a `fencing_guard*` points to.
pub struct Handle {
    pub guard: WasmGuard,
    pub keys: RwLock<Option<Verifier>>,
}

/// The handle behind `guard`, or NULL's error.
///
/// # Safety
/// `guard` is NULL or a pointer `fencing_guard_open` returned and
/// `fencing_guard_close` has not taken back.
pub unsafe fn handle<'a>(guard: *const Handle) -> Result<&'a Handle, Error> {
    // SAFETY: the caller's contract.
    unsafe { guard.as_ref() }.ok_or_else(|| Error::null("guard"))
}

/// A path argument: NULL for none.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn path<'a>(p: *const c_char) -> Option<&'a Path> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| Path::new(OsStr::from_bytes(unsafe { CStr::from_ptr(p) }.to_bytes())))
}

/// `fencing_guard_open`.
///
/// # Safety
/// As the header says: paths NULL or NUL-terminated, `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_guard_open(
    plugin_path: *const c_char,
    cache_dir: *const c_char,
    out: *mut *mut Handle,
    err: *mut FencingError,
) -> Status {
    if !out.is_null() {
        // SAFETY: `out` is writable (the header's contract).
        unsafe { *out = std::ptr::null_mut() };
    }
    entry(
        err,
        || (),
        || {
            if out.is_null() {
                return Err(Error::null("out"));
            }
            // SAFETY: the caller's contract.
            let (plugin, cache) = unsafe { (path(plugin_path), path(cache_dir)) };
            let guard =
                accept::host_guard(plugin, cache).map_err(|e| Error::new(ERR_LOAD, "guard_load", e.to_string()))?;
            let handle = Box::new(Handle { guard, keys: RwLock::new(None) });
            // SAFETY: checked non-NULL above.
            unsafe { *out = Box::into_raw(handle) };
            Ok(())
        },
    )
}

/// `fencing_guard_close`.
///
/// # Safety
/// `guard` is NULL or an open guard no other call uses now or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_guard_close(guard: *mut Handle) {
    if guard.is_null() {
        return;
    }
    // Dropping stops the guard's ticker thread; a panic there stays here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `guard` came from `fencing_guard_open`'s `Box::into_raw` and is given back once.
        drop(unsafe { Box::from_raw(guard) });
    }));
}

fn key_error(e: KeyError) -> Error {
    let reason = match e {
        KeyError::NoKeys => "keys_empty",
        KeyError::TooMany => "keys_too_many",
        KeyError::DuplicateId(_) => "key_duplicate_id",
        KeyError::BadKey(_) => "key_bad",
    };
    Error::new(ERR_KEYS, reason, e.to_string())
}

/// Checks `keys` as a set and installs them on `handle`.
fn install(handle: &Handle, keys: Vec<VerifierKey>) -> Result<(), Error> {
    let verifier = Verifier::new(keys).map_err(key_error)?;
    *handle.keys.write().unwrap_or_else(|e| e.into_inner()) = Some(verifier);
    Ok(())
}

/// One `fencing_key`, bounded before its material is read.
///
/// # Safety
/// `k.material` is NULL or points to `k.material_len` readable bytes.
unsafe fn key(k: &CKey) -> Result<VerifierKey, Error> {
    let algorithm = match k.algorithm {
        0 => Algorithm::Ed25519,
        1 => Algorithm::HmacSha256,
        other => {
            return Err(Error::new(
                ERR_KEYS,
                "key_algorithm_unknown",
                format!("key {}: algorithm {other} is not FENCING_ED25519 (0) or FENCING_HMAC_SHA256 (1)", k.id),
            ));
        }
    };
    if k.material_len > *HMAC_KEY_BYTES.end() {
        return Err(key_error(KeyError::BadKey(k.id)));
    }
    // SAFETY: the caller's contract.
    let material = unsafe { args::bytes(k.material.cast(), k.material_len, "key material") }?.to_vec();
    Ok(VerifierKey { id: k.id, algorithm, material })
}

/// `fencing_guard_set_keys`.
///
/// # Safety
/// `guard` as in [`handle`]; `keys` NULL or `count` readable keys whose material is readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_guard_set_keys(
    guard: *const Handle,
    keys: *const CKey,
    count: usize,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || (),
        || {
            // SAFETY: the caller's contract.
            let handle = unsafe { handle(guard) }?;
            match count {
                0 => return Err(key_error(KeyError::NoKeys)),
                n if n > MAX_KEYS => return Err(key_error(KeyError::TooMany)),
                _ => {}
            }
            // SAFETY: the caller's contract; `count` is bounded above.
            let given = unsafe { args::slice(keys, count, "keys") }?;
            // SAFETY: as above.
            let keys = given.iter().map(|k| unsafe { key(k) }).collect::<Result<Vec<_>, _>>()?;
            install(handle, keys)
        },
    )
}

/// `fencing_guard_set_keys_text`.
///
/// # Safety
/// `guard` as in [`handle`]; `text` NULL or `text_len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_guard_set_keys_text(
    guard: *const Handle,
    text: *const c_char,
    text_len: usize,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || (),
        || {
            // SAFETY: the caller's contract.
            let handle = unsafe { handle(guard) }?;
            if text_len > MAX_KEYS_TEXT {
                return Err(Error::new(
                    ERR_KEYS,
                    "keys_text",
                    format!("keys text is {text_len} bytes, more than {MAX_KEYS_TEXT}"),
                ));
            }
            // SAFETY: the caller's contract, the length bounded above.
            let bytes = unsafe { args::bytes(text, text_len, "text") }?;
            let text =
                std::str::from_utf8(bytes).map_err(|_| Error::new(ERR_KEYS, "keys_text", "keys text is not UTF-8"))?;
            let keys = key_text::parse_verifier_keys(text)
                .map_err(|(line, why)| Error::new(ERR_KEYS, "keys_text", format!("keys text, line {line}: {why}")))?;
            install(handle, keys)
        },
    )
}

/// `fencing_guard_clear_keys`.
///
/// # Safety
/// `guard` as in [`handle`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_guard_clear_keys(guard: *const Handle, err: *mut FencingError) -> Status {
    entry(
        err,
        || (),
        || {
            // SAFETY: the caller's contract.
            let handle = unsafe { handle(guard) }?;
            *handle.keys.write().unwrap_or_else(|e| e.into_inner()) = None;
            Ok(())
        },
    )
}
