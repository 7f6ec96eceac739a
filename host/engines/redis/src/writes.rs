//! The fenced writes `FENCING.SET`, `FENCING.APPEND` and `FENCING.DEL`, and
//! `FENCING.FENCE`, which shows a key's fence. Each write is decided and its
//! fence stored by `fenced.rs`.
//!
//! What reaches replicas and the AOF is the fenced command itself, once it
//! was admitted: a replica (from the replication link) or Redis replaying
//! its AOF runs it as [`fenced::replay`], which makes the same write and
//! stores the fence the admitted write produced, without deciding again.
//! These three writes are deterministic, so the replayed write is the same
//! write. (`FENCING.EXEC` runs any command, some of which are not, so it
//! replicates what its command did instead: `exec.rs`.)

use crate::boundary::{Answer, Refusal, Reply};
use crate::call::{self, LOCAL};
use crate::fenced::{self, Presented, presented};
use crate::replicate::selected_db;
use redis_module::{Context, RedisString, raw};
use std::ffi::c_int;

/// Sets `key` to `value` as `SET` does (the old value and its expiry go),
/// through the key API; nothing is replicated here.
fn set_string(ctx: &Context, key: &RedisString, value: &RedisString) -> Result<(), Refusal> {
    let ctx_raw = ctx.get_raw();
    let (Some(open), Some(set), Some(close)) =
        (unsafe { (raw::RedisModule_OpenKey, raw::RedisModule_StringSet, raw::RedisModule_CloseKey) })
    else {
        return Err(Refusal::new("ERR the key API is missing"));
    };
    let handle = unsafe { open(ctx_raw, key.inner, raw::REDISMODULE_WRITE as c_int) }.cast::<raw::RedisModuleKey>();
    if handle.is_null() {
        return Err(Refusal::new("ERR the key could not be opened for writing"));
    }
    let status = unsafe { set(handle, value.inner) };
    unsafe { close(handle) };
    if status != raw::Status::Ok as c_int {
        return Err(Refusal::new("ERR the key could not be set"));
    }
    if let Some(notify) = unsafe { raw::RedisModule_NotifyKeyspaceEvent } {
        unsafe { notify(ctx_raw, raw::NotifyEvent::STRING.bits(), c"set".as_ptr(), key.inner) };
    }
    Ok(())
}

/// Runs `write` for `p` as the primary (decided, then replicated as the
/// command) or as a replay of what a primary admitted.
fn run(ctx: &Context, p: &Presented, write: impl FnOnce() -> Result<Reply, Refusal>) -> Answer {
    let db = selected_db(ctx);
    if crate::events::replayed(ctx) {
        return fenced::replay(db, p, write);
    }
    let reply = fenced::fenced(db, p, write)?;
    if let Some(f) = unsafe { raw::RedisModule_ReplicateVerbatim } {
        unsafe { f(ctx.get_raw()) };
    }
    Ok(reply)
}

/// `FENCING.SET key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn set(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [value], []) = presented(args, 1)? else { return Err(Refusal::Arity) };
    run(ctx, &p, || set_string(ctx, p.key, value).map(|()| Reply::Status(c"OK")))
}

/// `FENCING.APPEND key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn append(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [value], []) = presented(args, 1)? else { return Err(Refusal::Arity) };
    run(ctx, &p, || Ok(Reply::Forward(call::call(ctx, LOCAL, b"APPEND", &[p.key, value])?)))
}

/// `FENCING.DEL key lock token [SEQ n] [POLICY p] [PROOF hex]`: the key goes, its fence stays.
pub fn del(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [], []) = presented(args, 0)? else { return Err(Refusal::Arity) };
    run(ctx, &p, || Ok(Reply::Forward(call::call(ctx, LOCAL, b"DEL", &[p.key])?)))
}

/// `FENCING.FENCE key` -> `[lock, high_water, sequence]` or nil.
pub fn show(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, key] = args else { return Err(Refusal::Arity) };
    let state = crate::state::lock().map_err(Refusal::new)?;
    Ok(match state.fence(selected_db(ctx), key.as_slice()) {
        None => Reply::Nil,
        Some(f) => Reply::Array(vec![
            Reply::Bulk(f.lock.as_bytes().to_vec()),
            Reply::Bulk(f.high_water.to_string().into_bytes()),
            f.sequence.map_or(Reply::Nil, |s| Reply::Bulk(s.to_string().into_bytes())),
        ]),
    })
}
