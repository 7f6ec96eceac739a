//! Leases with fencing tokens: `FENCING.ACQUIRE`, `FENCING.RENEW`,
//! `FENCING.RELEASE`, `FENCING.LOCK`.
//!
//! A lock is the module's (`state.rs`): the last token issued and the
//! current lease (holder, lease id, token, deadline). Leases end by Redis's
//! clock at their deadline, an absolute time in Unix milliseconds, so a
//! replica or an AOF replay ends them at the same moment the primary did.
//! Every change is replicated as its effect (`FENCING.APPLY GRANT`, `RENEW`,
//! `RELEASE`).
//!
//! Invariant: a grant's token is the lock's last token plus one, and the
//! counter is never lowered; tokens stop at 2^63-1 (a RESP integer), where
//! a grant is refused.

use crate::args::{invalid, name, number};
use crate::boundary::{Answer, Refusal, Reply};
use crate::replicate::{Effect, emit, now_ms, selected_db};
use crate::state::Lease;
use fencing_runtime::accept;
use fencing_runtime::key_text::hex;
use redis_module::{Context, RedisString};

/// Shortest and longest lease, as the reference server takes them.
const MIN_LEASE_MS: u64 = 10;
const MAX_LEASE_MS: u64 = 3_600_000;

fn lease_ms(arg: &RedisString) -> Result<i64, Refusal> {
    let ms = number(arg, "ttl_ms")?;
    if !(MIN_LEASE_MS..=MAX_LEASE_MS).contains(&ms) {
        return Err(invalid("ttl_ms", format!("must be {MIN_LEASE_MS} to {MAX_LEASE_MS}")));
    }
    // At most an hour: it fits.
    Ok(ms as i64)
}

/// 128 random bits from the kernel as 32 hex digits: a lease id nobody can guess.
fn new_lease_id() -> Result<String, Refusal> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Refusal::new(format!("ERR no randomness for a lease id: {e}")))?;
    Ok(hex(&bytes))
}

/// `FENCING.ACQUIRE lock holder ttl_ms` -> `[token, lease_id]` (and, with
/// the module's `SIGN` key, `[token, lease_id, proof_hex]`: the proof that
/// this token was granted for this lock), or `LOCKED holder="..."
/// remaining_ms=N` while another lease holds it.
pub fn acquire(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, lock, holder, ttl] = args else { return Err(Refusal::Arity) };
    let lock = name(lock, "lock")?;
    let holder = name(holder, "holder")?;
    let ttl = lease_ms(ttl)?;
    crate::events::require_writable()?;
    let (db, now) = (selected_db(ctx), now_ms(ctx));
    let lease = {
        let state = crate::state::lock().map_err(Refusal::new)?;
        let current = state.lock(db, lock);
        if let Some(held) = current.and_then(|l| l.live_lease(now)) {
            return Err(Refusal::new(format!(
                "LOCKED holder=\"{}\" remaining_ms={}",
                crate::text::escape(held.holder.as_bytes()),
                held.deadline_ms - now
            )));
        }
        let last = current.map_or(0, |l| l.last_token);
        let token = last.checked_add(1).filter(|t| accept::to_signed(*t).is_ok()).ok_or_else(|| {
            Refusal::new(format!("ERR lock's tokens are spent: the last was {last} (tokens stop at 2^63-1)"))
        })?;
        Lease { holder: holder.to_owned(), id: new_lease_id()?, token, deadline_ms: now + ttl }
    };
    emit(ctx, Effect::Grant { lock, lease: &lease });
    let mut reply = vec![Reply::Int(lease.token as i64), Reply::Bulk(lease.id.clone().into_bytes())];
    if let Some(signer) = crate::guard::signer() {
        reply.push(Reply::Bulk(hex(&signer.prove(lock, lease.token)).into_bytes()));
    }
    crate::state::lock().map_err(Refusal::new)?.grant(db, lock, lease);
    Ok(Reply::Array(reply))
}

/// Checks that `lease` is `lock`'s live lease: `LEASE_EXPIRED` when nothing
/// holds the lock, `WRONG_LEASE` when another lease does.
fn owned(db: i32, now: i64, lock: &str, lease: &RedisString) -> Result<(), Refusal> {
    crate::events::require_writable()?;
    let state = crate::state::lock().map_err(Refusal::new)?;
    match state.lock(db, lock).and_then(|l| l.live_lease(now)) {
        None => Err(Refusal::new("LEASE_EXPIRED the lease ended; acquire the lock again")),
        Some(l) if l.id.as_bytes() != lease.as_slice() => {
            Err(Refusal::new("WRONG_LEASE the lock is held under another lease"))
        }
        Some(_) => Ok(()),
    }
}

/// `FENCING.RENEW lock lease_id ttl_ms` -> `OK`
pub fn renew(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, lock, lease, ttl] = args else { return Err(Refusal::Arity) };
    let lock = name(lock, "lock")?;
    let ttl = lease_ms(ttl)?;
    let (db, now) = (selected_db(ctx), now_ms(ctx));
    owned(db, now, lock, lease)?;
    let id = String::from_utf8_lossy(lease.as_slice()).into_owned();
    let deadline_ms = now + ttl;
    emit(ctx, Effect::Renew { lock, id: &id, deadline_ms });
    let mut state = crate::state::lock().map_err(Refusal::new)?;
    if let Some(l) = state.lock_mut(db, lock).lease.as_mut() {
        l.deadline_ms = deadline_ms;
    }
    Ok(Reply::Status(c"OK"))
}

/// `FENCING.RELEASE lock lease_id` -> `OK`
pub fn release(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, lock, lease] = args else { return Err(Refusal::Arity) };
    let lock = name(lock, "lock")?;
    let (db, now) = (selected_db(ctx), now_ms(ctx));
    owned(db, now, lock, lease)?;
    let id = String::from_utf8_lossy(lease.as_slice()).into_owned();
    emit(ctx, Effect::Release { lock, id: &id });
    crate::state::lock().map_err(Refusal::new)?.lock_mut(db, lock).lease = None;
    Ok(Reply::Status(c"OK"))
}

/// `FENCING.LOCK lock` -> `[holder, token, remaining_ms]` while held, else
/// `[nil, last_token, 0]` (the last token issued, 0 for none).
pub fn status(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, lock] = args else { return Err(Refusal::Arity) };
    let lock = name(lock, "lock")?;
    let (db, now) = (selected_db(ctx), now_ms(ctx));
    let state = crate::state::lock().map_err(Refusal::new)?;
    let current = state.lock(db, lock);
    Ok(Reply::Array(match current.and_then(|l| l.live_lease(now)) {
        Some(l) => {
            vec![Reply::Bulk(l.holder.as_bytes().to_vec()), Reply::Int(l.token as i64), Reply::Int(l.deadline_ms - now)]
        }
        None => vec![Reply::Nil, Reply::Int(current.map_or(0, |l| l.last_token) as i64), Reply::Int(0)],
    }))
}
