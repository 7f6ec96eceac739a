//! Leases with fencing tokens: `FENCING.ACQUIRE`, `FENCING.RENEW`,
//! `FENCING.RELEASE`, `FENCING.LOCK`.
//!
//! A lock is the hash `fencing:lock:<name>` (holder, lease id, token; named
//! in `keys.rs`) with a millisecond expiry, so leases expire by Redis's own
//! clock; its tokens come from the counter `fencing:token:<name>`, which nothing but `FLUSHALL` or a
//! `DEL` of it lowers, and which RDB, the AOF and replication carry. Every
//! change is replicated as its effects (`INCR`, `HSET`, `PEXPIRE`, which
//! Redis propagates as an absolute `PEXPIREAT`).

use crate::args::{invalid, lock_arg, u64_arg};
use crate::fence::{hash_fields, replicated, reply_bytes};
use crate::keys;
use fencing_runtime::key_text::hex;
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

/// Shortest and longest lease, as the reference server takes them.
const MIN_LEASE_MS: u64 = 10;
const MAX_LEASE_MS: u64 = 3_600_000;

/// The lock name argument, refused in a cluster if its keys could not share its slot.
fn lock_name(ctx: &Context, arg: &RedisString) -> Result<String, RedisError> {
    let name = lock_arg(arg)?;
    keys::colocated(ctx, "the lock", name.as_bytes())?;
    Ok(name)
}

fn lease_ms(arg: &RedisString) -> Result<u64, RedisError> {
    let ms = u64_arg(arg, "ttl_ms")?;
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&ms) {
        return Err(invalid("ttl_ms", &format!("must be {MIN_LEASE_MS} to {MAX_LEASE_MS}")));
    }
    Ok(ms)
}

/// 128 random bits from the kernel as 32 hex digits: a lease id nobody can guess.
fn new_lease_id() -> Result<String, RedisError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| RedisError::String(format!("ERR no randomness for a lease id: {e}")))?;
    Ok(hex(&bytes))
}

fn text(v: &RedisValue) -> Option<String> {
    reply_bytes(v).and_then(|b| String::from_utf8(b).ok())
}

/// The fields of a lease's hash.
const LEASE_FIELDS: [&str; 3] = ["holder", "lease", "token"];

/// The holder, lease id and token of a held lock, read from its hash
/// directly (an expired lease is gone: Redis expires it on this lookup).
fn holder(ctx: &Context, key: &RedisString) -> Result<Option<(String, String, String)>, RedisError> {
    let fields = hash_fields(ctx, key, &LEASE_FIELDS).map_err(|_| RedisError::Str("ERR the lock could not be read"))?;
    let text = |v: Option<RedisString>| v.and_then(|v| String::from_utf8(v.as_slice().to_vec()).ok());
    match fields {
        Some([who, lease, token]) => match (text(who), text(lease), text(token)) {
            (Some(h), Some(l), Some(t)) => Ok(Some((h, l, t))),
            _ => Ok(None),
        },
        None => Ok(None),
    }
}

fn remaining_ms(ctx: &Context, key: &RedisString) -> Result<i64, RedisError> {
    match ctx.call("PTTL", &[key])? {
        RedisValue::Integer(ms) => Ok(ms.max(0)),
        _ => Ok(0),
    }
}

