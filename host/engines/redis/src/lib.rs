//! The fence inside Redis: a module that gives Redis locks fencing tokens
//! and decides writes with the same `fencing:guard` component every other
//! host runs, whichever client sends them.
//!
//! ```text
//! redis-server --loadmodule target/release/libfencing_redis.so
//! FENCING.ACQUIRE orders worker-1 30000        -> [34, "<lease id>"]
//! FENCING.SET orders:invoice orders 34 "data"  -> OK
//! FENCING.SET orders:invoice orders 33 "late"  -> (error) STALE_TOKEN presented=33 high_water=34
//! ```
//!
//! The fences and token counters live in the module's memory, beside the
//! keyspace (`state.rs`): nothing done to keys (eviction, `DEL`, `FLUSHALL`,
//! `SWAPDB`, ...) reaches them; the RDB's aux field carries them across
//! restarts and replicas' full syncs, and replicated effects carry each
//! change (`persist.rs`, `replicate.rs`).
//!
//! # Layout
//! - `boundary.rs`: the edge with Redis: commands run under `catch_unwind`,
//!   replies built whole.
//! - `text.rs`: client text going out: escaped, NUL-safe error replies and log lines.
//! - `call.rs`: running a Redis command from the module, binary-safe.
//! - `args.rs`: arguments by the hosts' rules (`fencing_runtime::accept`).
//! - `state.rs`: fences, locks and reset records, per database.
//! - `persist.rs`: the state in the RDB (aux field of the `fencestat` type).
//! - `replicate.rs`: effects to replicas and the AOF (`FENCING.APPLY`).
//! - `events.rs`: loads, flushes and configuration changes.
//! - `fenced.rs`: one fenced write: decided, run, its fence stored (or replayed).
//! - `writes.rs`: fenced `SET`, `APPEND`, `DEL` and `FENCING.FENCE`.
//! - `exec.rs`: `FENCING.EXEC`, any write command on the fenced key.
//! - `locks.rs`: leases with tokens (`ACQUIRE`, `RENEW`, `RELEASE`, `LOCK`).
//! - `reset.rs`: the operator's recorded reset (`RESET`, `RESETS`).
//! - `decide.rs`: `FENCING.DECIDE`, one decision with no key (the shared vectors).
//! - `guard.rs`: the embedded component (or the `PLUGIN` load argument's), loaded once.
//! - `stats.rs`: counts (`FENCING.STATS`, `INFO fencing`).

mod args;
mod boundary;
mod call;
mod decide;
mod events;
mod exec;
mod fenced;
mod guard;
mod locks;
mod persist;
mod replicate;
mod reset;
mod state;
mod stats;
mod text;
mod writes;

use persist::STATE_TYPE;
use redis_module::{Context, ContextFlags, RedisString, Status, raw, redis_module};
use std::ffi::{CStr, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A command: name, `extern "C"` entry, flags, first, last and step of its keys.
type Command = (&'static CStr, raw::RedisModuleCmdFunc, &'static CStr, (c_int, c_int, c_int));

fn commands() -> [Command; 14] {
    const KEY: (c_int, c_int, c_int) = (1, 1, 1);
    const NONE: (c_int, c_int, c_int) = (0, 0, 0);
    [
        (c"fencing.set", command!(writes::set), c"write deny-oom", KEY),
        (c"fencing.append", command!(writes::append), c"write deny-oom", KEY),
        (c"fencing.del", command!(writes::del), c"write", KEY),
        (c"fencing.exec", command!(exec::exec), c"write deny-oom", KEY),
        (c"fencing.fence", command!(writes::show), c"readonly", KEY),
        (c"fencing.reset", command!(reset::reset), c"write", KEY),
        (c"fencing.resets", command!(reset::records), c"readonly", NONE),
        // A lock's name is declared as its key, so ACL key patterns choose
        // which locks a user may take.
        (c"fencing.acquire", command!(locks::acquire), c"write deny-oom", KEY),
        (c"fencing.renew", command!(locks::renew), c"write", KEY),
        (c"fencing.release", command!(locks::release), c"write", KEY),
        (c"fencing.lock", command!(locks::status), c"readonly", KEY),
        (c"fencing.stats", command!(stats::command), c"readonly fast", NONE),
        (c"fencing.decide", command!(decide::decide), c"readonly fast", NONE),
        (c"fencing.apply", command!(replicate::apply), c"write deny-script", NONE),
    ]
}

/// Everything a load does, in an order where a failure leaves nothing behind.
fn start(ctx: &Context, args: &[RedisString]) -> Result<(), String> {
    if ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return Err("Redis Cluster is not supported: the module keeps its state beside the keyspace, and a \
                    resharding would move keys without their fences"
            .into());
    }
    for (name, entry, flags, keys) in commands() {
        boundary::register(ctx.get_raw(), name, entry, flags, keys)?;
    }
    guard::load(args)?;
    events::subscribe_all(ctx)
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let result = catch_unwind(AssertUnwindSafe(|| start(ctx, args)))
        .unwrap_or_else(|_| Err("internal error while loading".into()));
    match result {
        Ok(()) => Status::Ok,
        Err(e) => {
            text::warn(ctx, &format!("fencing: {e}"));
            Status::Err
        }
    }
}

redis_module! {
    name: "fencing",
    version: 2,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [STATE_TYPE],
    init: init,
}
