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

use super::lifecycle::open_store;
use super::schema::{FENCES, FLOORS, META, OBJECTS, STORED_BYTES, db_err, decode_fence, fence_row, floor_row};
use crate::StorageError;
use ::redb::{Database, Durability, ReadableTable};
use fencing_runtime::Fence;
use std::path::Path;

/// What a retirement did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Retired {
    /// Fences removed (resources with no objects).
    pub fences: u64,
    /// Locks whose floor was created or raised.
    pub floors_raised: u64,
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
    let mut retired = Retired { fences: 0, floors_raised: 0, stored_bytes_before: stored, stored_bytes_after: stored };
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
        retired.stored_bytes_after = measure.max(0) as u64;
        let mut meta = txn.open_table(META).map_err(db_err)?;
        meta.insert(STORED_BYTES, retired.stored_bytes_after).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    Ok(retired)
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

/// The fence a write to a resource without one is decided against: its lock's floor, if any.
pub(super) fn floor_fence(
    floors: &impl ReadableTable<&'static str, (u64, Option<u64>)>,
    lock: &str,
) -> Result<Option<Fence>, StorageError> {
    let floor = floors.get(lock).map_err(db_err)?.map(|v| v.value());
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
