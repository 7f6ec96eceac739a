//! What the module has done since it loaded, as `FENCING.STATS` and as the
//! `fencing_writes` and `fencing_guard` sections of `INFO` (`INFO fencing`,
//! or `INFO modules`), whose fields Redis prefixes with `fencing_`:
//! `fencing_writes_admitted`, `fencing_writes_refused`,
//! `fencing_guard_failures`, `fencing_resets`, and the guard's
//! `fencing_guard_source`, `_sha256`, `_contract`, `_call_path`.

use crate::boundary::{Answer, Refusal, Reply};
use redis_module::server_events::INFO_COMMAND_HANDLER_LIST;
use redis_module::{Context, InfoContext, RedisResult, RedisString};
use std::panic::{AssertUnwindSafe, catch_unwind};
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

/// `FENCING.STATS` -> `[writes_admitted, N, writes_refused, M, guard_failures, F, resets, R, fences, N, locks, N]`
pub fn command(_ctx: &Context, args: &[RedisString]) -> Answer {
    if args.len() != 1 {
        return Err(Refusal::Arity);
    }
    let (fences, locks) = crate::state::lock().map_err(Refusal::new)?.counts();
    Ok(Reply::Array(vec![
        Reply::Status(c"writes_admitted"),
        Reply::Int(count(&ADMITTED)),
        Reply::Status(c"writes_refused"),
        Reply::Int(count(&REFUSED)),
        Reply::Status(c"guard_failures"),
        Reply::Int(count(&FAILED)),
        Reply::Status(c"resets"),
        Reply::Int(count(&RESETS)),
        Reply::Status(c"fences"),
        Reply::Int(fences as i64),
        Reply::Status(c"locks"),
        Reply::Int(locks as i64),
    ]))
}

/// The module's `INFO` sections (Redis prefixes them with `fencing_`).
#[linkme::distributed_slice(INFO_COMMAND_HANDLER_LIST)]
fn info(ctx: &InfoContext, for_crash_report: bool) -> RedisResult<()> {
    // A panic here would cross into Redis: caught, the section is left out.
    catch_unwind(AssertUnwindSafe(|| sections(ctx, for_crash_report))).unwrap_or(Ok(()))
}

fn sections(ctx: &InfoContext, _for_crash_report: bool) -> RedisResult<()> {
    let (fences, locks) = crate::state::lock().map(|s| s.counts()).unwrap_or((0, 0));
    let builder = ctx
        .builder()
        .add_section("writes")
        .field("writes_admitted", count(&ADMITTED))?
        .field("writes_refused", count(&REFUSED))?
        .field("guard_failures", count(&FAILED))?
        .field("resets", count(&RESETS))?
        .field("internal_errors", i64::try_from(crate::boundary::panics()).unwrap_or(i64::MAX))?
        .build_section()?
        .add_section("state")
        .field("fences", fences as i64)?
        .field("locks", locks as i64)?
        .field("aof_safe", i64::from(crate::events::aof_safe()))?
        .build_section()?;
    let builder = match crate::guard::get() {
        Err(_) => builder,
        Ok(guard) => {
            let info = guard.info();
            // The source is a path the module loaded (no NUL: the file opened).
            builder
                .add_section("guard")
                .field("guard_source", info.source.replace('\0', ""))?
                .field("guard_sha256", info.sha256)?
                .field("guard_contract", info.package.unwrap_or_default())?
                .field("guard_call_path", format!("{:?}", guard.call_path()).to_lowercase())?
                .build_section()?
        }
    };
    builder.build_info()?;
    Ok(())
}
