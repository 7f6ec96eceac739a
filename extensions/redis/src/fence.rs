//! A key's fence: the hash `fencing:fence:<key>` beside it (fields `lock`,
//! `high_water`, `sequence`; named in `keys.rs`), in the keyspace, so RDB,
//! AOF and replication carry it like the data. Ordinary commands can write
//! it too; the docs say to keep the `fencing:` prefix out of applications'
//! writes (an ACL key pattern does it).

use crate::keys;
use fencing_runtime::Fence;
use redis_module::{CallOptionsBuilder, CallReply, CallResult, Context, RedisError, RedisString, RedisValue};

/// The fence stored for `key`, if any.
pub fn read(ctx: &Context, key: &RedisString) -> Result<Option<Fence>, RedisError> {
    let name = keys::fence(ctx, key.as_slice());
    let fields = ctx.call(
        "HMGET",
        &[&name, &ctx.create_string("lock"), &ctx.create_string("high_water"), &ctx.create_string("sequence")],
    )?;
    let RedisValue::Array(values) = fields else {
        return Err(RedisError::Str("ERR the fence could not be read"));
    };
    let text = reply_bytes;
    let (Some(lock), Some(high_water)) = (values.first().and_then(text), values.get(1).and_then(text)) else {
        return Ok(None);
    };
    let corrupt = || {
        RedisError::String(format!(
            "FENCE_CORRUPT the fence of this key ({}) is not the module's",
            String::from_utf8_lossy(name.as_slice())
        ))
    };
    let lock = String::from_utf8(lock).map_err(|_| corrupt())?;
    let high_water = std::str::from_utf8(&high_water).ok().and_then(|s| s.parse().ok()).ok_or_else(corrupt)?;
    let sequence = match values.get(2).and_then(text) {
        None => None,
        Some(s) => Some(std::str::from_utf8(&s).ok().and_then(|s| s.parse().ok()).ok_or_else(corrupt)?),
    };
    Ok(Some(Fence { lock, high_water, sequence }))
}

/// The bytes of a string reply (however the binding hands it back), or `None`.
pub fn reply_bytes(v: &RedisValue) -> Option<Vec<u8>> {
    match v {
        RedisValue::SimpleString(s) | RedisValue::BulkString(s) => Some(s.clone().into_bytes()),
        RedisValue::SimpleStringStatic(s) => Some(s.as_bytes().to_vec()),
        RedisValue::StringBuffer(b) => Some(b.clone()),
        RedisValue::BulkRedisString(s) => Some(s.as_slice().to_vec()),
        _ => None,
    }
}

/// Whose rights a write runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// The module's: its own keys, and the write a fenced command names.
    Module,
    /// The calling client's, as a script would run it: `FENCING.EXEC`'s
    /// command, which the caller's ACL user must be allowed to run on its key.
    Caller,
}

/// Runs `command` with `args` with the module's rights, replicated to
/// replicas and the AOF as itself (an effect, never the fenced command that a
/// replica would decide again).
pub fn replicated(ctx: &Context, command: &str, args: &[&RedisString]) -> Result<RedisValue, RedisError> {
    run(ctx, RunAs::Module, command, args)
}

/// Runs `command` with `args` as `who`, replicated as itself.
pub fn run(ctx: &Context, who: RunAs, command: &str, args: &[&RedisString]) -> Result<RedisValue, RedisError> {
    let mut options = CallOptionsBuilder::new().replicate().errors_as_replies();
    if who == RunAs::Caller {
        options = options.verify_acl().script_mode();
    }
    let result: CallResult = ctx.call_ext(command, &options.build(), args);
    match result {
        Ok(reply) => Ok(value_of(&reply)),
        Err(e) => Err(RedisError::String(e.to_utf8_string().unwrap_or_else(|| "ERR the write failed".into()))),
    }
}

fn value_of(reply: &CallReply) -> RedisValue {
    RedisValue::from(reply)
}

/// Stores `fence` for `key` (replicated), where `before` was stored.
pub fn write(ctx: &Context, key: &RedisString, before: Option<&Fence>, fence: &Fence) -> Result<(), RedisError> {
    let name = keys::fence(ctx, key.as_slice());
    let s = |v: &str| ctx.create_string(v);
    let (lock, hw) = (s(&fence.lock), s(&fence.high_water.to_string()));
    let (f_lock, f_hw, f_seq) = (s("lock"), s("high_water"), s("sequence"));
    match fence.sequence {
        Some(seq) => {
            let seq = s(&seq.to_string());
            replicated(ctx, "HSET", &[&name, &f_lock, &lock, &f_hw, &hw, &f_seq, &seq])?;
        }
        None => {
            replicated(ctx, "HSET", &[&name, &f_lock, &lock, &f_hw, &hw])?;
            if before.is_some_and(|b| b.sequence.is_some()) {
                replicated(ctx, "HDEL", &[&name, &f_seq])?;
            }
        }
    }
    Ok(())
}

/// Removes `key`'s fence (replicated).
pub fn remove(ctx: &Context, key: &RedisString) -> Result<(), RedisError> {
    replicated(ctx, "DEL", &[&keys::fence(ctx, key.as_slice())])?;
    Ok(())
}
