//! Fenced writes: `FENCING.SET`, `FENCING.APPEND`, `FENCING.DEL` and the
//! general `FENCING.EXEC`, each one command: decide the presented token
//! against the key's fence with the guard, and only if admitted apply the
//! write and store the new fence. What is replicated (and written to the
//! AOF) is what was done (the write and the fence's `HSET`, wrapped in one
//! MULTI/EXEC by Redis), never the fenced command, which a replica would
//! decide again against a different state.
//!
//! A refusal is an error reply whose first word is the reason
//! (`STALE_TOKEN`, `TOKEN_REUSED`, `WRONG_LOCK`, `SEQUENCE_REGRESSED`,
//! `INVALID_TOKEN`), followed by the evidence; `GUARD_FAILURE` when the
//! guard could not decide (the write is refused: fail closed). With the
//! module's `VERIFY` keys every write must carry its grant's `PROOF hex`,
//! checked before the fence (`PROOF_MISSING`, `PROOF_MALFORMED`,
//! `PROOF_UNKNOWN_KEY`, `PROOF_BAD`).

use crate::args::{WriteOptions, lock_arg, u64_arg, write_options};
use crate::fence::{self, RunAs};
use crate::keys;
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Fence, Guard, Rejection, Sequencer};
use redis_module::{Context, RedisError, RedisResult, RedisString, RedisValue};

/// What a fenced write presented.
struct Presented<'a> {
    key: &'a RedisString,
    lock: String,
    token: u64,
    options: WriteOptions,
}

/// Reads `key lock token`, then `values` positional arguments, then the
/// options; the positional arguments and whatever follows the options.
fn presented(
    args: &[RedisString],
    values: usize,
) -> Result<(Presented<'_>, &[RedisString], &[RedisString]), RedisError> {
    let [_, key, lock, token, rest @ ..] = args else {
        return Err(RedisError::WrongArity);
    };
    if rest.len() < values {
        return Err(RedisError::WrongArity);
    }
    let (positional, rest) = rest.split_at(values);
    let (options, rest) = write_options(rest)?;
    Ok((Presented { key, lock: lock_arg(lock)?, token: u64_arg(token, "token")?, options }, positional, rest))
}

/// The refusal's error reply.
fn refusal(r: &Rejection, fence: Option<&Fence>) -> RedisError {
    let text = match r {
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
            let bound = fence.map_or(String::new(), |f| format!("{:?}", f.lock));
            format!("WRONG_LOCK the key is fenced by lock {bound}")
        }
        Rejection::InvalidToken => "INVALID_TOKEN token 0 is never issued".into(),
    };
    RedisError::String(text)
}

/// The error reply of a write whose proof does not hold (module loaded with `VERIFY`).
fn proof_refusal(r: ProofRejection) -> RedisError {
    RedisError::String(match r {
        ProofRejection::UnknownKey { key_id } => format!("PROOF_UNKNOWN_KEY key_id={key_id} is not a VERIFY key"),
        ProofRejection::Missing => "PROOF_MISSING signed tokens: the write needs the grant's PROOF".into(),
        r => format!("{} {r}", r.reason().to_ascii_uppercase()),
    })
}

/// Decides `p` against the fence stored at `name`: the fence stored
/// before, and the fence to store if admitted.
fn decide(ctx: &Context, name: &RedisString, p: &Presented) -> Result<(Option<Fence>, Fence), RedisError> {
    let current = fence::read(ctx, name)?;
    let sequencer = Sequencer { lock: p.lock.clone(), token: p.token, sequence: p.options.sequence };
    let guard = crate::guard::get()?;
    let proof = p.options.proof.as_deref().unwrap_or_default();
    let decision =
        guard.admit_with_keys(crate::guard::verifier(), current.as_ref(), &sequencer, proof, p.options.policy);
    match decision {
        Ok(Ok(admission)) => {
            let admitted =
                Fence { lock: p.lock.clone(), high_water: admission.high_water, sequence: admission.sequence };
            Ok((current, admitted))
        }
        Ok(Err(SignedRejection::Fence(rejection))) => {
            crate::stats::refused();
            Err(refusal(&rejection, current.as_ref()))
        }
        Ok(Err(SignedRejection::Proof(rejection))) => {
            crate::stats::refused();
            Err(proof_refusal(rejection))
        }
        Err(failure) => {
            crate::stats::failed();
            Err(RedisError::String(format!("GUARD_FAILURE {} the write is refused: {failure}", failure.reason())))
        }
    }
}

