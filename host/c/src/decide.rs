//! The decisions: `fencing_admit`, `fencing_admit_signed`,
//! `fencing_admit_batch` and `fencing_admit_stream`, each the runtime's
//! [`Guard`] call between reading the caller's arguments (`args.rs`) and
//! writing its verdicts (`types.rs`).
//!
//! Invariant: a call that returns anything but `FENCING_OK` has written
//! "not decided" into every verdict it was given (when the pointer and
//! count were usable), so a caller that forgets the status still refuses.

use crate::args::{self, with_scratch};
use crate::guard::Handle;
use crate::guard::handle;
use crate::status::{ERR_GUARD, Error, FencingError, Status, entry};
use crate::types::{CFence, CFenceState, CSequencer, CVerdict, CWrite};
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{BatchWrite, Guard, GuardFailure};
use std::ffi::c_char;

fn failure(f: GuardFailure) -> Error {
    Error::new(ERR_GUARD, f.reason(), format!("the guard could not decide, refuse the write: {f}"))
}

/// Writes "not decided" into `out` if it is not NULL.
fn undecided(out: *mut CVerdict) {
    // SAFETY: NULL or the caller's writable verdict.
    if let Some(v) = unsafe { out.as_mut() } {
        *v = CVerdict::not_decided();
    }
}

/// Writes "not decided" into `n` verdicts at `out` when `n` is a usable count.
fn all_undecided(out: *mut CVerdict, n: usize) {
    if let Ok(n) = args::count(n, "count") {
        // SAFETY: NULL or the caller's `n` writable verdicts.
        if let Ok(vs) = unsafe { args::slice_mut(out, n, "verdicts") } {
            vs.fill(CVerdict::not_decided());
        }
    }
}

/// `fencing_admit`.
///
/// # Safety
/// As the header says: every pointer NULL or valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_admit(
    guard: *const Handle,
    current: *const CFence,
    presented: *const CSequencer,
    policy: u32,
    out: *mut CVerdict,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || undecided(out),
        || {
            // SAFETY: the caller's contract, for every pointer below.
            let handle = unsafe { handle(guard) }?;
            if out.is_null() {
                return Err(Error::null("out"));
            }
            let policy = args::policy(policy)?;
            let verdict = with_scratch(|s| {
                let fenced = unsafe { args::fence_into(&mut s.fence, current, "current.lock") }?;
                unsafe { args::sequencer_into(&mut s.presented, presented) }?;
                let decision = handle.guard.admit(fenced.then_some(&s.fence), &s.presented, policy).map_err(failure)?;
                Ok(CVerdict::of(&decision))
            })?;
            unsafe { *out = verdict };
            Ok(())
        },
    )
}

/// `fencing_admit_signed`.
///
/// # Safety
/// As the header says: every pointer NULL or valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_admit_signed(
    guard: *const Handle,
    current: *const CFence,
    presented: *const CSequencer,
    proof: *const u8,
    proof_len: usize,
    policy: u32,
    out: *mut CVerdict,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || undecided(out),
        || {
            // SAFETY: the caller's contract, for every pointer below.
            let handle = unsafe { handle(guard) }?;
            if out.is_null() {
                return Err(Error::null("out"));
            }
            let policy = args::policy(policy)?;
            let proof = unsafe { args::proof(proof, proof_len) }?;
            let verdict = with_scratch(|s| {
                let fenced = unsafe { args::fence_into(&mut s.fence, current, "current.lock") }?;
                unsafe { args::sequencer_into(&mut s.presented, presented) }?;
                let keys = handle.keys.read().unwrap_or_else(|e| e.into_inner());
                // Signing on and no keys: the rules refuse every signed write.
                let Some(verifier) = keys.as_ref() else {
                    return Ok(CVerdict::of_signed(&Err(SignedRejection::Proof(ProofRejection::NoKeys))));
                };
                let decision = handle
                    .guard
                    .admit_signed(verifier, fenced.then_some(&s.fence), &s.presented, proof, policy)
                    .map_err(failure)?;
                Ok(CVerdict::of_signed(&decision))
            })?;
            unsafe { *out = verdict };
            Ok(())
        },
    )
}

/// `fencing_admit_batch`.
///
/// # Safety
/// As the header says: every pointer NULL or valid for the call, `writes`
/// and `verdicts` `count` long.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_admit_batch(
    guard: *const Handle,
    current: *const CFence,
    lock: *const c_char,
    lock_len: usize,
    writes: *const CWrite,
    count: usize,
    policy: u32,
    verdicts: *mut CVerdict,
    after: *mut CFenceState,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || all_undecided(verdicts, count),
        || {
            // SAFETY: the caller's contract, for every pointer below.
            let handle = unsafe { handle(guard) }?;
            let n = args::count(count, "count")?;
            let given = unsafe { args::slice(writes, n, "writes") }?;
            let out = unsafe { args::slice_mut(verdicts, n, "verdicts") }?;
            let policy = args::policy(policy)?;
            let writes: Vec<BatchWrite> = given
                .iter()
                .map(|w| BatchWrite { token: w.token, sequence: (w.has_sequence != 0).then_some(w.sequence) })
                .collect();
            let outcome = with_scratch(|s| {
                let fenced = unsafe { args::fence_into(&mut s.fence, current, "current.lock") }?;
                unsafe { args::name_into(&mut s.presented.lock, lock, lock_len, "lock") }?;
                handle
                    .guard
                    .admit_batch(fenced.then_some(&s.fence), &s.presented.lock, &writes, policy)
                    .map_err(failure)
            })?;
            for (o, d) in out.iter_mut().zip(&outcome.verdicts) {
                *o = CVerdict::of(d);
            }
            if let Some(after) = unsafe { after.as_mut() } {
                let (high_water, sequence) = outcome.fence.map_or((0, None), |f| (f.high_water, f.sequence));
                *after = CFenceState {
                    high_water,
                    sequence: sequence.unwrap_or(0),
                    has_fence: u8::from(outcome.fence.is_some()),
                    has_sequence: u8::from(sequence.is_some()),
                    reserved: [0; 6],
                };
            }
            Ok(())
        },
    )
}

/// `fencing_admit_stream`.
///
/// # Safety
/// As the header says: every pointer NULL or valid for the call, `tokens`
/// and `verdicts` `count` long.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencing_admit_stream(
    guard: *const Handle,
    high_water: u64,
    tokens: *const u64,
    count: usize,
    policy: u32,
    verdicts: *mut CVerdict,
    high_water_after: *mut u64,
    err: *mut FencingError,
) -> Status {
    entry(
        err,
        || all_undecided(verdicts, count),
        || {
            // SAFETY: the caller's contract, for every pointer below.
            let handle = unsafe { handle(guard) }?;
            let n = args::count(count, "count")?;
            let tokens = unsafe { args::slice(tokens, n, "tokens") }?;
            let out = unsafe { args::slice_mut(verdicts, n, "verdicts") }?;
            let policy = args::policy(policy)?;
            let outcome = handle.guard.admit_stream(high_water, tokens, policy).map_err(failure)?;
            // The evidence of each token is the mark before it: the largest of
            // the starting mark and the tokens before it.
            let mut mark = high_water;
            for ((o, &v), &t) in out.iter_mut().zip(&outcome.verdicts).zip(tokens) {
                *o = CVerdict::of_stream(v, t, mark);
                mark = mark.max(t);
            }
            if let Some(after) = unsafe { high_water_after.as_mut() } {
                *after = outcome.high_water;
            }
            Ok(())
        },
    )
}
