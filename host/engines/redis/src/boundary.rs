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
//! - error replies are sent through `text.rs` (NUL, CR and LF replaced),
//!   never through the `redis-module` crate's reply helpers.

use redis_module::{Context, RedisError, RedisString, raw};
use std::ffi::{CStr, c_int};
use std::mem::ManuallyDrop;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

static PANICS: AtomicU64 = AtomicU64::new(0);

/// How many calls panicked (each caught here and answered with an error),
/// and server events or RDB callbacks (caught where they enter).
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// Counts a panic caught outside a command.
pub fn panicked() {
    PANICS.fetch_add(1, Ordering::Relaxed);
}

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

impl From<String> for Refusal {
    fn from(text: String) -> Self {
        Refusal::Text(text)
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
        // The arguments are Redis's, borrowed for the call: wrapped without
        // a reference of their own and never freed here (a panic leaks the
        // vector, never frees a string twice).
        let args = ManuallyDrop::new(borrowed(argv, argc));
        let answer = handler(&context, &args);
        ManuallyDrop::into_inner(args).into_iter().for_each(std::mem::forget);
        answer
    }));
    let answer = answer.unwrap_or_else(|_| {
        PANICS.fetch_add(1, Ordering::Relaxed);
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

/// The command's arguments as [`RedisString`]s that hold no reference of
/// their own: they must never be dropped.
fn borrowed(argv: *mut *mut raw::RedisModuleString, argc: c_int) -> Vec<RedisString> {
    if argv.is_null() || argc <= 0 {
        return Vec::new();
    }
    let argv = unsafe { std::slice::from_raw_parts(argv, argc as usize) };
    argv.iter().map(|&s| RedisString::from_redis_module_string(std::ptr::null_mut(), s)).collect()
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

fn send_error(ctx: *mut raw::RedisModuleCtx, text: &str) {
    if let Some(f) = unsafe { raw::RedisModule_ReplyWithError } {
        let text = crate::text::line(text.as_bytes());
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
