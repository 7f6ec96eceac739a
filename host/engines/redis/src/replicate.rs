//! What reaches replicas and the AOF: the effects of a command, never the
//! command, which a replica would decide again against a state that may
//! differ (and a grant would draw another lease id).
//!
//! A command that changes the state replicates `FENCING.APPLY <effect>`
//! beside the data write it made (Redis wraps them in one `MULTI`/`EXEC`);
//! a replica, or Redis replaying its AOF, runs it to make the same change:
//!
//! ```text
//! FENCING.APPLY FENCE   key lock high_water [sequence]
//! FENCING.APPLY GRANT   lock token holder lease_id deadline_ms
//! FENCING.APPLY RENEW   lock lease_id deadline_ms
//! FENCING.APPLY RELEASE lock lease_id
//! FENCING.APPLY RESET   id time_ms key user reason <before> <after>   (a fence: 0, or 1 lock high_water sequence|-)
//! ```
//!
//! Invariant: `FENCING.APPLY` runs only from the replication link or an AOF
//! being loaded; a client that sends it (whatever its ACL user may run) is
//! refused, so it is no way around the guard or the operator's reset.

use crate::args::invalid;
use crate::boundary::{Answer, Refusal, Reply};
use crate::state::{Lease, ResetRecord};
use fencing_runtime::{Fence, accept};
use redis_module::{Context, ContextFlags, RedisString, raw};

/// A change to the state, as replicated.
pub enum Effect<'a> {
    Fence { key: &'a RedisString, fence: &'a Fence },
    Grant { lock: &'a str, lease: &'a Lease },
    Renew { lock: &'a str, id: &'a str, deadline_ms: i64 },
    Release { lock: &'a str, id: &'a str },
    Reset(&'a ResetRecord),
}

fn fence_words(fence: Option<&Fence>, out: &mut Vec<Vec<u8>>) {
    match fence {
        None => out.push(b"0".to_vec()),
        Some(f) => {
            out.push(b"1".to_vec());
            out.push(f.lock.as_bytes().to_vec());
            out.push(f.high_water.to_string().into_bytes());
            out.push(f.sequence.map_or(b"-".to_vec(), |s| s.to_string().into_bytes()));
        }
    }
}

/// Replicates `effect` (to replicas and the AOF) after what the command did so far.
pub fn emit(ctx: &Context, effect: Effect) {
    let mut w: Vec<Vec<u8>> = Vec::with_capacity(12);
    let number = |n: u64| n.to_string().into_bytes();
    match effect {
        Effect::Fence { key, fence } => {
            // The hot path (every fenced write): the key is passed as Redis holds it.
            let word = |b: &[u8]| RedisString::create_from_slice(ctx.get_raw(), b);
            let (kind, lock, high_water) =
                (word(b"FENCE"), word(fence.lock.as_bytes()), word(&number(fence.high_water)));
            let sequence = fence.sequence.map(|s| word(&number(s)));
            let mut args = vec![&kind, key, &lock, &high_water];
            args.extend(sequence.as_ref());
            ctx.replicate("FENCING.APPLY", args.as_slice());
            return;
        }
        Effect::Grant { lock, lease } => w.extend([
            b"GRANT".to_vec(),
            lock.as_bytes().to_vec(),
            number(lease.token),
            lease.holder.as_bytes().to_vec(),
            lease.id.as_bytes().to_vec(),
            lease.deadline_ms.to_string().into_bytes(),
        ]),
        Effect::Renew { lock, id, deadline_ms } => w.extend([
            b"RENEW".to_vec(),
            lock.as_bytes().to_vec(),
            id.as_bytes().to_vec(),
            deadline_ms.to_string().into_bytes(),
        ]),
        Effect::Release { lock, id } => {
            w.extend([b"RELEASE".to_vec(), lock.as_bytes().to_vec(), id.as_bytes().to_vec()])
        }
        Effect::Reset(r) => {
            w.extend([
                b"RESET".to_vec(),
                number(r.id),
                r.time_ms.to_string().into_bytes(),
                r.key.clone(),
                r.user.as_bytes().to_vec(),
                r.reason.as_bytes().to_vec(),
            ]);
            fence_words(r.before.as_ref(), &mut w);
            fence_words(r.after.as_ref(), &mut w);
        }
    }
    let args: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
    ctx.replicate("FENCING.APPLY", args.as_slice());
}

