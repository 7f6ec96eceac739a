//! The operator's reset: `FENCING.RESET key reason [REBIND lock high_water]`.
//!
//! It removes a key's fence, or re-binds it to `lock` at `high_water` (the
//! safe way to un-brick a key a client pushed to a huge token: set the mark
//! just above the tokens really in use). Every reset is recorded: an entry in
//! the stream `fencing:resets:<key>` (who, why, the fence before and after),
//! replicated and in the AOF like the fence itself, and a warning in Redis's
//! log. Ordinary clients should not run it: `ACL SETUSER app -fencing.reset`.

use crate::args::{invalid, lock_arg, u64_arg};
use crate::fence::{self, replicated};
use crate::keys;
use fencing_runtime::Fence;
use redis_module::{Context, RedisError, RedisResult, RedisString};

/// The longest reason a reset records, in characters.
const MAX_REASON_CHARS: usize = 1024;

fn reason_arg(arg: &RedisString) -> Result<String, RedisError> {
    let reason = std::str::from_utf8(arg.as_slice()).map_err(|_| invalid("reason", "is not UTF-8"))?;
    let chars = reason.chars().count();
    if chars == 0 || chars > MAX_REASON_CHARS {
        return Err(invalid("reason", &format!("must be 1 to {MAX_REASON_CHARS} characters")));
    }
    Ok(reason.to_owned())
}

/// The fence a reset leaves: `None` removes it.
fn after_arg(rest: &[RedisString]) -> Result<Option<Fence>, RedisError> {
    match rest {
        [] => Ok(None),
        [word, lock, high_water] if word.as_slice().eq_ignore_ascii_case(b"REBIND") => {
            let high_water = u64_arg(high_water, "high_water")?;
            if high_water == 0 {
                return Err(invalid("high_water", "must be 1 or more (token 0 is never issued)"));
            }
            Ok(Some(Fence { lock: lock_arg(lock)?, high_water, sequence: None }))
        }
        _ => Err(RedisError::WrongArity),
    }
}

/// A fence as the record and the log show it.
fn describe(fence: Option<&Fence>) -> String {
    match fence {
        None => "none".into(),
        Some(f) => match f.sequence {
            None => format!("lock={:?} high_water={}", f.lock, f.high_water),
            Some(s) => format!("lock={:?} high_water={} sequence={s}", f.lock, f.high_water),
        },
    }
}

/// `FENCING.RESET key reason [REBIND lock high_water]` -> the id of the
/// record in `fencing:resets:<key>`.
pub fn reset(ctx: &Context, args: Vec<RedisString>) -> RedisResult {
    let [_, key, reason, rest @ ..] = args.as_slice() else { return Err(RedisError::WrongArity) };
    let reason = reason_arg(reason)?;
    let after = after_arg(rest)?;
    let name = keys::fence_of_writable(ctx, key)?;
    let before = fence::read(ctx, &name)?;
    let user = ctx.get_current_user();
    let user = String::from_utf8_lossy(user.as_slice()).into_owned();
    let (was, now) = (describe(before.as_ref()), describe(after.as_ref()));
    let s = |v: &str| ctx.create_string(v);
    let record = [
        &keys::resets(ctx, key.as_slice()),
        &s("*"),
        &s("key"),
        key,
        &s("user"),
        &s(&user),
        &s("reason"),
        &s(&reason),
        &s("before"),
        &s(&was),
        &s("after"),
        &s(&now),
    ];
    // Recorded first: a record of a reset that then failed is better than a
    // reset nobody recorded.
    let id = replicated(ctx, "XADD", &record)?;
    match &after {
        None => fence::remove(ctx, &name)?,
        Some(f) => fence::write(ctx, &name, before.as_ref(), f)?,
    }
    crate::stats::reset();
    ctx.log_warning(&format!(
        "fencing: the fence of key {:?} was reset by user {user:?} because {reason:?}: before {was}, after {now}",
        String::from_utf8_lossy(key.as_slice())
    ));
    Ok(id)
}
