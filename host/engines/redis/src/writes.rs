//! Fenced writes: `FENCING.SET`, `FENCING.APPEND`, `FENCING.DEL` (and
//! `FENCING.EXEC`, in `exec.rs`), each one command: decide the presented
//! token against the key's fence with the guard, and only if admitted apply
//! the write and store the new fence. What is replicated (and written to
//! the AOF) is what was done: the write and `FENCING.APPLY FENCE`, in one
//! `MULTI`/`EXEC` (`replicate.rs`).
//!
//! A refusal is an error reply whose first word is the reason
//! (`STALE_TOKEN`, `TOKEN_REUSED`, `WRONG_LOCK`, `SEQUENCE_REGRESSED`,
//! `INVALID_TOKEN`), followed by the evidence; `GUARD_FAILURE` when the
//! guard could not decide (the write is refused: fail closed). With the
//! module's `VERIFY` keys every write must carry its grant's `PROOF hex`,
//! checked before the fence (`PROOF_MISSING`, `PROOF_MALFORMED`,
//! `PROOF_UNKNOWN_KEY`, `PROOF_BAD`).
//!
//! Invariant: the fence is stored only after the write succeeded, and a
//! refused or failed write changes neither the key nor its fence.

use crate::args::{WriteOptions, name, number, write_options};
use crate::boundary::{Answer, Refusal, Reply};
use crate::call::{self, REPLICATED};
use crate::replicate::{self, Effect, selected_db};
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Fence, Guard, Rejection, Sequencer};
use redis_module::{Context, RedisString, raw};
use std::ffi::c_int;

/// What a fenced write presented.
pub struct Presented<'a> {
    pub key: &'a RedisString,
    pub lock: &'a str,
    pub token: u64,
    pub options: WriteOptions,
}

/// Reads `key lock token`, then `values` positional arguments, then the
/// options; the positional arguments and whatever follows the options.
pub fn presented(
    args: &[RedisString],
    values: usize,
) -> Result<(Presented<'_>, &[RedisString], &[RedisString]), Refusal> {
    let [_, key, lock, token, rest @ ..] = args else { return Err(Refusal::Arity) };
    if rest.len() < values {
        return Err(Refusal::Arity);
    }
    let (positional, rest) = rest.split_at(values);
    let lock = name(lock, "lock")?;
    let token = number(token, "token")?;
    let (options, rest) = write_options(rest)?;
    Ok((Presented { key, lock, token, options }, positional, rest))
}

/// The refusal's error reply.
fn refusal(r: &Rejection, fence: Option<&Fence>) -> Refusal {
    Refusal::Text(match r {
        Rejection::StaleToken { presented, high_water } => {
            format!("STALE_TOKEN presented={presented} high_water={high_water}")
        }
        Rejection::TokenReused { presented, high_water } => {
            format!("TOKEN_REUSED presented={presented} high_water={high_water}")
        }
        Rejection::SequenceRegressed { token, presented, last } => format!(
            "SEQUENCE_REGRESSED token={token} presented={} last={last}",
            presented.map_or("none".into(), |s| s.to_string())
        ),
        Rejection::WrongLock => {
            let bound = fence.map_or(String::new(), |f| format!("\"{}\"", crate::text::escape(f.lock.as_bytes())));
            format!("WRONG_LOCK the key is fenced by lock {bound}")
        }
        Rejection::InvalidToken => "INVALID_TOKEN token 0 is never issued".into(),
    })
}

/// The error reply of a write whose proof does not hold (module loaded with `VERIFY`).
fn proof_refusal(r: ProofRejection) -> Refusal {
    Refusal::Text(match r {
        ProofRejection::UnknownKey { key_id } => format!("PROOF_UNKNOWN_KEY key_id={key_id} is not a VERIFY key"),
        ProofRejection::Missing => "PROOF_MISSING signed tokens: the write needs the grant's PROOF".into(),
        r => format!("{} {r}", r.reason().to_ascii_uppercase()),
    })
}

/// Decides `p` against the fence of its key in `db`: the fence to store if admitted.
pub fn decide(db: i32, p: &Presented) -> Result<Fence, Refusal> {
    crate::events::require_writable()?;
    let sequencer = Sequencer { lock: p.lock.to_owned(), token: p.token, sequence: p.options.sequence };
    let guard = crate::guard::get()?;
    let proof = p.options.proof.as_deref().unwrap_or_default();
    // The guard calls nothing of Redis's: the state stays taken while it decides.
    let state = crate::state::lock().map_err(Refusal::new)?;
    let current = state.fence(db, p.key.as_slice());
    let decision = guard.admit_with_keys(crate::guard::verifier(), current, &sequencer, proof, p.options.policy);
    match decision {
        Ok(Ok(a)) => Ok(Fence { lock: sequencer.lock, high_water: a.high_water, sequence: a.sequence }),
        Ok(Err(SignedRejection::Fence(rejection))) => {
            crate::stats::refused();
            Err(refusal(&rejection, current))
        }
        Ok(Err(SignedRejection::Proof(rejection))) => {
            crate::stats::refused();
            Err(proof_refusal(rejection))
        }
        Err(failure) => {
            crate::stats::failed();
            Err(Refusal::new(format!("GUARD_FAILURE {} the write is refused: {failure}", failure.reason())))
        }
    }
}

/// Stores the admitted fence of `key` in `db` and replicates it (after the write).
pub fn commit(ctx: &Context, db: i32, key: &RedisString, fence: Fence) -> Result<(), Refusal> {
    replicate::emit(ctx, Effect::Fence { key, fence: &fence });
    crate::state::lock().map_err(Refusal::new)?.set_fence(db, key.as_slice(), fence);
    crate::stats::admitted();
    Ok(())
}

/// Sets `key` to `value` as `SET` does (the old value and its expiry go),
/// through the key API, and replicates the `SET`.
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
    ctx.replicate("SET", &[key, value][..]);
    Ok(())
}

/// `FENCING.SET key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn set(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [value], []) = presented(args, 1)? else { return Err(Refusal::Arity) };
    let db = selected_db(ctx);
    let admitted = decide(db, &p)?;
    set_string(ctx, p.key, value)?;
    commit(ctx, db, p.key, admitted)?;
    Ok(Reply::Status(c"OK"))
}

/// `FENCING.APPEND key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn append(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [value], []) = presented(args, 1)? else { return Err(Refusal::Arity) };
    let db = selected_db(ctx);
    let admitted = decide(db, &p)?;
    let reply = call::call(ctx, REPLICATED, b"APPEND", &[p.key, value])?;
    commit(ctx, db, p.key, admitted)?;
    Ok(Reply::Forward(reply))
}

/// `FENCING.DEL key lock token [SEQ n] [POLICY p] [PROOF hex]`: the key goes, its fence stays.
pub fn del(ctx: &Context, args: &[RedisString]) -> Answer {
    let (p, [], []) = presented(args, 0)? else { return Err(Refusal::Arity) };
    let db = selected_db(ctx);
    let admitted = decide(db, &p)?;
    let reply = call::call(ctx, REPLICATED, b"DEL", &[p.key])?;
    commit(ctx, db, p.key, admitted)?;
    Ok(Reply::Forward(reply))
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