/// `FENCING.ACQUIRE lock holder ttl_ms` -> `[token, lease_id]` (and, with
/// the module's `SIGN` key, `[token, lease_id, proof_hex]`: the proof that
/// this token was granted for this lock), or `LOCKED holder="..."
/// remaining_ms=N` while another lease holds it.
pub fn acquire(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, lock, who, ttl] = args.as_slice() else { return Err(RedisError::WrongArity) };
    let name = lock_name(ctx, lock)?;
    let who = std::str::from_utf8(who.as_slice()).map_err(|_| invalid("holder", "is not UTF-8"))?.to_owned();
    if who.is_empty() || who.chars().count() > 256 {
        return Err(invalid("holder", "must be 1 to 256 characters"));
    }
    let ttl = lease_ms(ttl)?;
    let key = keys::lease(ctx, &name);
    if let Some((held_by, _, _)) = holder(ctx, &key)? {
        return Err(RedisError::String(format!("LOCKED holder={held_by:?} remaining_ms={}", remaining_ms(ctx, &key)?)));
    }
    let counter = keys::tokens(ctx, &name);
    let RedisValue::Integer(token) = replicated(ctx, "INCR", &[&counter])? else {
        return Err(RedisError::Str("ERR the token counter is not an integer"));
    };
    let lease = new_lease_id()?;
    let s = |v: &str| ctx.create_string(v);
    let (f_holder, f_lease, f_token) = (s("holder"), s("lease"), s("token"));
    let (v_holder, v_lease, v_token) = (s(&who), s(&lease), s(&token.to_string()));
    replicated(ctx, "HSET", &[&key, &f_holder, &v_holder, &f_lease, &v_lease, &f_token, &v_token])?;
    replicated(ctx, "PEXPIRE", &[&key, &s(&ttl.to_string())])?;
    let mut reply = vec![RedisValue::Integer(token), RedisValue::BulkString(lease)];
    if let Some(signer) = crate::guard::signer() {
        let proof = signer.prove(&name, token as u64);
        reply.push(RedisValue::BulkString(hex(&proof)));
    }
    Ok(RedisValue::Array(reply))
}

/// The held lock's key if `lease` is its current lease: `LEASE_EXPIRED`
/// when nothing holds it, `WRONG_LEASE` when another lease does.
fn owned(ctx: &Context, lock: &RedisString, lease: &RedisString) -> Result<RedisString, RedisError> {
    let name = lock_name(ctx, lock)?;
    let key = keys::lease(ctx, &name);
    match holder(ctx, &key)? {
        None => Err(RedisError::Str("LEASE_EXPIRED the lease ended; acquire the lock again")),
        Some((_, current, _)) if current.as_bytes() != lease.as_slice() => {
            Err(RedisError::Str("WRONG_LEASE the lock is held under another lease"))
        }
        Some(_) => Ok(key),
    }
}

/// `FENCING.RENEW lock lease_id ttl_ms` -> `OK`
pub fn renew(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, lock, lease, ttl] = args.as_slice() else { return Err(RedisError::WrongArity) };
    let ttl = lease_ms(ttl)?;
    let key = owned(ctx, lock, lease)?;
    replicated(ctx, "PEXPIRE", &[&key, &ctx.create_string(ttl.to_string())])?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `FENCING.RELEASE lock lease_id` -> `OK`
pub fn release(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, lock, lease] = args.as_slice() else { return Err(RedisError::WrongArity) };
    let key = owned(ctx, lock, lease)?;
    replicated(ctx, "DEL", &[&key])?;
    Ok(RedisValue::SimpleStringStatic("OK"))
}

/// `FENCING.LOCK lock` -> `[holder, token, remaining_ms]` while held, else
/// `[nil, last_token, 0]` (the last token issued, 0 for none).
pub fn status(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, lock] = args.as_slice() else { return Err(RedisError::WrongArity) };
    let name = lock_name(ctx, lock)?;
    let key = keys::lease(ctx, &name);
    if let Some((who, _, token)) = holder(ctx, &key)? {
        let token: i64 = token.parse().map_err(|_| RedisError::Str("ERR the lock's token is not a number"))?;
        return Ok(RedisValue::Array(vec![
            RedisValue::BulkString(who),
            RedisValue::Integer(token),
            RedisValue::Integer(remaining_ms(ctx, &key)?),
        ]));
    }
    let last = text(&ctx.call("GET", &[&keys::tokens(ctx, &name)])?).and_then(|t| t.parse::<i64>().ok()).unwrap_or(0);
    Ok(RedisValue::Array(vec![RedisValue::Null, RedisValue::Integer(last), RedisValue::Integer(0)]))
}
