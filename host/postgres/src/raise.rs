//! Raising a refusal with its own SQLSTATE from the row trigger.
//!
//! pgrx reports errors raised in Rust with the SQLSTATEs PostgreSQL defines
//! only, so the refusals (class `FN`) are raised here, with PostgreSQL's own
//! `errstart`/`errfinish`, the way pgrx raises its errors.
//!
//! Invariant: [`refusal`] runs in the trigger's C entry point after the
//! decision, when no Rust value that needs dropping is alive on the stack:
//! `errfinish` leaves by `longjmp`, which runs no destructor. The message and
//! detail are copied into memory PostgreSQL owns first.

use pgrx::pg_sys;
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
