//! The module's state in the RDB: one aux field, written before the keys of
//! every RDB Redis makes (a `SAVE`/`BGSAVE`, the base of a rewritten AOF,
//! a replica's full sync, `DEBUG RELOAD`) and read back when Redis loads
//! one. The data type `fencestat` that carries it never has a key.
//!
//! Format (encoding version 1), in RDB unsigned/signed integers and strings:
//!
//! ```text
//! databases:u   then per database: number:s
//!   fences:u    then per fence: key, lock, high_water:u, has_sequence:u, sequence:u
//!   locks:u     then per lock: name, last_token:u, has_lease:u [holder, id, token:u, deadline_ms:s]
//! next_reset:u  records:u   then per record: id:u, time_ms:s, db:s, key, user, reason, before, after
//!               where a fence is has_fence:u [lock, high_water:u, has_sequence:u, sequence:u]
//! ```
//!
//! Invariants: a load that fails (a short read, a string that is not UTF-8
//! where text belongs) returns an error, and Redis refuses the whole RDB
//! rather than start with fences missing; a loaded state is merged into
//! the module's (emptied when the load began, `events.rs`), never
//! replacing a higher mark with a lower one.

use crate::state::{Db, Lease, Lock, ResetRecord, State};
use fencing_runtime::Fence;
use redis_module::native_types::RedisType;
use redis_module::raw::{self, RedisModuleIO};
use std::ffi::{c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

const ENCODING: i32 = 1;

/// The data type whose aux field holds the state (9 characters, as Redis wants).
pub static STATE_TYPE: RedisType = RedisType::new(
    "fencestat",
    ENCODING,
    raw::RedisModuleTypeMethods {
        // Aux fields and their triggers: version 3 of the methods (Redis 7.0 reads up to 4).
        version: 3,
        rdb_load: Some(refuse_value),
        rdb_save: Some(save_nothing),
        aof_rewrite: None,
        free: Some(free_nothing),
        mem_usage: None,
        digest: None,
        aux_load: Some(aux_load),
        aux_save: Some(aux_save),
        aux_save2: None,
        aux_save_triggers: raw::REDISMODULE_AUX_BEFORE_RDB as c_int,
        free_effort: None,
        unlink: None,
        copy: None,
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

/// The type has no keys: a `RESTORE` payload that claims one is refused
/// (Redis answers "Bad data format").
extern "C" fn refuse_value(_rdb: *mut RedisModuleIO, _encver: c_int) -> *mut c_void {
    std::ptr::null_mut()
}

extern "C" fn save_nothing(_rdb: *mut RedisModuleIO, _value: *mut c_void) {}

extern "C" fn free_nothing(_value: *mut c_void) {}

extern "C" fn aux_save(rdb: *mut RedisModuleIO, _when: c_int) {
    // Reads only; a panic (none is expected) leaves the field short, and the
    // RDB then fails to load rather than load without fences.
    let _ = catch_unwind(AssertUnwindSafe(|| match crate::state::lock() {
        Ok(state) => save(rdb, &state),
        Err(_) => save(rdb, &State::default()),
    }));
}

extern "C" fn aux_load(rdb: *mut RedisModuleIO, encver: c_int, _when: c_int) -> c_int {
    let loaded = catch_unwind(AssertUnwindSafe(|| {
        if encver != ENCODING {
            return Err(format!("the RDB's fencing state has encoding {encver}; this module reads {ENCODING}"));
        }
        let state = load(rdb).map_err(|e| format!("the RDB's fencing state cannot be read: {e}"))?;
        crate::state::lock().map_err(str::to_owned)?.merge(state);
        Ok(())
    }));
    match loaded {
        Ok(Ok(())) => raw::Status::Ok as c_int,
        Ok(Err(e)) => {
            crate::text::log(std::ptr::null_mut(), c"warning", &format!("fencing: {e}"));
            raw::Status::Err as c_int
        }
        Err(_) => raw::Status::Err as c_int,
    }
}

fn save_fence(rdb: *mut RedisModuleIO, fence: Option<&Fence>) {
    raw::save_unsigned(rdb, u64::from(fence.is_some()));
    if let Some(f) = fence {
        raw::save_slice(rdb, f.lock.as_bytes());
        raw::save_unsigned(rdb, f.high_water);
        raw::save_unsigned(rdb, u64::from(f.sequence.is_some()));
        raw::save_unsigned(rdb, f.sequence.unwrap_or(0));
    }
}

fn save(rdb: *mut RedisModuleIO, state: &State) {
    raw::save_unsigned(rdb, state.dbs.len() as u64);
    for (number, db) in &state.dbs {
        raw::save_signed(rdb, i64::from(*number));
        raw::save_unsigned(rdb, db.fences.len() as u64);
        for (key, fence) in &db.fences {
            raw::save_slice(rdb, key);
            save_fence(rdb, Some(fence));
        }
        raw::save_unsigned(rdb, db.locks.len() as u64);
        for (name, lock) in &db.locks {
            raw::save_slice(rdb, name.as_bytes());
            raw::save_unsigned(rdb, lock.last_token);
            raw::save_unsigned(rdb, u64::from(lock.lease.is_some()));
            if let Some(l) = &lock.lease {
                raw::save_slice(rdb, l.holder.as_bytes());
                raw::save_slice(rdb, l.id.as_bytes());
                raw::save_unsigned(rdb, l.token);
                raw::save_signed(rdb, l.deadline_ms);
            }
        }
    }
    raw::save_unsigned(rdb, state.next_reset);
    raw::save_unsigned(rdb, state.resets.len() as u64);
    for r in &state.resets {
        raw::save_unsigned(rdb, r.id);
        raw::save_signed(rdb, r.time_ms);
        raw::save_signed(rdb, i64::from(r.db));
        raw::save_slice(rdb, &r.key);
        raw::save_slice(rdb, r.user.as_bytes());
        raw::save_slice(rdb, r.reason.as_bytes());
        save_fence(rdb, r.before.as_ref());
        save_fence(rdb, r.after.as_ref());
    }
}

type Loaded<T> = Result<T, String>;

fn unsigned(rdb: *mut RedisModuleIO) -> Loaded<u64> {
    raw::load_unsigned(rdb).map_err(|e| e.to_string())
}

fn signed(rdb: *mut RedisModuleIO) -> Loaded<i64> {
    raw::load_signed(rdb).map_err(|e| e.to_string())
}

fn bytes(rdb: *mut RedisModuleIO) -> Loaded<Vec<u8>> {
    raw::load_string_buffer(rdb).map(|b| b.as_ref().to_vec()).map_err(|e| e.to_string())
}

fn text(rdb: *mut RedisModuleIO, what: &str) -> Loaded<String> {
    String::from_utf8(bytes(rdb)?).map_err(|_| format!("a {what} is not UTF-8"))
}

fn flag(rdb: *mut RedisModuleIO) -> Loaded<bool> {
    match unsigned(rdb)? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(format!("a flag is {n}")),
    }
}

fn db_number(rdb: *mut RedisModuleIO) -> Loaded<i32> {
    let n = signed(rdb)?;
    i32::try_from(n).map_err(|_| format!("database number {n}"))
}

fn load_fence(rdb: *mut RedisModuleIO) -> Loaded<Option<Fence>> {
    if !flag(rdb)? {
        return Ok(None);
    }
    let lock = text(rdb, "lock name")?;
    let high_water = unsigned(rdb)?;
    let has_sequence = flag(rdb)?;
    let sequence = unsigned(rdb)?;
    Ok(Some(Fence { lock, high_water, sequence: has_sequence.then_some(sequence) }))
}

fn load_lock(rdb: *mut RedisModuleIO) -> Loaded<Lock> {
    let last_token = unsigned(rdb)?;
    let lease = match flag(rdb)? {
        false => None,
        true => Some(Lease {
            holder: text(rdb, "holder")?,
            id: text(rdb, "lease id")?,
            token: unsigned(rdb)?,
            deadline_ms: signed(rdb)?,
        }),
    };
    Ok(Lock { last_token, lease })
}

fn load_db(rdb: *mut RedisModuleIO) -> Loaded<Db> {
    let mut db = Db::default();
    for _ in 0..unsigned(rdb)? {
        let key = bytes(rdb)?;
        let fence = load_fence(rdb)?.ok_or("a fence is missing")?;
        db.fences.insert(key, fence);
    }
    for _ in 0..unsigned(rdb)? {
        let name = text(rdb, "lock name")?;
        db.locks.insert(name, load_lock(rdb)?);
    }
    Ok(db)
}

fn load(rdb: *mut RedisModuleIO) -> Loaded<State> {
    let mut state = State::default();
    for _ in 0..unsigned(rdb)? {
        let number = db_number(rdb)?;
        state.dbs.insert(number, load_db(rdb)?);
    }
    state.next_reset = unsigned(rdb)?;
    for _ in 0..unsigned(rdb)? {
        state.record_reset(ResetRecord {
            id: unsigned(rdb)?,
            time_ms: signed(rdb)?,
            db: db_number(rdb)?,
            key: bytes(rdb)?,
            user: text(rdb, "user")?,
            reason: text(rdb, "reason")?,
            before: load_fence(rdb)?,
            after: load_fence(rdb)?,
        });
    }
    Ok(state)
}
