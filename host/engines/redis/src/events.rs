//! What the module hears from Redis (server events), each callback under
//! `catch_unwind`:
//!
//! - a load begins (an RDB at start or `DEBUG RELOAD`, the AOF, a replica's
//!   full sync): the state is emptied, and the load's aux field
//!   (`persist.rs`) and replayed effects (`replicate.rs`) rebuild it;
//! - `FLUSHALL`/`FLUSHDB`: nothing is removed (the fences and counters are
//!   not keys); a notice in the log says so;
//! - a configuration change: the module checks again that an AOF rewrite
//!   keeps its state. Redis writes a rewritten AOF's base as an RDB only
//!   with `aof-use-rdb-preamble yes` (the default); with `no` and
//!   `appendonly yes`, a rewrite would leave the module's state out, so
//!   every grant, fenced write and reset is refused (naming the setting)
//!   for as long as that holds.
//!
//! - a change of role: a replica refuses grants, fenced writes and resets
//!   from clients (even with `replica-read-only no`): its state is its
//!   primary's, and a write Redis lets a client make on a replica is never
//!   replicated on, so a fence raised there would be one no other node has.
//!
//! `SWAPDB` needs nothing: the state belongs to the database number.

use crate::boundary::Refusal;
use crate::call::{LOCAL, call};
use crate::text::log;
use redis_module::{Context, ContextFlags, raw};
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};

static AOF_SAFE: AtomicBool = AtomicBool::new(true);
static REPLICA: AtomicBool = AtomicBool::new(false);
static LOADING: AtomicBool = AtomicBool::new(false);

/// Whether an AOF rewrite keeps the module's state (see above).
pub fn aof_safe() -> bool {
    AOF_SAFE.load(Ordering::Relaxed)
}

/// Whether the running command comes from the replication link or an AOF
/// being loaded (it applies what a primary admitted). Asked of Redis only on
/// a replica or during a load: a primary serving clients answers at once.
pub fn replayed(ctx: &Context) -> bool {
    if !(REPLICA.load(Ordering::Relaxed) || LOADING.load(Ordering::Relaxed)) {
        return false;
    }
    ctx.get_flags().intersects(ContextFlags::REPLICATED | ContextFlags::LOADING)
}

/// Refuses a client's change to the state on a replica, or while an AOF
/// rewrite would drop it.
pub fn require_writable() -> Result<(), Refusal> {
    if REPLICA.load(Ordering::Relaxed) {
        return Err(Refusal::new("READONLY this is a replica: grants, fenced writes and resets go to the primary"));
    }
    match aof_safe() {
        true => Ok(()),
        false => Err(Refusal::new(
            "ERR aof-use-rdb-preamble is no while appendonly is yes: a rewritten AOF would lose the fences and \
             token counters; set aof-use-rdb-preamble yes",
        )),
    }
}

fn config(ctx: &Context, name: &str) -> Option<Vec<u8>> {
    let get = ctx.create_string("GET");
    let name = ctx.create_string(name);
    let reply = call(ctx, LOCAL, b"CONFIG", &[&get, &name]).ok()?;
    reply.elements().get(1).and_then(|v| v.bytes().map(<[u8]>::to_vec))
}

/// Reads the two settings again; warns when the answer changes for the worse.
pub fn check_config(ctx: &Context) {
    let appendonly = config(ctx, "appendonly");
    let preamble = config(ctx, "aof-use-rdb-preamble");
    let safe = !(appendonly.as_deref() == Some(b"yes") && preamble.as_deref() == Some(b"no"));
    if AOF_SAFE.swap(safe, Ordering::Relaxed) && !safe {
        log(
            ctx.get_raw(),
            c"warning",
            "fencing: appendonly yes with aof-use-rdb-preamble no: a rewritten AOF would lose the module's state; \
             grants, fenced writes and resets are refused until aof-use-rdb-preamble is yes",
        );
    }
}

fn event(id: u64) -> raw::RedisModuleEvent {
    raw::RedisModuleEvent { id, dataver: 1 }
}

fn subscribe(ctx: *mut raw::RedisModuleCtx, id: u64, callback: raw::RedisModuleEventCallback) -> bool {
    raw::subscribe_to_server_event(ctx, event(id), callback) == raw::Status::Ok
}

/// Subscribes to the events above.
pub fn subscribe_all(ctx: &Context) -> Result<(), String> {
    let c = ctx.get_raw();
    let wanted = [
        (raw::REDISMODULE_EVENT_LOADING, Some(loading as Callback), "loading"),
        (raw::REDISMODULE_EVENT_FLUSHDB, Some(flushed as Callback), "flush"),
        (raw::REDISMODULE_EVENT_CONFIG, Some(config_changed as Callback), "configuration"),
        (raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED, Some(role_changed as Callback), "role"),
    ];
    for (id, callback, what) in wanted {
        if !subscribe(c, id, callback) {
            return Err(format!("cannot subscribe to Redis's {what} events"));
        }
    }
    check_config(ctx);
    REPLICA.store(ctx.get_flags().contains(ContextFlags::SLAVE), Ordering::Relaxed);
    Ok(())
}

type Callback = unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);

fn guarded(ctx: *mut raw::RedisModuleCtx, what: &str, f: impl FnOnce(&Context)) {
    if catch_unwind(AssertUnwindSafe(|| f(&Context::new(ctx)))).is_err() {
        crate::boundary::panicked();
        log(ctx, c"warning", &format!("fencing: internal error while handling {what}"));
    }
}

unsafe extern "C" fn loading(ctx: *mut raw::RedisModuleCtx, _e: raw::RedisModuleEvent, sub: u64, _d: *mut c_void) {
    let starts = [
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START,
        raw::REDISMODULE_SUBEVENT_LOADING_AOF_START,
        raw::REDISMODULE_SUBEVENT_LOADING_REPL_START,
    ];
    guarded(ctx, "a load", |_| {
        let starting = starts.contains(&sub);
        LOADING.store(starting, Ordering::Relaxed);
        if starting && let Ok(mut state) = crate::state::lock() {
            state.clear();
        }
    });
}

unsafe extern "C" fn flushed(ctx: *mut raw::RedisModuleCtx, _e: raw::RedisModuleEvent, sub: u64, _d: *mut c_void) {
    guarded(ctx, "a flush", |_| {
        if sub == raw::REDISMODULE_SUBEVENT_FLUSHDB_END {
            let (fences, locks) = crate::state::lock().map(|s| s.counts()).unwrap_or((0, 0));
            log(
                ctx,
                c"notice",
                &format!(
                    "fencing: the flush removed keys only; {fences} fences and {locks} locks' token counters are kept"
                ),
            );
        }
    });
}

unsafe extern "C" fn config_changed(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    _s: u64,
    _d: *mut c_void,
) {
    guarded(ctx, "a configuration change", check_config);
}

unsafe extern "C" fn role_changed(ctx: *mut raw::RedisModuleCtx, _e: raw::RedisModuleEvent, sub: u64, _d: *mut c_void) {
    guarded(ctx, "a change of role", |_| {
        REPLICA.store(sub == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA, Ordering::Relaxed);
    });
}
