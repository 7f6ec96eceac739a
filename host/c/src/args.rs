//! Reading a C caller's arguments by the rules of `fencing_runtime::accept`:
//! names as (pointer, length) bytes, policies, counts, proofs, slices.
//!
//! Names are checked once per thread and value: each thread keeps the last
//! fence and sequencer it decided ([`Scratch`]), whose lock names hold only
//! text that passed [`accept::name_bytes`]. A call whose name is byte for
//! byte the one already there (the common case: the same resource and lock,
//! write after write) skips the check and the copy; any other name is
//! checked, then copied in. The empty name is never in a slot's place (a
//! slot starts empty, and the empty text is always checked), so nothing is
//! admitted unchecked.

use crate::status::Error;
use crate::types::{CFence, CSequencer};
use fencing_runtime::accept::{self, MAX_NAME_CHARS, NameError};
use fencing_runtime::{Fence, Policy, Sequencer};
use std::cell::RefCell;
use std::ffi::c_char;

/// Longest proof taken as bytes (a proof is 37 or 69 bytes).
pub const MAX_PROOF_BYTES: usize = accept::MAX_PROOF_HEX / 2;

/// `FENCING_MAX_BATCH`.
pub const MAX_BATCH: usize = 1 << 20;

/// Longest text of keys taken by `fencing_guard_set_keys_text`.
pub const MAX_KEYS_TEXT: usize = 1 << 16;

/// A thread's last fence and sequencer, their lock names checked.
pub struct Scratch {
    pub fence: Fence,
    pub presented: Sequencer,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const {
        RefCell::new(Scratch {
            fence: Fence { lock: String::new(), high_water: 0, sequence: None },
            presented: Sequencer { lock: String::new(), token: 0, sequence: None },
        })
    };
}

/// Runs `f` with this thread's scratch.
pub fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> Result<R, Error>) -> Result<R, Error> {
    SCRATCH
        .try_with(|s| match s.try_borrow_mut() {
            Ok(mut s) => f(&mut s),
            Err(_) => Err(Error::new(crate::status::ERR_INTERNAL, "internal", "scratch in use: a call re-entered")),
        })
        .unwrap_or_else(|_| Err(Error::new(crate::status::ERR_INTERNAL, "internal", "called during thread exit")))
}

/// `len` bytes at `ptr`, or NULL's error. A NULL pointer with length 0 is
/// the empty slice.
///
/// # Safety
/// `ptr` is NULL or points to `len` readable bytes (the header's contract).
pub unsafe fn bytes<'a>(ptr: *const c_char, len: usize, what: &str) -> Result<&'a [u8], Error> {
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Error::null(what)) };
    }
    // SAFETY: the caller's contract above.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The name at (`ptr`, `len`) into `slot`, checked unless `slot` holds it already.
///
/// # Safety
/// As [`bytes`].
#[inline]
pub unsafe fn name_into(slot: &mut String, ptr: *const c_char, len: usize, what: &str) -> Result<(), Error> {
    // Longer than any name: refused unread, its length in bytes reported (as `name_bytes` does).
    if len > 4 * MAX_NAME_CHARS {
        let e = NameError::TooLong { chars: len };
        return Err(Error::argument(what, e.code(), e));
    }
    // SAFETY: the caller's contract.
    let given = unsafe { bytes(ptr, len, what) }?;
    if given.is_empty() || slot.as_bytes() != given {
        let name = accept::name_bytes(given).map_err(|e| Error::argument(what, e.code(), e))?;
        slot.clear();
        slot.push_str(name);
    }
    Ok(())
}

/// `current` into `scratch.fence`: `Ok(false)` for NULL (no fence).
///
/// # Safety
/// `current` is NULL or a valid `fencing_fence` whose name follows [`bytes`]'s contract.
#[inline]
pub unsafe fn fence_into(fence: &mut Fence, current: *const CFence, what: &str) -> Result<bool, Error> {
    // SAFETY: NULL or valid, the caller's contract.
    let Some(c) = (unsafe { current.as_ref() }) else { return Ok(false) };
    // SAFETY: as above.
    unsafe { name_into(&mut fence.lock, c.lock, c.lock_len, what) }?;
    fence.high_water = c.high_water;
    fence.sequence = (c.has_sequence != 0).then_some(c.sequence);
    Ok(true)
}

/// `presented` into `scratch.presented`.
///
/// # Safety
/// `presented` is NULL or a valid `fencing_sequencer` whose name follows [`bytes`]'s contract.
#[inline]
pub unsafe fn sequencer_into(seq: &mut Sequencer, presented: *const CSequencer) -> Result<(), Error> {
    // SAFETY: NULL or valid, the caller's contract.
    let c = unsafe { presented.as_ref() }.ok_or_else(|| Error::null("presented"))?;
    // SAFETY: as above.
    unsafe { name_into(&mut seq.lock, c.lock, c.lock_len, "presented.lock") }?;
    seq.token = c.token;
    seq.sequence = (c.has_sequence != 0).then_some(c.sequence);
    Ok(())
}

/// A `fencing_policy`.
#[inline]
pub fn policy(p: u32) -> Result<Policy, Error> {
    match p {
        0 => Ok(Policy::NonDecreasing),
        1 => Ok(Policy::StrictlyIncreasing),
        _ => Err(Error::argument(
            "policy",
            "policy_unknown",
            format!("{p} is not FENCING_NON_DECREASING (0) or FENCING_STRICTLY_INCREASING (1)"),
        )),
    }
}

/// A count of writes or tokens: 1 to [`MAX_BATCH`].
pub fn count(n: usize, what: &str) -> Result<usize, Error> {
    match n {
        0 => Err(Error::argument(what, "count_zero", "is 0: give at least one")),
        n if n > MAX_BATCH => Err(Error::argument(what, "count_too_large", format!("is {n}, more than {MAX_BATCH}"))),
        n => Ok(n),
    }
}

/// `n` items at `ptr` (`n` already bounded by [`count`]).
///
/// # Safety
/// `ptr` is NULL or points to `n` readable `T`s.
pub unsafe fn slice<'a, T>(ptr: *const T, n: usize, what: &str) -> Result<&'a [T], Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// `n` writable items at `ptr`.
///
/// # Safety
/// `ptr` is NULL or points to `n` writable `T`s that nothing else uses during the call.
pub unsafe fn slice_mut<'a, T>(ptr: *mut T, n: usize, what: &str) -> Result<&'a mut [T], Error> {
    if ptr.is_null() {
        return Err(Error::null(what));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, n) })
}

/// A proof's bytes: NULL with 0 is no proof; at most [`MAX_PROOF_BYTES`].
///
/// # Safety
/// As [`bytes`].
pub unsafe fn proof<'a>(ptr: *const u8, len: usize) -> Result<&'a [u8], Error> {
    if len > MAX_PROOF_BYTES {
        return Err(Error::argument(
            "proof",
            "proof_too_long",
            format!("is {len} bytes, more than {MAX_PROOF_BYTES} (a proof is 37 or 69 bytes)"),
        ));
    }
    // SAFETY: the caller's contract.
    unsafe { bytes(ptr.cast(), len, "proof") }
}
