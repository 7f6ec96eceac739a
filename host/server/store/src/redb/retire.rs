//! Retiring the fences of resources that hold no objects, on a stopped
//! server's store (`fencing admin retire-fences`).
//!
//! A fence outlives its resource's objects: deleting every object leaves the
//! row that remembers the high-water mark, and a store that has seen many
//! resource names keeps all of their fences. Removing a fence outright would
//! let a paused client's older token in again as a "first write", so a
//! retired fence leaves its mark behind in its lock's *floor* ([`FLOORS`]):
//! one row per lock holding the highest (token, sequence) retired under it.
//! A write to a resource with no fence is decided against its lock's floor as
//! if that were the resource's fence, so no token a retired fence would have
//! refused is admitted.
//!
//! What retiring forgets: which lock a resource was bound to (a write under
//! another lock is then a first write), and a resource's own mark where its
//! lock's floor is higher (its writes must then reach the floor, which only
//! an older lease's tokens do not).
//!
//! Floors accumulate, one per lock ever retired under. [`drop_floors_below`]
//! (`fencing admin drop-floors`) folds every floor whose mark is below a
//! token `N` into one *store floor* (the row of the empty lock name, which
//! no real lock has: names are never empty): a write to a resource with no
//! fence, under a lock with no floor of its own, is decided against it.
//! Folding never lets a token in that a floor refused: the store floor is
//! the highest of the folded marks, so it refuses everything each of them
//! did, on their locks and on every lock without a floor. What it can cost
//! is the other way: a token below the store floor from a lease still held
//! is refused on resources without a fence. So `N` is the lowest token the
//! lock service can still grant: every lease granted from then on is above
//! the store floor, and the floors below `N` refuse only tokens of leases
//! that ended (a paused holder's) or of the few still held, which acquire
//! again. Simply deleting the floors would let those paused holders in
//! again as first writes.

use super::lifecycle::open_store;
use super::schema::{FENCES, FLOORS, META, OBJECTS, STORED_BYTES, db_err, decode_fence, fence_row, floor_row};
use crate::StorageError;
use ::redb::{Database, Durability, ReadableTable};
use fencing_runtime::Fence;
use std::path::Path;

/// The key of the store floor in [`FLOORS`]: no lock is named the empty text.
const STORE_FLOOR: &str = "";

/// What a retirement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Retired {
    /// Fences removed (resources with no objects).
    pub fences: u64,
    /// Locks whose floor was created or raised.
    pub floors_raised: u64,
    /// Floors the store holds now (one per lock; the store floor counted too).
    pub floors: u64,
    /// What they cost in the quota's measure.
    pub floor_bytes: u64,
    /// The store's measure before and after (`--max-store-bytes` counts it).
    pub stored_bytes_before: u64,
    pub stored_bytes_after: u64,
}

/// Retires the fence of every resource in the stopped store in `dir` that
/// holds no object, into its lock's floor, in one durable transaction.
pub fn retire_empty_fences(dir: &Path) -> Result<Retired, StorageError> {
    let (db, log) = open_store(dir)?;
    retire(&db, log.stored_bytes)
}

fn retire(db: &Database, stored: u64) -> Result<Retired, StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    let mut retired = Retired {
        fences: 0,
        floors_raised: 0,
        floors: 0,
        floor_bytes: 0,
        stored_bytes_before: stored,
        stored_bytes_after: stored,
    };
    {
        let mut fences = txn.open_table(FENCES).map_err(db_err)?;
        let objects = txn.open_table(OBJECTS).map_err(db_err)?;
        let mut floors = txn.open_table(FLOORS).map_err(db_err)?;
        let mut empty: Vec<(String, Fence)> = Vec::new();
        for row in fences.iter().map_err(db_err)? {
            let (key, value) = row.map_err(db_err)?;
            let resource = key.value();
            let first = objects.range((resource, "")..).map_err(db_err)?.next().transpose().map_err(db_err)?;
            if first.is_none_or(|(k, _)| k.value().0 != resource) {
                empty.push((resource.to_owned(), decode_fence(value.value())));
            }
        }
        let mut measure = stored as i64;
        let mut raised = std::collections::HashSet::new();
        for (resource, fence) in empty {
            fences.remove(resource.as_str()).map_err(db_err)?;
            measure -= fence_row(&resource, &fence.lock) as i64;
            let old = floors.get(fence.lock.as_str()).map_err(db_err)?.map(|v| v.value());
            let new = raise(old, (fence.high_water, fence.sequence));
            if old.is_none() {
                measure += floor_row(&fence.lock) as i64;
            }
            if old != Some(new) {
                floors.insert(fence.lock.as_str(), new).map_err(db_err)?;
                raised.insert(fence.lock);
            }
            retired.fences += 1;
        }
        retired.floors_raised = raised.len() as u64;
        (retired.floors, retired.floor_bytes) = count(&floors)?;
        retired.stored_bytes_after = measure.max(0) as u64;
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(STORED_BYTES, retired.stored_bytes_after).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    Ok(retired)
}

