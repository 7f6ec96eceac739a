//! What a host accepts, as C entry points (`fencing_check_name`,
//! `fencing_parse_policy`, `fencing_parse_number`, `fencing_parse_proof`),
//! the version, and `fencing_reason`: each a rule of
//! `fencing_runtime::accept` read over (pointer, length) bytes, so the C API
//! refuses exactly what every other host refuses, with the same codes
//! (`tests/vectors/arguments/`).

use crate::args;
use crate::status::{Error, FencingError, Status, entry};
use fencing_runtime::accept;
use std::ffi::c_char;

/// `FENCING_GUARD_ABI_VERSION`: (major << 16) | minor.
pub const ABI_VERSION: u32 = 1 << 16;

/// `fencing_guard_abi_version`.
#[unsafe(no_mangle)]
pub extern "C" fn fencing_guard_abi_version() -> u32 {
    ABI_VERSION
}

/// `fencing_reason`.
#[unsafe(no_mangle)]
pub extern "C" fn fencing_reason(code: u32) -> *const c_char {
    crate::types::reason(code).map_or(std::ptr::null(), |r| r.as_ptr())
}

/// Writes `value` to `out`, or NULL's error.
///
/// # Safety
/// `out` is NULL or writable.
unsafe fn put<T>(out: *mut T, value: T) -> Result<(), Error> {
    // SAFETY: the caller's contract.
    let out = unsafe { out.as_mut() }.ok_or_else(|| Error::null("out"))?;
    *out = value;
    Ok(())
}

/// `fencing_check_name`.
///
/// # Safety
/// `name` is NULL or `len` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_check_name(name: *const c_char, len: usize, err: *mut FencingError) -> Status {
    entry(
        err,
        || (),
        || {
            let mut slot = String::new();
            // SAFETY: the caller's contract.
            unsafe { args::name_into(&mut slot, name, len, "name") }
        },
    )
}

/// `fencing_parse_policy`.
///
/// # Safety
/// `text` is NULL or `len` readable bytes; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_parse_policy(
    text: *const c_char,
    len: usize,
    out: *mut u32,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || (),
        || {
            // SAFETY: the caller's contract.
            let text = unsafe { args::bytes(text, len, "text") }?;
            let policy = accept::policy(text).map_err(|e| Error::argument("policy", e.code(), e))?;
            let code = match policy {
                fencing_runtime::Policy::NonDecreasing => 0,
                fencing_runtime::Policy::StrictlyIncreasing => 1,
            };
            // SAFETY: the caller's contract.
            unsafe { put(out, code) }
        },
    )
}

/// `fencing_parse_number`.
///
/// # Safety
/// `text` is NULL or `len` readable bytes; `out` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_parse_number(
    text: *const c_char,
    len: usize,
    out: *mut u64,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || (),
        || {
            // SAFETY: the caller's contract.
            let text = unsafe { args::bytes(text, len, "text") }?;
            let n = accept::number(text).map_err(|e| Error::argument("number", e.code(), e))?;
            // SAFETY: the caller's contract.
            unsafe { put(out, n) }
        },
    )
}

/// `fencing_parse_proof`.
///
/// # Safety
/// `text` is NULL or `len` readable bytes; `out` NULL or `capacity`
/// writable bytes; `out_len` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_parse_proof(
    text: *const c_char,
    len: usize,
    out: *mut u8,
    capacity: usize,
    out_len: *mut usize,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || (),
        || {
            if out_len.is_null() {
                return Err(Error::null("out_len"));
            }
            // SAFETY: the caller's contract (`accept::proof` bounds the length before decoding).
            let text = unsafe { args::bytes(text, len, "text") }?;
            let proof = accept::proof(text).map_err(|e| Error::argument("proof", e.code(), e))?;
            if proof.len() > capacity {
                return Err(Error::argument(
                    "capacity",
                    "count_too_large",
                    format!("is {capacity} bytes, the proof needs {}", proof.len()),
                ));
            }
            if !proof.is_empty() {
                // SAFETY: the caller's contract; `proof.len() <= capacity`.
                unsafe { args::slice_mut(out, proof.len(), "out") }?.copy_from_slice(&proof);
            }
            // SAFETY: checked non-NULL above.
            unsafe { put(out_len, proof.len()) }
        },
    )
}
