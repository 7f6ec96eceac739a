//! A key's fence: the hash `fencing:fence:<key>` beside it (fields `lock`,
//! `high_water`, `sequence`; named in `keys.rs`), in the keyspace, so RDB,
//! AOF and replication carry it like the data. Ordinary commands can write
//! it too; the docs say to keep the `fencing:` prefix out of applications'
//! writes (an ACL key pattern does it).

use fencing_runtime::Fence;
use redis_module::raw::KeyType;
use redis_module::{CallOptionsBuilder, CallResult, Context, RedisError, RedisString, RedisValue};

/// The fields of a fence's hash.
const FIELDS: [&str; 3] = ["lock", "high_water", "sequence"];

/// The values of `fields` in the hash `name`, read directly (not through a
/// command); `None` when there is no such key, an error when it is not a hash.
pub fn hash_fields<const N: usize>(
    ctx: &Context,
    name: &RedisString,
    fields: &[&str; N],
) -> Result<Option<[Option<RedisString>; N]>, RedisError> {
    let hash = ctx.open_key(name);
    let Some(values) = hash.hash_get_multi::<_, RedisString>(fields)? else {
        return Ok(None);
    };
    let mut out: [Option<RedisString>; N] = std::array::from_fn(|_| None);
    for (field, value) in values {
        if let Some(i) = fields.iter().position(|f| *f == field) {
            out[i] = Some(value);
        }
    }
    Ok(Some(out))
}

/// The fence stored in the hash `name` (`keys::fence`), if any. A fence is
/// read and written directly: it is on the path of every fenced write.
pub fn read(ctx: &Context, name: &RedisString) -> Result<Option<Fence>, RedisError> {
    let corrupt = || {
        RedisError::String(format!(
            "FENCE_CORRUPT the fence of this key ({}) is not the module's",
            String::from_utf8_lossy(name.as_slice())
        ))
    };
    let Some([lock, high_water, sequence]) = hash_fields(ctx, name, &FIELDS).map_err(|_| corrupt())? else {
        return Ok(None);
    };
    let number = |v: RedisString| std::str::from_utf8(v.as_slice()).ok().and_then(|s| s.parse::<u64>().ok());
    let lock = lock.and_then(|l| String::from_utf8(l.as_slice().to_vec()).ok()).ok_or_else(corrupt)?;
    let high_water = high_water.and_then(number).ok_or_else(corrupt)?;
    let sequence = match sequence {
        None => None,
        Some(s) => Some(number(s).ok_or_else(corrupt)?),
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
        Ok(reply) => Ok(RedisValue::from(&reply)),
        Err(e) => Err(RedisError::String(e.to_utf8_string().unwrap_or_else(|| "ERR the write failed".into()))),
    }
}

/// Stores `fence` in the hash `name`, where `before` was stored, and
/// replicates it as the `HSET` (and `HDEL`) that it is.
pub fn write(ctx: &Context, name: &RedisString, before: Option<&Fence>, fence: &Fence) -> Result<(), RedisError> {
    let s = |v: &str| ctx.create_string(v);
    let (lock, high_water) = (s(&fence.lock), s(&fence.high_water.to_string()));
    let sequence = fence.sequence.map(|n| s(&n.to_string()));
    let drop_sequence = sequence.is_none() && before.is_some_and(|b| b.sequence.is_some());
    let hash = ctx.open_key_writable(name);
    if !matches!(hash.key_type(), KeyType::Hash | KeyType::Empty) {
        return Err(RedisError::String(format!(
            "FENCE_CORRUPT the fence of this key ({}) is not a hash",
            String::from_utf8_lossy(name.as_slice())
        )));
    }
    // RM_HashSet's count says whether a field existed, not whether it was set;
    // with the type checked above it cannot fail.
    let _ = hash.hash_set(FIELDS[0], lock.clone());
    let _ = hash.hash_set(FIELDS[1], high_water.clone());
    if let Some(n) = &sequence {
        let _ = hash.hash_set(FIELDS[2], n.clone());
    } else if drop_sequence {
        let _ = hash.hash_del(FIELDS[2]);
    }
    drop(hash);
    let (f_lock, f_hw, f_seq) = (s(FIELDS[0]), s(FIELDS[1]), s(FIELDS[2]));
    match &sequence {
        Some(n) => ctx.replicate("HSET", &[name, &f_lock, &lock, &f_hw, &high_water, &f_seq, n][..]),
        None => ctx.replicate("HSET", &[name, &f_lock, &lock, &f_hw, &high_water][..]),
    }
    if drop_sequence {
        ctx.replicate("HDEL", &[name, &f_seq][..]);
    }
    Ok(())
}

/// Removes the fence `name` (replicated).
pub fn remove(ctx: &Context, name: &RedisString) -> Result<(), RedisError> {
    replicated(ctx, "DEL", &[name])?;
    Ok(())
}