/// What folding floors into the store floor did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DroppedFloors {
    /// The token every dropped floor was below.
    pub below: u64,
    /// Floors before and after (the store floor counted), and how many were folded.
    pub floors_before: u64,
    pub floors_dropped: u64,
    pub floors_after: u64,
    /// What floors cost in the quota's measure, before and after.
    pub floor_bytes_before: u64,
    pub floor_bytes_after: u64,
    /// The store floor now (token, sequence): a write to a resource with no
    /// fence, under a lock without a floor of its own, must reach it.
    pub store_floor: Option<(u64, Option<u64>)>,
    /// The store's measure before and after.
    pub stored_bytes_before: u64,
    pub stored_bytes_after: u64,
}

/// Folds every lock's floor below `below` into the store floor, in the
/// stopped store in `dir`, in one durable transaction (see the module docs
/// for when that is safe: `below` at or below every token the lock service
/// can still grant or has out).
pub fn drop_floors_below(dir: &Path, below: u64) -> Result<DroppedFloors, StorageError> {
    let (db, log) = open_store(dir)?;
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    let stored = log.stored_bytes;
    let dropped = {
        let mut floors = txn.open_table(FLOORS).map_err(db_err)?;
        let (floors_before, floor_bytes_before) = count(&floors)?;
        let mut passed = Vec::new();
        for row in floors.iter().map_err(db_err)? {
            let (lock, mark) = row.map_err(db_err)?;
            if lock.value() != STORE_FLOOR && mark.value().0 < below {
                passed.push((lock.value().to_owned(), mark.value()));
            }
        }
        let old_store = floors.get(STORE_FLOOR).map_err(db_err)?.map(|v| v.value());
        let mut store = old_store;
        for (lock, mark) in &passed {
            floors.remove(lock.as_str()).map_err(db_err)?;
            store = Some(raise(store, *mark));
        }
        if store != old_store
            && let Some(store) = store
        {
            floors.insert(STORE_FLOOR, store).map_err(db_err)?;
        }
        let (floors_after, floor_bytes_after) = count(&floors)?;
        let stored_after = (stored + floor_bytes_after).saturating_sub(floor_bytes_before);
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(STORED_BYTES, stored_after).map_err(db_err)?;
        DroppedFloors {
            below,
            floors_before,
            floors_dropped: passed.len() as u64,
            floors_after,
            floor_bytes_before,
            floor_bytes_after,
            store_floor: store,
            stored_bytes_before: stored,
            stored_bytes_after: stored_after,
        }
    };
    txn.commit().map_err(db_err)?;
    Ok(dropped)
}

/// How many floors `floors` holds, and what they cost in the quota's measure.
fn count(floors: &impl ReadableTable<&'static str, (u64, Option<u64>)>) -> Result<(u64, u64), StorageError> {
    let (mut n, mut bytes) = (0, 0);
    for row in floors.iter().map_err(db_err)? {
        n += 1;
        bytes += floor_row(row.map_err(db_err)?.0.value());
    }
    Ok((n, bytes))
}

/// The higher of a floor and a retired fence's (token, sequence): by token,
/// then by sequence under the same token.
pub(super) fn raise(floor: Option<(u64, Option<u64>)>, fence: (u64, Option<u64>)) -> (u64, Option<u64>) {
    match floor {
        Some(f) if f.0 > fence.0 => f,
        Some(f) if f.0 == fence.0 => (f.0, f.1.max(fence.1)),
        _ => fence,
    }
}

/// The fence a write to a resource without one is decided against: its
/// lock's floor, or else the store floor, if any.
pub(super) fn floor_fence(
    floors: &impl ReadableTable<&'static str, (u64, Option<u64>)>,
    lock: &str,
) -> Result<Option<Fence>, StorageError> {
    let floor = match floors.get(lock).map_err(db_err)? {
        Some(own) => Some(own.value()),
        None => floors.get(STORE_FLOOR).map_err(db_err)?.map(|v| v.value()),
    };
    Ok(floor.map(|(high_water, sequence)| Fence { lock: lock.to_owned(), high_water, sequence }))
}

#[cfg(test)]
mod tests {
    use super::raise;

    #[test]
    fn a_floor_only_rises() {
        assert_eq!(raise(None, (5, None)), (5, None));
        assert_eq!(raise(Some((7, Some(1))), (5, Some(9))), (7, Some(1)));
        assert_eq!(raise(Some((5, Some(1))), (5, Some(9))), (5, Some(9)));
        assert_eq!(raise(Some((5, Some(9))), (5, None)), (5, Some(9)));
        assert_eq!(raise(Some((5, None)), (6, None)), (6, None));
    }
}
