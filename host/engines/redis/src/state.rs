//! The module's state: every key's fence, every lock's token counter and
//! lease, and the record of operators' resets, kept in the module's own
//! memory beside the keyspace, never in it.
//!
//! Why beside: whatever Redis or its users do to keys cannot reach it.
//! Eviction under any `maxmemory-policy`, expiry, `DEL`, `UNLINK`, `RENAME`,
//! `MOVE`, `COPY`, `RESTORE`, `DECRBY`, `FLUSHDB`, `FLUSHALL` and `SWAPDB`
//! act on keys; the fences and counters are not keys, so none of them can
//! lower a token or remove a fence. What carries the state across a restart
//! and to replicas is the module itself: the RDB's aux field
//! (`persist.rs`) and the effects it replicates (`replicate.rs`).
//!
//! Invariants:
//! - a lock's counter only rises: a grant takes `last_token + 1`, a
//!   replicated grant raises it to at least its token; nothing lowers it;
//! - a fence only changes through an admitted write (the guard's new
//!   fence) or an operator's recorded reset (`reset.rs`);
//! - state is per database number (what a client `SELECT`s): `SWAPDB` moves
//!   data between numbers, never the fences and counters of a number;
//! - names are compared byte for byte: key `x` and key `{x}`, lock `orders`
//!   and lock `{orders}`, are distinct (nothing folds, wraps or tags them).
//!
//! The state sits behind one mutex, taken for a step at a time and never
//! held across a call into Redis (`RM_Call`), so that a command Redis runs
//! on the module's behalf cannot find it taken; a re-entrant use answers an
//! error instead of waiting for itself.

use fencing_runtime::{Fence, Sequencer};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// The reset records kept in memory (and in the RDB); every reset is also
/// a warning in Redis's log, which keeps them all.
pub const MAX_RESET_RECORDS: usize = 1024;

/// A held lock's current lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    /// 32 hex digits from the kernel's generator.
    pub id: String,
    pub token: u64,
    /// When the lease ends, in Unix milliseconds by Redis's clock.
    pub deadline_ms: i64,
}

/// A lock: the last token issued, and the lease that holds it (if any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    pub last_token: u64,
    pub lease: Option<Lease>,
}

impl Lock {
    /// The lease if it has not ended at `now_ms`.
    pub fn live_lease(&self, now_ms: i64) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| l.deadline_ms > now_ms)
    }
}

/// One database's fences and locks.
#[derive(Debug, Default)]
pub struct Db {
    /// Key (any bytes, as Redis keys are) to its fence.
    pub fences: HashMap<Vec<u8>, Fence>,
    pub locks: HashMap<String, Lock>,
}

/// An operator's reset of a key's fence, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetRecord {
    pub id: u64,
    pub time_ms: i64,
    pub db: i32,
    pub key: Vec<u8>,
    /// The ACL user that ran `FENCING.RESET`.
    pub user: String,
    pub reason: String,
    pub before: Option<Fence>,
    pub after: Option<Fence>,
}

/// Everything the module keeps.
#[derive(Debug)]
pub struct State {
    pub dbs: BTreeMap<i32, Db>,
    /// The newest [`MAX_RESET_RECORDS`] resets, oldest first.
    pub resets: VecDeque<ResetRecord>,
    /// The id the next reset record takes (ids never repeat).
    pub next_reset: u64,
    /// What the guard is asked with, kept to reuse its lock name's buffer.
    scratch: Sequencer,
}

static STATE: Mutex<State> = Mutex::new(State::new());

impl Default for State {
    fn default() -> Self {
        State::new()
    }
}

/// The state, or an error reply's text when it is already taken (a
/// re-entrant call: the module never waits for itself).
pub fn lock() -> Result<MutexGuard<'static, State>, &'static str> {
    match STATE.try_lock() {
        Ok(s) => Ok(s),
        // A panic while the state was taken was caught at the boundary; the
        // steps that change it are single assignments, so it is whole.
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => {
            Err("ERR the fencing module's state is in use by the command that called this one")
        }
    }
}

