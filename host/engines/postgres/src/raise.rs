//! A refusal's SQLSTATE, message and evidence, written once: the row
//! trigger raises them from Rust, and `fencing._refuse` (PL/pgSQL, for the
//! SQL functions) raises what `fencing._refusal` returns.
//!
//! pgrx reports errors raised in Rust with the SQLSTATEs PostgreSQL defines
//! only, so the trigger's refusals (class `FN`) are raised here, with
//! PostgreSQL's own `errstart`/`errfinish`, the way pgrx raises its errors.
//!
//! Invariant: [`refusal`] runs in the trigger's C entry point after the
//! decision, when no Rust value that needs dropping is alive on the stack:
//! `errfinish` leaves by `longjmp`, which runs no destructor. The message and
//! detail are copied into memory PostgreSQL owns first.

use crate::write::FenceRow;
use pgrx::prelude::*;
use std::ffi::{c_char, c_int};

unsafe extern "C-unwind" {
    fn errstart(elevel: c_int, domain: *const c_char) -> bool;
    fn errcode(sqlerrcode: c_int) -> c_int;
    fn errmsg(fmt: *const c_char, ...) -> c_int;
    fn errdetail(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

/// A refusal ready to raise: everything in PostgreSQL's memory.
#[derive(Clone, Copy)]
pub struct Raised {
    sqlstate: c_int,
    message: *mut c_char,
    detail: *mut c_char,
}

/// PostgreSQL's `MAKE_SQLSTATE` of a five-character code.
fn make_sqlstate(code: &[u8; 5]) -> c_int {
    code.iter().enumerate().map(|(i, &c)| (((c as c_int) - ('0' as c_int)) & 0x3F) << (6 * i)).sum()
}

/// A NUL-terminated copy of `s` in the current memory context.
fn pg_string(s: &str) -> *mut c_char {
    // SAFETY: palloc returns `len + 1` writable bytes or raises.
    unsafe {
        let out = pg_sys::palloc(s.len() + 1).cast::<u8>();
        std::ptr::copy_nonoverlapping(s.as_ptr(), out, s.len());
        *out.add(s.len()) = 0;
        out.cast()
    }
}

impl Raised {
    /// Copies the refusal into PostgreSQL's memory (message NUL bytes are dropped).
    pub fn new(sqlstate: &[u8; 5], message: &str, detail: &str) -> Raised {
        let clean = |s: &str| s.replace('\0', "");
        Raised {
            sqlstate: make_sqlstate(sqlstate),
            message: pg_string(&clean(message)),
            detail: pg_string(&clean(detail)),
        }
    }
}

/// Raises `r` as an ERROR; never returns.
///
/// # Safety
/// No Rust value with a destructor may be alive in any frame between here
/// and the C caller (see the module docs).
pub unsafe fn refusal(r: Raised) -> ! {
    const PERCENT_S: &std::ffi::CStr = c"%s";
    // SAFETY: the ereport sequence of PostgreSQL's own macro; the strings are
    // palloc'd and NUL-terminated. errfinish at ERROR does not return.
    unsafe {
        if errstart(pg_sys::PGERROR as c_int, std::ptr::null()) {
            errcode(r.sqlstate);
            errmsg(PERCENT_S.as_ptr(), r.message);
            errdetail(PERCENT_S.as_ptr(), r.detail);
            errfinish(c"trigger.rs".as_ptr(), 0, c"fencing_guard_row".as_ptr());
        }
        unreachable!("errfinish returned from an ERROR")
    }
}

/// A write the fence refused, with its evidence.
#[derive(Clone)]
pub struct Refusal {
    /// A rejection's reason, `no_token`, or `guard_failure`.
    pub reason: String,
    pub resource: String,
    pub lock: String,
    pub token: Option<i64>,
    pub sequence: Option<i64>,
    /// The fence the write was decided against.
    pub fence: Option<FenceRow>,
    pub failure: Option<String>,
}

impl Refusal {
    /// The refusal's SQLSTATE, message and JSON evidence.
    fn text(&self) -> (&'static [u8; 5], String, String) {
        let (token, resource) = (opt(self.token), &self.resource);
        let (fence_lock, high_water, last_sequence) = match &self.fence {
            Some(f) => (Some(f.lock.clone()), Some(f.high_water), f.sequence),
            None => (None, None, None),
        };
        let (state, message): (&[u8; 5], String) = match self.reason.as_str() {
            "stale_token" => (
                b"FN001",
                format!(
                    "fencing: stale token {token} for {resource}: a newer token ({}) has written it",
                    opt(high_water)
                ),
            ),
            "token_reused" => (
                b"FN002",
                format!("fencing: token {token} for {resource} was already used (strictly-increasing policy)"),
            ),
            "wrong_lock" => (
                b"FN003",
                format!(
                    "fencing: {resource} is bound to lock {}, not {}",
                    fence_lock.as_deref().unwrap_or(""),
                    self.lock
                ),
            ),
            "invalid_token" => {
                (b"FN004", format!("fencing: token {token} for {resource} is invalid (tokens start at 1)"))
            }
            "no_token" => (
                b"FN004",
                format!("fencing: no token presented for {resource}: set the token column, or SET LOCAL fencing.token"),
            ),
            "sequence_regressed" => (
                b"FN005",
                format!(
                    "fencing: sequence {} under token {token} for {resource} does not advance past {}",
                    opt(self.sequence),
                    opt(last_sequence)
                ),
            ),
            "proof_missing" => (
                b"FN006",
                format!(
                    "fencing: token {token} for {resource} comes without a proof, and this database verifies tokens \
                     (fencing.verify_keys): SET LOCAL fencing.proof to the grant's fencing_proof"
                ),
            ),
            "proof_malformed" => (
                b"FN007",
                format!("fencing: the proof presented with token {token} for {resource} is not a fencing proof"),
            ),
            "proof_unknown_key" => (
                b"FN008",
                format!(
                    "fencing: the proof presented with token {token} for {resource} names a key that \
                     fencing.verify_keys does not hold"
                ),
            ),
            "proof_bad" => (
                b"FN009",
                format!(
                    "fencing: the proof presented with token {token} for {resource} was not made for lock {} and \
                     that token: the lock service did not grant it",
                    self.lock
                ),
            ),
            _ => (
                b"FN010",
                format!(
                    "fencing: the guard could not decide the write to {resource} ({}); the write is refused",
                    self.failure.as_deref().unwrap_or("")
                ),
            ),
        };
        let reason = match self.reason.as_str() {
            "no_token" => "invalid_token",
            r => r,
        };
        let detail = serde_json::json!({
            "reason": reason, "resource": resource, "lock": self.lock, "presented": self.token,
            "sequence": self.sequence, "fence_lock": fence_lock, "high_water": high_water,
            "last_sequence": last_sequence, "failure": self.failure,
        });
        (state, message, detail.to_string())
    }

    /// The refusal in PostgreSQL's memory, ready for [`refusal`].
    pub fn raised(&self) -> Raised {
        let (state, message, detail) = self.text();
        Raised::new(state, &message, &detail)
    }
}

/// A number for a message, `none` when absent.
fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

/// The SQLSTATE, message and DETAIL of a refusal, for `fencing._refuse` to raise.
#[allow(clippy::too_many_arguments)]
#[pg_extern(name = "_refusal", immutable, parallel_safe)]
fn refusal_text(
    reason: &str,
    resource: Option<&str>,
    lock: Option<&str>,
    token: Option<i64>,
    sequence: Option<i64>,
    fence_lock: Option<&str>,
    high_water: Option<i64>,
    last_sequence: Option<i64>,
    failure: Option<&str>,
) -> TableIterator<'static, (name!(sqlstate, String), name!(message, String), name!(detail, String))> {
    let fence = match (fence_lock, high_water) {
        (Some(lock), Some(high_water)) => Some(FenceRow { lock: lock.to_owned(), high_water, sequence: last_sequence }),
        _ => None,
    };
    let refusal = Refusal {
        reason: reason.to_owned(),
        resource: resource.unwrap_or_default().to_owned(),
        lock: lock.unwrap_or_default().to_owned(),
        token,
        sequence,
        fence,
        failure: failure.map(str::to_owned),
    };
    let (state, message, detail) = refusal.text();
    TableIterator::once((String::from_utf8_lossy(state).into_owned(), message, detail))
}