/// The database the command runs in (what the client `SELECT`ed).
pub fn selected_db(ctx: &Context) -> i32 {
    unsafe { raw::RedisModule_GetSelectedDb.map_or(0, |f| f(ctx.get_raw())) }
}

/// Unix milliseconds by Redis's clock.
pub fn now_ms(_ctx: &Context) -> i64 {
    unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f()) }
}

fn text<'a>(arg: &'a RedisString, what: &str) -> Result<&'a str, Refusal> {
    std::str::from_utf8(arg.as_slice()).map_err(|_| invalid(what, "is not UTF-8"))
}

fn signed(arg: &RedisString, what: &str) -> Result<i64, Refusal> {
    text(arg, what)?.parse().map_err(|_| invalid(what, "is not an integer"))
}

fn fence_arg(args: &[RedisString]) -> Result<(Option<Fence>, &[RedisString]), Refusal> {
    match args {
        [flag, rest @ ..] if flag.as_slice() == b"0" => Ok((None, rest)),
        [flag, lock, high_water, sequence, rest @ ..] if flag.as_slice() == b"1" => {
            let sequence = match sequence.as_slice() {
                b"-" => None,
                _ => Some(crate::args::number(sequence, "sequence")?),
            };
            let lock = text(lock, "lock")?.to_owned();
            Ok((Some(Fence { lock, high_water: crate::args::number(high_water, "high_water")?, sequence }), rest))
        }
        _ => Err(Refusal::Arity),
    }
}

/// `FENCING.APPLY <effect> ...`: makes a replicated change (replication
/// link and AOF loading only).
pub fn apply(ctx: &Context, args: &[RedisString]) -> Answer {
    let flags = ctx.get_flags();
    if !flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        return Err(Refusal::new(
            "ERR FENCING.APPLY carries the module's replicated changes; it runs only from the replication link or the AOF",
        ));
    }
    let db = selected_db(ctx);
    let [_, kind, rest @ ..] = args else { return Err(Refusal::Arity) };
    let mut state = crate::state::lock().map_err(Refusal::new)?;
    match (kind.as_slice(), rest) {
        (b"FENCE", [key, lock, high_water, sequence @ ..]) if sequence.len() <= 1 => {
            let sequence = sequence.first().map(|s| crate::args::number(s, "sequence")).transpose()?;
            let fence = Fence {
                lock: text(lock, "lock")?.to_owned(),
                high_water: crate::args::number(high_water, "high_water")?,
                sequence,
            };
            state.set_fence(db, key.as_slice(), fence);
        }
        (b"GRANT", [lock, token, holder, id, deadline]) => {
            let lease = Lease {
                holder: text(holder, "holder")?.to_owned(),
                id: text(id, "lease")?.to_owned(),
                token: accept::number(token.as_slice()).map_err(|e| invalid("token", e))?,
                deadline_ms: signed(deadline, "deadline")?,
            };
            state.grant(db, text(lock, "lock")?, lease);
        }
        (b"RENEW", [lock, id, deadline]) => {
            let deadline_ms = signed(deadline, "deadline")?;
            let lock = state.lock_mut(db, text(lock, "lock")?);
            if let Some(l) = lock.lease.as_mut().filter(|l| l.id.as_bytes() == id.as_slice()) {
                l.deadline_ms = deadline_ms;
            }
        }
        (b"RELEASE", [lock, id]) => {
            let lock = state.lock_mut(db, text(lock, "lock")?);
            if lock.lease.as_ref().is_some_and(|l| l.id.as_bytes() == id.as_slice()) {
                lock.lease = None;
            }
        }
        (b"RESET", [id, time, key, user, reason, fences @ ..]) => {
            let (before, fences) = fence_arg(fences)?;
            let (after, []) = fence_arg(fences)? else { return Err(Refusal::Arity) };
            let record = ResetRecord {
                id: crate::args::number(id, "id")?,
                time_ms: signed(time, "time")?,
                db,
                key: key.as_slice().to_vec(),
                user: text(user, "user")?.to_owned(),
                reason: text(reason, "reason")?.to_owned(),
                before,
                after,
            };
            match &record.after {
                None => state.remove_fence(db, &record.key),
                Some(f) => {
                    state.set_fence(db, &record.key, f.clone());
                    None
                }
            };
            state.record_reset(record);
        }
        _ => return Err(Refusal::new("ERR FENCING.APPLY: unknown effect or wrong arguments")),
    }
    Ok(Reply::Status(c"OK"))
}
