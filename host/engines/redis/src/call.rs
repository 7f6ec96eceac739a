//! Running a Redis command from the module (`RM_Call`), binary-safe.
//!
//! The command's name is checked here for a NUL byte before it becomes a C
//! string, and its reply is kept as Redis made it: passed on to the client
//! byte for byte ([`CallReply::send`]) or read as bytes, never through a
//! conversion that would turn a bulk string holding a NUL into a C string.

use redis_module::{Context, RedisString, raw};
use std::ffi::{CStr, CString, c_int};
use std::ptr::NonNull;

/// How a command runs: `RM_Call`'s format flags after `v` (the arguments as a vector).
pub struct Mode(&'static CStr);

/// As the calling client (its ACL user's rights), as a script would run it,
/// errors as replies, replicated as itself.
pub const AS_CALLER: Mode = Mode(c"v!ECS");
/// With the module's rights, errors as replies, nothing replicated (a
/// query, or a write the module replicates itself).
pub const LOCAL: Mode = Mode(c"vE");

/// A reply from `RM_Call`, freed when dropped.
pub struct CallReply(NonNull<raw::RedisModuleCallReply>);

impl Drop for CallReply {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeCallReply } {
            unsafe { free(self.0.as_ptr()) };
        }
    }
}

impl CallReply {
    fn kind(&self) -> c_int {
        unsafe {
            raw::RedisModule_CallReplyType.map_or(raw::REDISMODULE_REPLY_UNKNOWN as c_int, |f| f(self.0.as_ptr()))
        }
    }

    /// The bytes of a string, status or error reply.
    pub fn bytes(&self) -> Option<&[u8]> {
        bytes_of(self.0.as_ptr())
    }

    /// The elements of an array reply (empty for any other reply).
    pub fn elements(&self) -> Vec<Element<'_>> {
        elements_of(self.0.as_ptr())
    }

    /// Sends the reply to the calling client as Redis made it.
    pub fn send(self, ctx: *mut raw::RedisModuleCtx) {
        if let Some(f) = unsafe { raw::RedisModule_ReplyWithCallReply } {
            unsafe { f(ctx, self.0.as_ptr()) };
        }
    }
}

/// An element of an array reply, valid while its array is.
pub struct Element<'a>(NonNull<raw::RedisModuleCallReply>, std::marker::PhantomData<&'a CallReply>);

/// The elements of the array reply `reply` (none for any other reply).
fn elements_of<'a>(reply: *mut raw::RedisModuleCallReply) -> Vec<Element<'a>> {
    let kind = unsafe { raw::RedisModule_CallReplyType.map_or(raw::REDISMODULE_REPLY_UNKNOWN as c_int, |f| f(reply)) };
    if kind != raw::REDISMODULE_REPLY_ARRAY as c_int {
        return Vec::new();
    }
    let (Some(len), Some(at)) =
        (unsafe { raw::RedisModule_CallReplyLength }, unsafe { raw::RedisModule_CallReplyArrayElement })
    else {
        return Vec::new();
    };
    let n = unsafe { len(reply) };
    (0..n).filter_map(|i| NonNull::new(unsafe { at(reply, i) })).map(|p| Element(p, std::marker::PhantomData)).collect()
}

/// The bytes of the string, status or error reply `reply`.
fn bytes_of<'a>(reply: *mut raw::RedisModuleCallReply) -> Option<&'a [u8]> {
    let f = unsafe { raw::RedisModule_CallReplyStringPtr }?;
    let mut len = 0;
    let p = unsafe { f(reply, &mut len) };
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

impl<'a> Element<'a> {
    /// The bytes of a string element.
    pub fn bytes(&self) -> Option<&'a [u8]> {
        bytes_of(self.0.as_ptr())
    }

    /// The elements of an array element.
    pub fn elements(&self) -> Vec<Element<'a>> {
        elements_of(self.0.as_ptr())
    }
}

/// Runs `command args...` in `mode`; its reply, or its error reply's text.
pub fn call(ctx: &Context, mode: Mode, command: &[u8], args: &[&RedisString]) -> Result<CallReply, String> {
    let name = CString::new(command).map_err(|_| "ERR the command name contains a NUL byte".to_string())?;
    let Some(rm_call) = (unsafe { raw::RedisModule_Call }) else {
        return Err("ERR RedisModule_Call is missing".into());
    };
    let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
    let reply = unsafe { rm_call(ctx.get_raw(), name.as_ptr(), mode.0.as_ptr(), argv.as_mut_ptr(), argv.len()) };
    let Some(reply) = NonNull::new(reply) else {
        return Err(format!(
            "ERR the command {} could not run (errno {})",
            crate::text::escape(command),
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        ));
    };
    let reply = CallReply(reply);
    if reply.kind() == raw::REDISMODULE_REPLY_ERROR as c_int {
        return Err(String::from_utf8_lossy(reply.bytes().unwrap_or(b"ERR the command failed")).into_owned());
    }
    Ok(reply)
}
