//! The embedded store's tables and every change made to them: one place
//! says what a row holds, how a logged write is applied (in its batch, and
//! again when the store opens and replays its log), how an operator's reset
//! and a checkpoint change them, and how a redb error reads as a
//! [`StorageError`].

use super::wal::RecordRef;
use super::{MAX_OBJECT_BYTES, Mutation, StorageError};
use ::redb::{Database, Durability, ReadableTable, TableDefinition, WriteTransaction};
use fencing_runtime::Fence;

/// resource id -> (lock, high-water, last sequence).
pub(super) const FENCES: TableDefinition<&str, (&str, u64, Option<u64>)> = TableDefinition::new("fences");
/// (resource id, file path) -> object bytes.
pub(super) const OBJECTS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("objects");
/// `wal_applied` -> the LSN of the last log record applied, written in the transaction that applied it.
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const WAL_APPLIED: &str = "wal_applied";
/// `object_bytes` -> the bytes of every object, kept with the writes that change it (the quota's measure).
pub(super) const OBJECT_BYTES: &str = "object_bytes";
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

/// Sets (or with `to` `None`, removes) one resource's fence in its own transaction; returns the fence it replaced.
pub(super) fn reset(db: &Database, resource_id: &str, to: Option<Fence>) -> Result<Option<Fence>, StorageError> {
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
    txn.commit().map_err(db_err)?;
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
/// bytes of all objects before anything changes and may refuse it (the
/// quota); replay admits everything. Returns that change.
pub(super) fn apply_record(
    fences: &mut ::redb::Table<&str, (&str, u64, Option<u64>)>,
    objects: &mut ::redb::Table<(&str, &str), &[u8]>,
    r: &RecordRef<'_>,
    admit: impl FnOnce(i64) -> Result<(), StorageError>,
) -> Result<i64, StorageError> {
    let key = (r.resource_id, r.file_path);
    // One lookup; the old bytes are copied only to be appended to.
    let (old_len, appended) = {
        let old = objects.get(key).map_err(db_err)?;
        let old = old.as_ref().map(|v| v.value());
        let appended = match r.mutation {
            Mutation::Append => Some(append(old.unwrap_or(&[]), r.bytes)?),
            Mutation::Put | Mutation::Delete => None,
        };
        (old.map_or(0, <[u8]>::len), appended)
    };
    let new_len = match (&appended, r.mutation) {
        (Some(bytes), _) => bytes.len(),
        (None, Mutation::Put) => r.bytes.len(),
        (None, _) => 0,
    };
    let change = new_len as i64 - old_len as i64;
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
