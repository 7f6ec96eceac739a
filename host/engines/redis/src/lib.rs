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
//! # Layout
//! - `args.rs`: reading arguments (u64 tokens, lock names, write options).
//! - `keys.rs`: the names of the module's keys, each in its key's or lock's hash slot.
//! - `fence.rs`: a key's fence in the keyspace, and replicating effects.
//! - `writes.rs`: the fenced writes (`SET`, `APPEND`, `DEL`, the general `EXEC`) and `FENCING.FENCE`.
//! - `locks.rs`: leases with tokens (`ACQUIRE`, `RENEW`, `RELEASE`, `LOCK`).
//! - `reset.rs`: the operator's recorded reset of a fence (`FENCING.RESET`).
//! - `decide.rs`: `FENCING.DECIDE`, one decision with no key (the shared vectors).
//! - `guard.rs`: the embedded component (or the `PLUGIN` load argument's), loaded once.
//! - `stats.rs`: admitted and refused counts (`FENCING.STATS`, `INFO fencing`).

mod args;
mod decide;
mod fence;
mod guard;
mod keys;
mod locks;
mod reset;
mod stats;
mod writes;

use redis_module::{Context, RedisString, Status, redis_module};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    match guard::load(args) {
        Ok(()) => Status::Ok,
        Err(e) => {
            ctx.log_warning(&format!("fencing: {e}"));
            Status::Err
        }
    }
}

redis_module! {
    name: "fencing",
    version: 1,
    allocator: (redis_module::alloc::RedisAlloc, redis_module::alloc::RedisAlloc),
    data_types: [],
    init: init,
    commands: [
        ["fencing.set", writes::set, "write deny-oom", 1, 1, 1, ""],
        ["fencing.append", writes::append, "write deny-oom", 1, 1, 1, ""],
        ["fencing.del", writes::del, "write", 1, 1, 1, ""],
        ["fencing.exec", writes::exec, "write deny-oom", 1, 1, 1, ""],
        ["fencing.fence", writes::show, "readonly", 1, 1, 1, ""],
        ["fencing.reset", reset::reset, "write deny-oom", 1, 1, 1, ""],
        // A lock's name is declared as its key: its keys share its hash slot.
        ["fencing.acquire", locks::acquire, "write deny-oom", 1, 1, 1, ""],
        ["fencing.renew", locks::renew, "write", 1, 1, 1, ""],
        ["fencing.release", locks::release, "write", 1, 1, 1, ""],
        ["fencing.lock", locks::status, "readonly", 1, 1, 1, ""],
        ["fencing.stats", stats::command, "readonly fast", 0, 0, 0, ""],
        ["fencing.decide", decide::decide, "readonly fast", 0, 0, 0, ""],
    ],
}
