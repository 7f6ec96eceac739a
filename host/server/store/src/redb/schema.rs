//! The embedded store's tables and every change made to them: one place
//! says what a row holds, how a logged write is applied (in its batch, and
//! again when the store opens and replays its log), how an operator's reset
//! and a checkpoint change them, and how a redb error reads as a
//! [`StorageError`].

use super::wal::RecordRef;
use crate::{MAX_OBJECT_BYTES, Mutation, StorageError};
use ::redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition, WriteTransaction};
use fencing_runtime::Fence;

/// resource id -> (lock, high-water, last sequence).
pub(super) const FENCES: TableDefinition<&str, (&str, u64, Option<u64>)> = TableDefinition::new("fences");
/// (resource id, file path) -> object bytes.
pub(super) const OBJECTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("objects");
/// `wal_applied` -> the LSN of the last log record applied, written in the transaction that applied it.
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const WAL_APPLIED: &str = "wal_applied";
/// `stored_bytes` -> what every row of the store costs ([`object_row`],
/// [`fence_row`], [`floor_row`]), kept with the changes that make it (the
/// quota's measure: names, paths and fences count as well as object bytes).
pub(super) const STORED_BYTES: &str = "stored_bytes";
/// lock id -> (token, sequence): the highest fence retired under the lock
/// ([`retire`]). A resource with no fence written under the lock is decided
/// against this floor, so retiring never lets an older token in again.
pub(super) const FLOORS: TableDefinition<&str, (u64, Option<u64>)> = TableDefinition::new("retired_floors");

/// What a row costs in the quota's measure beyond its keys and values
/// (redb's entry overhead, rounded up).
const ROW_OVERHEAD: u64 = 32;

/// The quota's cost of an object row.
pub(super) fn object_row(resource_id: &str, path: &str, len: usize) -> u64 {
    (resource_id.len() + path.len() + len) as u64 + ROW_OVERHEAD
}

/// The quota's cost of a fence row (the mark and the optional sequence: 17 bytes).
pub(super) fn fence_row(resource_id: &str, lock: &str) -> u64 {
    (resource_id.len() + lock.len()) as u64 + 17 + ROW_OVERHEAD
}

/// The quota's cost of a lock's floor row.
pub(super) fn floor_row(lock: &str) -> u64 {
    lock.len() as u64 + 17 + ROW_OVERHEAD
}
/// A redb error as a storage error: a full disk is [`StorageError::NoSpace`].
pub(super) fn db_err(e: impl Into<::redb::Error>) -> StorageError {
    match e.into() {
        ::redb::Error::Io(io) => StorageError::io("store", &io),
        ::redb::Error::PreviousIo => {
            StorageError::Unavailable("the store is reopening after a failed write; retry shortly".into())
        }
        e => StorageError::Backend(e.to_string()),
    }
}

pub(super) fn decode_fence((lock, high_water, sequence): (&str, u64, Option<u64>)) -> Fence {
    Fence { lock: lock.to_owned(), high_water, sequence }
}

/// A write transaction that syncs nothing: the log is what makes a batch durable.
pub(super) fn begin(db: &Database) -> Result<WriteTransaction, StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::None).map_err(db_err)?;
    Ok(txn)
}

/// Sets (or with `to` `None`, removes) one resource's fence in its own
/// transaction, with the store's measure `stored`; returns the fence it replaced.
pub(super) fn reset(
    db: &Database,
    resource_id: &str,
    to: Option<Fence>,
    stored: &mut u64,
) -> Result<Option<Fence>, StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    let before = {
        let mut fences = txn.open_table(FENCES).map_err(db_err)?;
        let before = fences.get(resource_id).map_err(db_err)?.map(|v| decode_fence(v.value()));
        match &to {
            Some(f) => {
                fences.insert(resource_id, (f.lock.as_str(), f.high_water, f.sequence)).map_err(db_err)?;
            }
            None => {
                fences.remove(resource_id).map_err(db_err)?;
            }
        }
        before
    };
    let row = |f: Option<&Fence>| f.map_or(0, |f| fence_row(resource_id, &f.lock)) as i64;
    let measure = (*stored as i64 + row(to.as_ref()) - row(before.as_ref())).max(0) as u64;
    txn.open_table(META).map_err(db_err)?.insert(STORED_BYTES, measure).map_err(db_err)?;
    txn.commit().map_err(db_err)?;
    *stored = measure;
    Ok(before)
}

/// A durable commit: every earlier commit (and the LSN they applied) is on disk, so the log can be rewound.
pub(super) fn checkpoint(db: &Database) -> Result<(), StorageError> {
    let mut txn = db.begin_write().map_err(db_err)?;
    txn.set_durability(Durability::Immediate).map_err(db_err)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let applied = meta.get(WAL_APPLIED).map_err(db_err)?.map_or(0, |v| v.value());
        meta.insert(WAL_APPLIED, applied).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)
}