/// Applies `command args` as `who` if `p` is admitted, then stores the fence.
fn fenced(ctx: &Context, p: &Presented, who: RunAs, command: &str, args: &[&RedisString]) -> RedisResult {
    let name = keys::fence_of_writable(ctx, p.key)?;
    let (before, admitted) = decide(ctx, &name, p)?;
    let reply = fence::run(ctx, who, command, args)?;
    fence::write(ctx, &name, before.as_ref(), &admitted)?;
    crate::stats::admitted();
    Ok(reply)
}

/// `FENCING.SET key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn set(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let (p, [value], []) = presented(&args, 1)? else { return Err(RedisError::WrongArity) };
    fenced(ctx, &p, RunAs::Module, "SET", &[p.key, value])
}

/// `FENCING.APPEND key lock token value [SEQ n] [POLICY p] [PROOF hex]`
pub fn append(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let (p, [value], []) = presented(&args, 1)? else { return Err(RedisError::WrongArity) };
    fenced(ctx, &p, RunAs::Module, "APPEND", &[p.key, value])
}

/// `FENCING.DEL key lock token [SEQ n] [POLICY p] [PROOF hex]`
pub fn del(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let (p, [], []) = presented(&args, 0)? else { return Err(RedisError::WrongArity) };
    fenced(ctx, &p, RunAs::Module, "DEL", &[p.key])
}

/// Refuses a command that touches a key other than `key`, or none: a fenced
/// write must not write anything its fence does not guard.
fn only_the_fenced_key(
    ctx: &Context,
    key: &RedisString,
    command: &RedisString,
    args: &[&RedisString],
) -> Result<(), RedisError> {
    let getkeys = ctx.create_string("GETKEYS");
    let mut query: Vec<&RedisString> = vec![&getkeys, command];
    query.extend_from_slice(args);
    let keys = match ctx.call("COMMAND", query.as_slice()) {
        Ok(RedisValue::Array(keys)) if !keys.is_empty() => keys,
        _ => {
            return Err(RedisError::Str(
                "ERR the command writes no key: FENCING.EXEC runs a command on the fenced key",
            ));
        }
    };
    if keys.iter().any(|k| fence::reply_bytes(k).as_deref() != Some(key.as_slice())) {
        return Err(RedisError::Str("ERR the command touches keys other than the fenced key"));
    }
    Ok(())
}

/// `FENCING.EXEC key lock token [SEQ n] [POLICY p] [PROOF hex] COMMAND key arg...`: runs
/// one write command if admitted, with the caller's ACL permissions (the
/// caller's user must be allowed `COMMAND` on `key`). `key` must be its first
/// argument and the only key it touches.
pub fn exec(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let (p, [], rest) = presented(&args, 0)? else { return Err(RedisError::WrongArity) };
    let [command, command_args @ ..] = rest else { return Err(RedisError::WrongArity) };
    if command_args.first().map(|k| k.as_slice()) != Some(p.key.as_slice()) {
        return Err(RedisError::Str("ERR the command's first argument must be the fenced key"));
    }
    let name =
        std::str::from_utf8(command.as_slice()).map_err(|_| RedisError::Str("ERR the command name is not UTF-8"))?;
    let refs: Vec<&RedisString> = command_args.iter().collect();
    only_the_fenced_key(ctx, p.key, command, &refs)?;
    fenced(ctx, &p, RunAs::Caller, name, &refs)
}

/// `FENCING.FENCE key`: `[lock, high_water, sequence]` or nil.
pub fn show(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key] = args.as_slice() else { return Err(RedisError::WrongArity) };
    Ok(match fence::read(ctx, &keys::fence(ctx, key.as_slice()))? {
        None => RedisValue::Null,
        Some(f) => RedisValue::Array(vec![
            RedisValue::BulkString(f.lock),
            RedisValue::BulkString(f.high_water.to_string()),
            f.sequence.map_or(RedisValue::Null, |s| RedisValue::BulkString(s.to_string())),
        ]),
    })
}
