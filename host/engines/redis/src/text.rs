//! Client text on its way out of the module: escaped for evidence and log
//! lines, and made a C string only after NUL, CR and LF are gone.
//!
//! Invariant: no client-supplied byte reaches an API that wants a C string
//! unchanged, and log lines are the argument of a fixed `%s` format, never
//! the format. The `redis-module` crate's own helpers are not used for
//! these: they `unwrap()` a `CString` (a NUL aborts the server), narrow a
//! character above U+00FF to one byte (which can make a NUL or a line
//! break), and hand the log line to `printf` as its format.

use redis_module::{Context, raw};
use std::ffi::{CStr, CString};

/// `text` with the bytes a RESP line or a C string cannot carry (NUL, CR, LF) made spaces.
pub fn line(text: &[u8]) -> CString {
    let bytes: Vec<u8> = text.iter().map(|&b| if matches!(b, 0 | b'\r' | b'\n') { b' ' } else { b }).collect();
    CString::new(bytes).unwrap_or_default()
}

/// Client-supplied bytes as printable ASCII for a log line or an error's
/// evidence: anything else as `\xNN` (quotes and backslashes escaped).
pub fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Writes `message` to Redis's log at `level` (`warning`, `notice`).
pub fn log(ctx: *mut raw::RedisModuleCtx, level: &CStr, message: &str) {
    let text = line(message.as_bytes());
    if let Some(f) = unsafe { raw::RedisModule_Log } {
        unsafe { f(ctx, level.as_ptr(), c"%s".as_ptr(), text.as_ptr()) };
    }
}

/// A warning in Redis's log.
pub fn warn(ctx: &Context, message: &str) {
    log(ctx.get_raw(), c"warning", message);
}