/// Applies a logged write (in its batch, and again when opening the store):
/// the same changes either way. `admit` sees how the write would change the
/// store's measure ([`STORED_BYTES`]) before anything changes and may refuse
/// it (the quota); replay admits everything. Returns that change.
pub(super) fn apply_record(
    fences: &mut ::redb::Table<&str, (&str, u64, Option<u64>)>,
    objects: &mut ::redb::Table<(&str, &str), &[u8]>,
    r: &RecordRef<'_>,
    admit: impl FnOnce(i64) -> Result<(), StorageError>,
) -> Result<i64, StorageError> {
    let old_fence = fences.get(r.resource_id).map_err(db_err)?.map(|v| fence_row(r.resource_id, v.value().0));
    let key = (r.resource_id, r.file_path);
    // One lookup; the old bytes are copied only to be appended to.
    let (old_row, appended) = {
        let old = objects.get(key).map_err(db_err)?;
        let old = old.as_ref().map(|v| v.value());
        let appended = match r.mutation {
            Mutation::Append => Some(append(old.unwrap_or(&[]), r.bytes)?),
            Mutation::Put | Mutation::Delete => None,
        };
        (old.map(|o| object_row(r.resource_id, r.file_path, o.len())), appended)
    };
    let new_len = match (&appended, r.mutation) {
        (Some(bytes), _) => Some(bytes.len()),
        (None, Mutation::Put) => Some(r.bytes.len()),
        (None, _) => None,
    };
    let new_row = new_len.map(|len| object_row(r.resource_id, r.file_path, len));
    let rows = |object: Option<u64>, fence: Option<u64>| (object.unwrap_or(0) + fence.unwrap_or(0)) as i64;
    let change = rows(new_row, Some(fence_row(r.resource_id, r.lock))) - rows(old_row, old_fence);
    admit(change)?;
    match (appended, r.mutation) {
        (Some(bytes), _) => objects.insert(key, bytes.as_slice()).map(drop),
        (None, Mutation::Put) => objects.insert(key, r.bytes).map(drop),
        (None, _) => objects.remove(key).map(drop),
    }
    .map_err(db_err)?;
    fences.insert(r.resource_id, (r.lock, r.high_water, r.sequence)).map_err(db_err)?;
    Ok(change)
}

/// The store's measure counted row by row (a store from before names and
/// fences were counted; written at its next commit).
pub(super) fn count_stored_bytes(db: &Database) -> Result<u64, StorageError> {
    let txn = db.begin_read().map_err(db_err)?;
    let mut total = 0u64;
    let absent = |e: &::redb::TableError| matches!(e, ::redb::TableError::TableDoesNotExist(_));
    match txn.open_table(OBJECTS) {
        Ok(objects) => {
            for row in objects.iter().map_err(db_err)? {
                let (k, v) = row.map_err(db_err)?;
                let (resource, path) = k.value();
                total += object_row(resource, path, v.value().len());
            }
        }
        Err(e) if absent(&e) => {}
        Err(e) => return Err(db_err(e)),
    }
    match txn.open_table(FENCES) {
        Ok(fences) => {
            for row in fences.iter().map_err(db_err)? {
                let (k, v) = row.map_err(db_err)?;
                total += fence_row(k.value(), v.value().0);
            }
        }
        Err(e) if absent(&e) => {}
        Err(e) => return Err(db_err(e)),
    }
    match txn.open_table(FLOORS) {
        Ok(floors) => {
            for row in floors.iter().map_err(db_err)? {
                total += floor_row(row.map_err(db_err)?.0.value());
            }
        }
        Err(e) if absent(&e) => {}
        Err(e) => return Err(db_err(e)),
    }
    Ok(total)
}

/// `old` followed by `bytes`, within the object size limit.
fn append(old: &[u8], bytes: &[u8]) -> Result<Vec<u8>, StorageError> {
    let size = old.len() + bytes.len();
    if size > MAX_OBJECT_BYTES {
        return Err(StorageError::TooLarge { size, limit: MAX_OBJECT_BYTES });
    }
    let mut out = Vec::with_capacity(size);
    out.extend_from_slice(old);
    out.extend_from_slice(bytes);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record<'a>(lsn: u64, resource: &'a str, path: &'a str, mutation: Mutation, bytes: &'a [u8]) -> RecordRef<'a> {
        RecordRef {
            lsn,
            resource_id: resource,
            file_path: path,
            mutation,
            bytes,
            lock: "a-lock",
            high_water: lsn,
            sequence: None,
        }
    }

    #[test]
    fn the_running_measure_is_what_a_recount_finds() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let writes = [
            ("r1", "/a", Mutation::Put, &b"hello"[..]),
            ("r1", "/a", Mutation::Append, b" world"),
            ("r1", "/b", Mutation::Put, b"x"),
            ("r2", "/long/path/here", Mutation::Put, b""),
            ("r1", "/a", Mutation::Delete, b""),
            ("r3", "/never", Mutation::Delete, b""),
            ("r2", "/long/path/here", Mutation::Put, b"replaced"),
        ];
        let txn = db.begin_write().unwrap();
        let mut measure = 0i64;
        {
            let mut fences = txn.open_table(FENCES).unwrap();
            let mut objects = txn.open_table(OBJECTS).unwrap();
            for (lsn, (resource, path, mutation, bytes)) in writes.into_iter().enumerate() {
                let r = record(lsn as u64 + 1, resource, path, mutation, bytes);
                measure += apply_record(&mut fences, &mut objects, &r, |_| Ok(())).unwrap();
            }
        }
        txn.commit().unwrap();
        assert_eq!(count_stored_bytes(&db).unwrap() as i64, measure);
        // Three fences, two objects left: r1 /b (1 byte), r2's path (8 bytes).
        let fences = 3 * (2 + 6 + 17 + 32);
        let objects = (2 + 2 + 1 + 32) + (2 + 15 + 8 + 32);
        assert_eq!(measure, fences + objects);
    }
}
