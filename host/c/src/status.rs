//! Statuses, the caller's `fencing_error`, and [`entry`]: the one way into
//! the library, which turns an [`Error`] or a caught panic into a status and
//! its text.
//!
//! Invariants:
//! - every exported function's body runs inside [`entry`] (or is a constant
//!   with nothing that can panic), so no panic unwinds into C or C++;
//! - a caller's `fencing_error` is written on every call, success included,
//!   so its text never carries over from an earlier call;
//! - a message never holds a caller's name or proof bytes: the rules' texts
//!   name the field, the rule and the bound, never the value.

use std::ffi::c_char;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `fencing_status`.
pub type Status = i32;

pub const OK: Status = 0;
pub const ERR_NULL: Status = 1;
pub const ERR_ARGUMENT: Status = 2;
pub const ERR_KEYS: Status = 3;
pub const ERR_GUARD: Status = 4;
pub const ERR_LOAD: Status = 5;
pub const ERR_INTERNAL: Status = 6;

/// `FENCING_REASON_BYTES`.
pub const REASON_BYTES: usize = 32;
/// `FENCING_MESSAGE_BYTES`.
pub const MESSAGE_BYTES: usize = 256;

/// `fencing_error`.
#[repr(C)]
pub struct FencingError {
    pub status: Status,
    pub reason: [c_char; REASON_BYTES],
    pub message: [c_char; MESSAGE_BYTES],
}

/// Why a call failed: its status, its stable reason and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, reason: &'static str, message: impl Into<String>) -> Error {
        Error { status, reason, message: message.into() }
    }

    /// A required pointer that is NULL.
    pub fn null(what: &str) -> Error {
        Error::new(ERR_NULL, "null_argument", format!("{what} is NULL"))
    }

    /// An argument refused by a rule of `fencing_runtime::accept` (whose
    /// text ends with the code in parentheses).
    pub fn argument(what: &str, code: &'static str, why: impl fmt::Display) -> Error {
        Error::new(ERR_ARGUMENT, code, format!("{what} {why}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

/// Runs one exported call: its result, or its error written to `err`, or a
/// panic caught and reported as `ERR_INTERNAL`. `on_error` runs before an
/// error is returned (it writes "not decided" into the caller's verdicts).
pub fn entry(err: *mut FencingError, on_error: impl FnOnce(), call: impl FnOnce() -> Result<(), Error>) -> Status {
    let outcome = match catch_unwind(AssertUnwindSafe(call)) {
        Ok(result) => result,
        Err(payload) => Err(panicked(payload.as_ref())),
    };
    match outcome {
        Ok(()) => {
            write_error(err, OK, "", "");
            OK
        }
        Err(e) => {
            // Best effort: a panic here must not escape either.
            let _ = catch_unwind(AssertUnwindSafe(on_error));
            write_error(err, e.status, e.reason, &e.message);
            e.status
        }
    }
}

/// The error a caught panic becomes.
fn panicked(payload: &(dyn std::any::Any + Send)) -> Error {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    Error::new(ERR_INTERNAL, "internal", format!("internal fault in libfencing_guard, caught at its boundary: {what}"))
}

/// Writes the status and texts into `err` when it is not NULL.
fn write_error(err: *mut FencingError, status: Status, reason: &str, message: &str) {
    if err.is_null() {
        return;
    }
    // SAFETY: the caller passes NULL or a pointer to its own `fencing_error`,
    // writable for the duration of the call (the header's contract).
    let err = unsafe { &mut *err };
    err.status = status;
    copy_text(&mut err.reason, reason);
    copy_text(&mut err.message, message);
}

/// `text` into `out` as NUL-terminated bytes, cut at a character boundary.
fn copy_text(out: &mut [c_char], text: &str) {
    let mut end = text.len().min(out.len() - 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    for (o, b) in out.iter_mut().zip(&text.as_bytes()[..end]) {
        *o = *b as c_char;
    }
    out[end] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn blank() -> FencingError {
        FencingError { status: -1, reason: [1; REASON_BYTES], message: [1; MESSAGE_BYTES] }
    }

    fn text(bytes: &[c_char]) -> String {
        // SAFETY: copy_text always leaves a NUL inside the array.
        unsafe { CStr::from_ptr(bytes.as_ptr()) }.to_str().unwrap().to_string()
    }

    #[test]
    fn a_panic_becomes_an_internal_error_with_its_text() {
        let mut err = blank();
        let mut cleaned = false;
        let status = entry(&mut err, || cleaned = true, || panic!("boom at the boundary"));
        assert_eq!(status, ERR_INTERNAL);
        assert!(cleaned, "on_error ran");
        assert_eq!(err.status, ERR_INTERNAL);
        assert_eq!(text(&err.reason), "internal");
        assert!(text(&err.message).ends_with("boom at the boundary"), "{}", text(&err.message));
        // A formatted panic message (a String payload), and a panic in on_error too.
        let status = entry(&mut err, || panic!("again"), || panic!("{} {}", "formatted", 7));
        assert_eq!(status, ERR_INTERNAL);
        assert!(text(&err.message).ends_with("formatted 7"));
    }

    #[test]
    fn success_clears_the_callers_error_and_errors_fill_it() {
        let mut err = blank();
        assert_eq!(entry(&mut err, || (), || Ok(())), OK);
        assert_eq!((err.status, text(&err.reason), text(&err.message)), (OK, String::new(), String::new()));
        let status = entry(&mut err, || (), || Err(Error::null("presented")));
        assert_eq!(status, ERR_NULL);
        assert_eq!((text(&err.reason), text(&err.message)), ("null_argument".into(), "presented is NULL".into()));
        assert_eq!(entry(std::ptr::null_mut(), || (), || Err(Error::null("x"))), ERR_NULL);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let mut out = [0 as c_char; 8];
        copy_text(&mut out, "abcdef\u{1F512}");
        assert_eq!(text(&out), "abcdef");
        copy_text(&mut out, "abc");
        assert_eq!(text(&out), "abc");
    }
}