impl State {
    /// No fence, no lock, no record.
    pub const fn new() -> Self {
        State {
            dbs: BTreeMap::new(),
            resets: VecDeque::new(),
            next_reset: 1,
            scratch: Sequencer { lock: String::new(), token: 0, sequence: None },
        }
    }

    /// The databases and the reusable sequencer, both borrowed at once.
    pub fn parts(&mut self) -> (&mut BTreeMap<i32, Db>, &mut Sequencer) {
        (&mut self.dbs, &mut self.scratch)
    }

    /// Database `db`'s state, if it has any.
    pub fn db(&self, db: i32) -> Option<&Db> {
        self.dbs.get(&db)
    }

    /// Database `db`'s state, made if it has none.
    pub fn db_mut(&mut self, db: i32) -> &mut Db {
        self.dbs.entry(db).or_default()
    }

    /// The fence of `key` in `db`.
    pub fn fence(&self, db: i32, key: &[u8]) -> Option<&Fence> {
        self.db(db)?.fences.get(key)
    }

    /// Stores `fence` as `key`'s.
    pub fn set_fence(&mut self, db: i32, key: &[u8], fence: Fence) {
        let fences = &mut self.db_mut(db).fences;
        match fences.get_mut(key) {
            Some(f) => *f = fence,
            None => {
                fences.insert(key.to_vec(), fence);
            }
        }
    }

    /// Removes `key`'s fence; the fence it had.
    pub fn remove_fence(&mut self, db: i32, key: &[u8]) -> Option<Fence> {
        self.dbs.get_mut(&db)?.fences.remove(key)
    }

    /// Lock `name` in `db`.
    pub fn lock(&self, db: i32, name: &str) -> Option<&Lock> {
        self.db(db)?.locks.get(name)
    }

    /// Lock `name` in `db`, made (never granted) if it is new.
    pub fn lock_mut(&mut self, db: i32, name: &str) -> &mut Lock {
        self.db_mut(db).locks.entry(name.to_owned()).or_default()
    }

    /// Records a grant of `lease` (its token raises the counter; never lowers it).
    pub fn grant(&mut self, db: i32, name: &str, lease: Lease) {
        let lock = self.lock_mut(db, name);
        lock.last_token = lock.last_token.max(lease.token);
        lock.lease = Some(lease);
    }

    /// Appends a reset record, dropping the oldest beyond [`MAX_RESET_RECORDS`].
    pub fn record_reset(&mut self, record: ResetRecord) {
        self.next_reset = self.next_reset.max(record.id.saturating_add(1));
        self.resets.push_back(record);
        while self.resets.len() > MAX_RESET_RECORDS {
            self.resets.pop_front();
        }
    }

    /// How many fences and locks all databases hold.
    pub fn counts(&self) -> (usize, usize) {
        self.dbs.values().fold((0, 0), |(f, l), db| (f + db.fences.len(), l + db.locks.len()))
    }

    /// Forgets everything (a load is about to replace it).
    pub fn clear(&mut self) {
        *self = State::new();
    }

    /// Merges `other` in: the higher of two fences' marks, the higher of two
    /// counters, the later lease; records by id.
    pub fn merge(&mut self, other: State) {
        for (n, db) in other.dbs {
            let mine = self.db_mut(n);
            for (key, fence) in db.fences {
                match mine.fences.get(&key) {
                    Some(f) if f.high_water > fence.high_water => {}
                    _ => {
                        mine.fences.insert(key, fence);
                    }
                }
            }
            for (name, lock) in db.locks {
                let m = mine.locks.entry(name).or_default();
                m.last_token = m.last_token.max(lock.last_token);
                if lock.lease.as_ref().map(|l| l.token) >= m.lease.as_ref().map(|l| l.token) {
                    m.lease = lock.lease;
                }
            }
        }
        for r in other.resets {
            if !self.resets.iter().any(|m| m.id == r.id) {
                self.record_reset(r);
            }
        }
        self.resets.make_contiguous().sort_by_key(|r| r.id);
        self.next_reset = self.next_reset.max(other.next_reset);
    }
}
