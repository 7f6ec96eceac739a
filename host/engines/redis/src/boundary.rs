//! The module's edge with Redis: every command enters here, and every reply
//! and log line leaves from here, so that nothing a client sends can take
//! redis-server down.
//!
//! Invariants:
//! - no panic crosses into Redis: each command runs under `catch_unwind`,
//!   and a command that panicked answers `ERR internal error ...` (so do
//!   the server events and the RDB callbacks, in `events.rs` and
//!   `persist.rs`);
//! - a reply is built whole ([`Reply`]) before its first byte is written,
//!   so a panic never leaves half an answer on the connection;
//! - no client-supplied byte reaches an API that wants a C string: error
//!   replies and status lines have NUL, CR and LF replaced here, log lines
//!   are passed as the argument of a fixed `%s` format (never as the format),
//!   with client text escaped by [`escape`]. The `redis-module` crate's own
//!   helpers are not used for these: they `unwrap()` a `CString` (a NUL
//!   aborts the server), narrow a character above U+00FF to one byte (which
//!   can make a NUL or a line break), and hand the log line to `printf` as
//!   its format.

use redis_module::{Context, RedisError, RedisString, raw};
use std::ffi::{CStr, CString, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A reply, built whole before it is sent.
pub enum Reply {
    /// A status line (`+OK`).
    Status(&'static CStr),
    Int(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
    /// A reply Redis made (`RM_Call`), passed on as it is.
    Forward(crate::call::CallReply),
}

/// Why a command was refused: Redis's arity error, or an error reply's text
/// (its first word the reason: `STALE_TOKEN`, `ERR`, ...).
#[derive(Debug)]
pub enum Refusal {
    Arity,
    Text(String),
}

impl Refusal {
    pub fn new(text: impl Into<String>) -> Self {
        Refusal::Text(text.into())
    }
}

impl From<RedisError> for Refusal {
    fn from(e: RedisError) -> Self {
        match e {
            RedisError::WrongArity => Refusal::Arity,
            e => Refusal::Text(e.to_string()),
        }
    }
}

pub type Answer = Result<Reply, Refusal>;

/// A command's handler: the context and the arguments (the command's name first).
pub type Handler = fn(&Context, &[RedisString]) -> Answer;

/// Runs `handler` for one call of a command and sends its answer; a panic
/// is caught and answered with an error.
pub fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    handler: Handler,
) -> c_int {
    let answer = catch_unwind(AssertUnwindSafe(|| {
        let context = Context::new(ctx);
        let args = redis_module::decode_args(ctx, argv, argc);
        handler(&context, &args)
    }));
    let answer = answer.unwrap_or_else(|_| {
        crate::stats::panicked();
        Err(Refusal::new("ERR internal error in the fencing module; the command's effects stop where it failed"))
    });
    match answer {
        Ok(reply) => send(ctx, reply),
        Err(Refusal::Arity) => {
            if let Some(f) = unsafe { raw::RedisModule_WrongArity } {
                unsafe { f(ctx) };
            }
        }
        Err(Refusal::Text(text)) => send_error(ctx, &text),
    }
    raw::Status::Ok as c_int
}

/// Registers `handler` as `name` (flags and key positions as Redis takes
/// them); the `extern "C"` entry is made by [`command!`](crate::command).
pub fn register(
    ctx: *mut raw::RedisModuleCtx,
    name: &CStr,
    entry: raw::RedisModuleCmdFunc,
    flags: &CStr,
    keys: (c_int, c_int, c_int),
) -> Result<(), String> {
    let Some(create) = (unsafe { raw::RedisModule_CreateCommand }) else {
        return Err("RedisModule_CreateCommand is missing".into());
    };
    let status = unsafe { create(ctx, name.as_ptr(), entry, flags.as_ptr(), keys.0, keys.1, keys.2) };
    if status == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err(format!("could not register the command {}", name.to_string_lossy()))
    }
}

/// The `extern "C"` entry of a handler: `command!(writes::set)`.
#[macro_export]
macro_rules! command {
    ($handler:path) => {{
        extern "C" fn entry(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::ffi::c_int,
        ) -> std::ffi::c_int {
            $crate::boundary::dispatch(ctx, argv, argc, $handler)
        }
        Some(entry as unsafe extern "C" fn(_, _, _) -> _)
    }};
}

/// `text` with the bytes a RESP line or a C string cannot carry (NUL, CR, LF) made spaces.
fn line(text: &[u8]) -> CString {
    let bytes: Vec<u8> = text.iter().map(|&b| if matches!(b, 0 | b'\r' | b'\n') { b' ' } else { b }).collect();
    CString::new(bytes).unwrap_or_default()
}

fn send_error(ctx: *mut raw::RedisModuleCtx, text: &str) {
    if let Some(f) = unsafe { raw::RedisModule_ReplyWithError } {
        let text = line(text.as_bytes());
        unsafe { f(ctx, text.as_ptr()) };
    }
}

fn send(ctx: *mut raw::RedisModuleCtx, reply: Reply) {
    // The functions exist in every Redis the module loads into (7.0 on);
    // a missing one sends nothing rather than failing.
    unsafe {
        match reply {
            Reply::Status(s) => {
                if let Some(f) = raw::RedisModule_ReplyWithSimpleString {
                    f(ctx, s.as_ptr());
                }
            }
            Reply::Int(n) => {
                if let Some(f) = raw::RedisModule_ReplyWithLongLong {
                    f(ctx, n);
                }
            }
            Reply::Bulk(b) => {
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(ctx, b.as_ptr().cast(), b.len());
                }
            }
            Reply::Nil => {
                if let Some(f) = raw::RedisModule_ReplyWithNull {
                    f(ctx);
                }
            }
            Reply::Array(items) => {
                if let Some(f) = raw::RedisModule_ReplyWithArray {
                    f(ctx, items.len() as std::ffi::c_long);
                }
                for item in items {
                    send(ctx, item);
                }
            }
            Reply::Forward(reply) => reply.send(ctx),
        }
    }
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
    log(ctx.ctx, c"warning", message);
}
