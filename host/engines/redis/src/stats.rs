//! What the module has done since it loaded, as `FENCING.STATS` and as the
//! `fencing_writes` and `fencing_guard` sections of `INFO` (`INFO fencing`,
//! or `INFO modules`), whose fields Redis prefixes with `fencing_`:
//! `fencing_writes_admitted`, `fencing_writes_refused`,
//! `fencing_guard_failures`, `fencing_resets`, and the guard's
//! `fencing_guard_source`, `_sha256`, `_contract`, `_call_path`.

use redis_module::server_events::INFO_COMMAND_HANDLER_LIST;
use redis_module::{Context, InfoContext, RedisResult, RedisString, RedisValue};
use std::sync::atomic::{AtomicU64, Ordering};

static ADMITTED: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static FAILED: AtomicU64 = AtomicU64::new(0);
static RESETS: AtomicU64 = AtomicU64::new(0);

/// A fenced write was admitted and applied.
pub fn admitted() {
    ADMITTED.fetch_add(1, Ordering::Relaxed);
}

/// A fenced write was refused by the rules.
pub fn refused() {
    REFUSED.fetch_add(1, Ordering::Relaxed);
}

/// A fenced write was refused because the guard could not decide.
pub fn failed() {
    REFUSED.fetch_add(1, Ordering::Relaxed);
    FAILED.fetch_add(1, Ordering::Relaxed);
}

/// An operator reset a fence.
pub fn reset() {
    RESETS.fetch_add(1, Ordering::Relaxed);
}

fn count(c: &AtomicU64) -> i64 {
    i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX)
}

/// `FENCING.STATS` -> `[writes_admitted, N, writes_refused, M, guard_failures, F, resets, R]`
pub fn command(_ctx: &Context, _args: Vec<RedisString>) -> RedisResult {
    Ok(RedisValue::Array(vec![
        RedisValue::SimpleStringStatic("writes_admitted"),
        RedisValue::Integer(count(&ADMITTED)),
        RedisValue::SimpleStringStatic("writes_refused"),
        RedisValue::Integer(count(&REFUSED)),
        RedisValue::SimpleStringStatic("guard_failures"),
        RedisValue::Integer(count(&FAILED)),
        RedisValue::SimpleStringStatic("resets"),
        RedisValue::Integer(count(&RESETS)),
    ]))
}

/// The module's `INFO` sections (Redis prefixes them with `fencing_`).
#[linkme::distributed_slice(INFO_COMMAND_HANDLER_LIST)]
fn info(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    let builder = ctx
        .builder()
        .add_section("writes")
        .field("writes_admitted", count(&ADMITTED))?
        .field("writes_refused", count(&REFUSED))?
        .field("guard_failures", count(&FAILED))?
        .field("resets", count(&RESETS))?
        .build_section()?;
    let builder = match crate::guard::get() {
        Err(_) => builder,
        Ok(guard) => {
            let info = guard.info();
            builder
                .add_section("guard")
                .field("guard_source", info.source)?
                .field("guard_sha256", info.sha256)?
                .field("guard_contract", info.package.unwrap_or_default())?
                .field("guard_call_path", format!("{:?}", guard.call_path()).to_lowercase())?
                .build_section()?
        }
    };
    builder.build_info()?;
    Ok(())
}
