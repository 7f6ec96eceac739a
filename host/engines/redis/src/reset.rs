//! The operator's reset: `FENCING.RESET key reason [REBIND lock high_water]`,
//! and its record, `FENCING.RESETS [count]`.
//!
//! A reset removes a key's fence, or re-binds it to `lock` at `high_water`
//! (the safe way to un-brick a key a client pushed to a huge token: set the
//! mark just above the tokens really in use). It is the only command that
//! removes, lowers or re-binds a fence, so it is an operator's: the ACL
//! users docs/redis.md proposes for applications lack `+fencing.reset`.
//!
//! Every reset is recorded before it is applied: the record (id, time, the
//! ACL user that ran it, the reason, the fence before and after) is kept
//! with the state (the newest 1,024; persisted and replicated like the
//! fences), and every reset is also a warning in Redis's log, with every
//! client-supplied value escaped.

use crate::args::{invalid, name, number};
use crate::boundary::{Answer, Refusal, Reply};
use crate::replicate::{Effect, emit, now_ms, selected_db};
use crate::state::ResetRecord;
use crate::text::escape;
use fencing_runtime::Fence;
use redis_module::{Context, RedisString};

/// The longest reason a reset records, in characters.
const MAX_REASON_CHARS: usize = 1024;

fn reason_arg(arg: &RedisString) -> Result<&str, Refusal> {
    let bad =
        || invalid("reason", format!("must be 1 to {MAX_REASON_CHARS} characters of text without control characters"));
    let reason = std::str::from_utf8(arg.as_slice()).map_err(|_| bad())?;
    let chars = reason.chars().count();
    if chars == 0 || chars > MAX_REASON_CHARS || reason.chars().any(char::is_control) {
        return Err(bad());
    }
    Ok(reason)
}

/// The fence a reset leaves: `None` removes it.
fn after_arg(rest: &[RedisString]) -> Result<Option<Fence>, Refusal> {
    match rest {
        [] => Ok(None),
        [word, lock, high_water] if word.as_slice().eq_ignore_ascii_case(b"REBIND") => {
            let lock = name(lock, "lock")?.to_owned();
            let high_water = number(high_water, "high_water")?;
            if high_water == 0 {
                return Err(invalid("high_water", "must be 1 or more (token 0 is never issued)"));
            }
            Ok(Some(Fence { lock, high_water, sequence: None }))
        }
        _ => Err(Refusal::Arity),
    }
}

/// A fence as the record and the log show it.
pub fn describe(fence: Option<&Fence>) -> String {
    match fence {
        None => "none".into(),
        Some(f) => {
            let lock = escape(f.lock.as_bytes());
            match f.sequence {
                None => format!("lock=\"{lock}\" high_water={}", f.high_water),
                Some(s) => format!("lock=\"{lock}\" high_water={} sequence={s}", f.high_water),
            }
        }
    }
}

/// `FENCING.RESET key reason [REBIND lock high_water]` -> the id of its record.
pub fn reset(ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, key, reason, rest @ ..] = args else { return Err(Refusal::Arity) };
    let reason = reason_arg(reason)?;
    let after = after_arg(rest)?;
    crate::events::require_writable()?;
    let db = selected_db(ctx);
    let user = String::from_utf8_lossy(ctx.get_current_user().as_slice()).into_owned();
    let record = {
        let state = crate::state::lock().map_err(Refusal::new)?;
        ResetRecord {
            id: state.next_reset,
            time_ms: now_ms(ctx),
            db,
            key: key.as_slice().to_vec(),
            user,
            reason: reason.to_owned(),
            before: state.fence(db, key.as_slice()).cloned(),
            after,
        }
    };
    emit(ctx, Effect::Reset(&record));
    crate::text::warn(
        ctx,
        &format!(
            "fencing: reset {} of the fence of key \"{}\" in db {db} by user \"{}\" because \"{}\": before {}, after {}",
            record.id,
            escape(&record.key),
            escape(record.user.as_bytes()),
            escape(record.reason.as_bytes()),
            describe(record.before.as_ref()),
            describe(record.after.as_ref()),
        ),
    );
    let id = record.id;
    let mut state = crate::state::lock().map_err(Refusal::new)?;
    match &record.after {
        None => state.remove_fence(db, key.as_slice()),
        Some(f) => {
            state.set_fence(db, key.as_slice(), f.clone());
            None
        }
    };
    state.record_reset(record);
    crate::stats::reset();
    Ok(Reply::Int(id as i64))
}

fn field(name: &'static std::ffi::CStr, value: Reply) -> [Reply; 2] {
    [Reply::Status(name), value]
}

/// `FENCING.RESETS [count]` -> the newest `count` (default 10) reset records,
/// newest first, each `[id, N, time_ms, N, db, N, key, k, user, u, reason, r, before, b, after, a]`.
pub fn records(_ctx: &Context, args: &[RedisString]) -> Answer {
    let count = match args {
        [_] => 10,
        [_, n] => number(n, "count")?,
        _ => return Err(Refusal::Arity),
    };
    let state = crate::state::lock().map_err(Refusal::new)?;
    let text = |s: String| Reply::Bulk(s.into_bytes());
    Ok(Reply::Array(
        state
            .resets
            .iter()
            .rev()
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .map(|r| {
                let mut e = Vec::with_capacity(16);
                e.extend(field(c"id", Reply::Int(r.id as i64)));
                e.extend(field(c"time_ms", Reply::Int(r.time_ms)));
                e.extend(field(c"db", Reply::Int(i64::from(r.db))));
                e.extend(field(c"key", Reply::Bulk(r.key.clone())));
                e.extend(field(c"user", text(r.user.clone())));
                e.extend(field(c"reason", text(r.reason.clone())));
                e.extend(field(c"before", text(describe(r.before.as_ref()))));
                e.extend(field(c"after", text(describe(r.after.as_ref()))));
                Reply::Array(e)
            })
            .collect(),
    ))
}
