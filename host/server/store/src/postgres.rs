//! The PostgreSQL engine: each resource's data beside its last admitted token.
//!
//! Schema (created if missing):
//! - `fencing_resources(resource_id PK, lock_id, last_fencing_token, last_sequence, updated_at)`:
//!   one row per resource, the fence. `lock_id IS NULL` means no write was admitted yet.
//! - `fencing_objects(resource_id, file_path, data BYTEA, PK(resource_id, file_path))`.
//!
//! A write runs in one transaction: ensure the fence row exists, read it
//! `FOR UPDATE` (so concurrent writers to the same resource serialize on the
//! row lock and nothing interleaves between check and write), ask the guard,
//! and on admission apply the mutation and update the fence before `COMMIT`.
//! A refused write rolls back, so it changes nothing (not even the empty row).
//! Writes to different resources lock different rows and run in parallel on
//! the pool's connections; PostgreSQL's own WAL flush gives durability.
//!
//! A pooled connection found closed (the database restarted, or killed the
//! backend) is replaced by a fresh one before its next statement, so a
//! database restart costs the requests that were in flight, never the server.
//!
//! Tokens and sequences are `u64` stored bit-for-bit in `BIGINT`; SQL never
//! compares them (the guard does), so values above `i64::MAX` round-trip intact.
//!
//! With [`PgGuard::Extension`] the decision moves into the database: the
//! `fencing` extension keeps the fences (`fencing.fences`, not
//! `fencing_resources`) and protects `fencing_objects`, so direct SQL writers
//! are fenced too (`pg_extension.rs`). Each object row records the lock,
//! token and sequence of the write that last changed it, in either mode.
//! Switching modes on one database carries the fences over, never lowering one.

use super::{Engine, MAX_OBJECT_BYTES, Mutation, ReadResult, StorageError, ValidWrite, WriteOutcome, pg_extension};
use fencing_runtime::{Fence, Guard, Policy, Verifier};
use futures::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::{Client, NoTls};

/// Connections opened by [`PostgresEngine::connect`].
pub const POOL_SIZE: usize = 16;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fencing_resources (
    resource_id        TEXT PRIMARY KEY,
    lock_id            TEXT,
    last_fencing_token BIGINT NOT NULL DEFAULT 0,
    last_sequence      BIGINT,
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS fencing_objects (
    resource_id TEXT NOT NULL,
    file_path   TEXT NOT NULL,
    data        BYTEA NOT NULL,
    PRIMARY KEY (resource_id, file_path)
);
ALTER TABLE fencing_objects ADD COLUMN IF NOT EXISTS lock_id TEXT,
    ADD COLUMN IF NOT EXISTS fencing_token BIGINT, ADD COLUMN IF NOT EXISTS sequence BIGINT;";

/// Who decides the writes of a [`PostgresEngine`].
#[derive(Clone)]
pub enum PgGuard {
    /// This process, with the given guard, before it writes.
    Host(Arc<dyn Guard>),
    /// The `fencing` extension inside PostgreSQL, in the writing transaction.
    Extension,
}

/// A fenced store on PostgreSQL, with a fixed pool of connections.
pub struct PostgresEngine {
    url: String,
    pool: Vec<Mutex<Client>>,
    next: AtomicUsize,
    guard: PgGuard,
    policy: Policy,
    /// `--max-token-advance` (`u64::MAX`: none).
    max_advance: u64,
    /// The keys signed writes are checked with (host guard only; `None`: unsigned).
    verifier: Option<Arc<Verifier>>,
}

fn pg(e: tokio_postgres::Error) -> StorageError {
    if e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL) {
        return StorageError::NoSpace(format!("postgres: {e}"));
    }
    StorageError::Backend(format!("postgres: {e}"))
}

/// Opens one connection and drives it on the runtime.
async fn open(url: &str) -> Result<Client, StorageError> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.map_err(pg)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "postgres connection closed");
        }
    });
    Ok(client)
}

fn to_fence(lock: Option<String>, token: i64, sequence: Option<i64>) -> Option<Fence> {
    lock.map(|lock| Fence { lock, high_water: token as u64, sequence: sequence.map(|s| s as u64) })
}

impl PostgresEngine {
    /// Connects `POOL_SIZE` clients to `url` and creates the tables if missing
    /// (and, for [`PgGuard::Extension`], the extension and the objects table's protection).
    pub async fn connect(url: &str, guard: PgGuard, policy: Policy) -> Result<PostgresEngine, StorageError> {
        let mut pool = Vec::with_capacity(POOL_SIZE);
        for _ in 0..POOL_SIZE {
            pool.push(Mutex::new(open(url).await?));
        }
        pool[0].lock().await.batch_execute(SCHEMA).await.map_err(pg)?;
        match guard {
            PgGuard::Extension => {
                let setup = pg_extension::setup_sql(policy);
                pool[0].lock().await.batch_execute(&setup).await.map_err(pg_extension::setup_error)?;
            }
            PgGuard::Host(_) => {
                pool[0].lock().await.batch_execute(pg_extension::ADOPT_EXTENSION_FENCES).await.map_err(pg)?;
            }
        }
        Ok(PostgresEngine {
            url: url.to_string(),
            pool,
            next: AtomicUsize::new(0),
            guard,
            policy,
            max_advance: u64::MAX,
            verifier: None,
        })
    }

    /// Checks every write's proof with `verifier` before its fence. Only the
    /// host guard takes keys from the server: with [`PgGuard::Extension`] the
    /// extension checks the proofs the server hands it with PostgreSQL's own
    /// `fencing.verify_keys`, so this is refused.
    pub fn with_verifier(mut self, verifier: Arc<Verifier>) -> Result<PostgresEngine, StorageError> {
        if let PgGuard::Extension = self.guard {
            return Err(StorageError::Backend(
                "with --pg-guard extension, PostgreSQL checks proofs with its own setting fencing.verify_keys \
                 (the server hands it each write's fencing_proof): set that instead of --verify-keys, or use \
                 --pg-guard host"
                    .into(),
            ));
        }
        self.verifier = Some(verifier);
        Ok(self)
    }

    /// Bounds how far one write may raise a resource's high-water mark (`None`: no bound).
    pub fn with_max_token_advance(mut self, max: Option<u64>) -> PostgresEngine {
        self.max_advance = max.unwrap_or(u64::MAX);
        self
    }

    /// The next pooled connection, reopened first if it was closed.
    async fn client(&self) -> Result<MutexGuard<'_, Client>, StorageError> {
        let mut client = self.pool[self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len()].lock().await;
        if client.is_closed() {
            *client = open(&self.url).await?;
            tracing::info!("reopened a closed postgres connection");
        }
        Ok(client)
    }

    async fn write_inner(&self, req: ValidWrite) -> Result<WriteOutcome, StorageError> {
        let mut client = self.client().await?;
        let txn = client.transaction().await.map_err(pg)?;
        let rid = req.resource_id.as_str();
        let decided = match &self.guard {
            PgGuard::Host(guard) => {
                let verifier = self.verifier.as_deref();
                decide_here(&txn, &**guard, self.policy, verifier, self.max_advance, &req).await?
            }
            PgGuard::Extension => pg_extension::decide(&txn, &req, self.policy, self.max_advance).await?,
        };
        let admission = match decided {
            Ok(admission) => admission,
            Err(refused) => {
                txn.rollback().await.map_err(pg)?;
                return Ok(refused);
            }
        };
        let token = admission.high_water as i64;
        let sequence = admission.sequence.map(|s| s as i64);
        let lock = req.lock_id.as_str();
        let path = req.file_path.as_str();
        match req.mutation {
            Mutation::Put => {
                txn.execute(
                    "INSERT INTO fencing_objects (resource_id, file_path, data, lock_id, fencing_token, sequence)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (resource_id, file_path) DO UPDATE SET data = EXCLUDED.data,
                         lock_id = EXCLUDED.lock_id, fencing_token = EXCLUDED.fencing_token, sequence = EXCLUDED.sequence",
                    &[&rid, &path, &req.bytes, &lock, &token, &sequence],
                )
                .await
                .map_err(pg)?;
            }
            Mutation::Append => {
                let row = txn
                    .query_one(
                        "INSERT INTO fencing_objects (resource_id, file_path, data, lock_id, fencing_token, sequence)
                         VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (resource_id, file_path) DO UPDATE SET data = fencing_objects.data || EXCLUDED.data,
                             lock_id = EXCLUDED.lock_id, fencing_token = EXCLUDED.fencing_token, sequence = EXCLUDED.sequence
                         RETURNING octet_length(data)",
                        &[&rid, &path, &req.bytes, &lock, &token, &sequence],
                    )
                    .await
                    .map_err(pg)?;
                let size = row.get::<_, i32>(0) as usize;
                if size > MAX_OBJECT_BYTES {
                    txn.rollback().await.map_err(pg)?;
                    return Err(StorageError::TooLarge { size, limit: MAX_OBJECT_BYTES });
                }
            }
            Mutation::Delete => {
                txn.execute("DELETE FROM fencing_objects WHERE resource_id = $1 AND file_path = $2", &[&rid, &path])
                    .await
                    .map_err(pg)?;
            }
        }
        if let PgGuard::Host(_) = self.guard {
            txn.execute(
                "UPDATE fencing_resources SET lock_id = $2, last_fencing_token = $3, last_sequence = $4, updated_at = now()
                 WHERE resource_id = $1",
                &[&rid, &req.lock_id, &token, &sequence],
            )
            .await
            .map_err(pg)?;
        }
        txn.commit().await.map_err(pg)?;
        Ok(admission.into())
    }
}

/// The host's own decision: the fence row is created if missing and locked
/// `FOR UPDATE`, then the guard decides against it.
async fn decide_here(
    txn: &tokio_postgres::Transaction<'_>,
    guard: &dyn Guard,
    policy: Policy,
    verifier: Option<&Verifier>,
    max_advance: u64,
    req: &ValidWrite,
) -> Result<Result<fencing_runtime::Admission, WriteOutcome>, StorageError> {
    let rid = req.resource_id.as_str();
    txn.execute("INSERT INTO fencing_resources (resource_id) VALUES ($1) ON CONFLICT DO NOTHING", &[&rid])
        .await
        .map_err(pg)?;
    let row = txn
        .query_one(
            "SELECT lock_id, last_fencing_token, last_sequence FROM fencing_resources WHERE resource_id = $1 FOR UPDATE",
            &[&rid],
        )
        .await
        .map_err(pg)?;
    let current = to_fence(row.get(0), row.get(1), row.get(2));
    Ok(super::decide(guard, policy, verifier, max_advance, current, req))
}

/// Replaces the fence row's values in the host's own table, returning the old fence.
async fn reset_here(
    txn: &tokio_postgres::Transaction<'_>,
    rid: &str,
    to: Option<&Fence>,
) -> Result<Option<Fence>, StorageError> {
    let row = txn
        .query_opt(
            "SELECT lock_id, last_fencing_token, last_sequence FROM fencing_resources WHERE resource_id = $1 FOR UPDATE",
            &[&rid],
        )
        .await
        .map_err(pg)?;
    let before = row.and_then(|r| to_fence(r.get(0), r.get(1), r.get(2)));
    let (lock, token, sequence) = match to {
        Some(f) => (Some(f.lock.as_str()), f.high_water as i64, f.sequence.map(|s| s as i64)),
        None => (None, 0, None),
    };
    txn.execute(
        "INSERT INTO fencing_resources (resource_id, lock_id, last_fencing_token, last_sequence) VALUES ($1, $2, $3, $4)
         ON CONFLICT (resource_id) DO UPDATE SET lock_id = EXCLUDED.lock_id,
             last_fencing_token = EXCLUDED.last_fencing_token, last_sequence = EXCLUDED.last_sequence, updated_at = now()",
        &[&rid, &lock, &token, &sequence],
    )
    .await
    .map_err(pg)?;
    Ok(before)
}

impl PostgresEngine {
    /// The fences of this engine's mode, as `(lock, high_water, sequence, resource)` rows.
    fn fences(&self) -> &'static str {
        match self.guard {
            PgGuard::Host(_) => "SELECT lock_id, last_fencing_token, last_sequence, resource_id FROM fencing_resources",
            PgGuard::Extension => "SELECT lock, high_water, sequence, resource FROM fencing.fences",
        }
    }
}

impl Engine for PostgresEngine {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn write(&self, req: ValidWrite) -> BoxFuture<'_, Result<WriteOutcome, StorageError>> {
        Box::pin(self.write_inner(req))
    }

    fn read<'a>(&'a self, resource_id: &'a str, file_path: &'a str) -> BoxFuture<'a, Result<ReadResult, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            super::validate_file_path(file_path)?;
            let client = self.client().await?;
            // One statement, one snapshot: the object and the fence agree.
            let sql = format!(
                "SELECT r.lock, COALESCE(r.high_water, 0), r.seq,
                        (SELECT data FROM fencing_objects o WHERE o.resource_id = $1 AND o.file_path = $2)
                 FROM (SELECT $1::text AS id) q LEFT JOIN ({}) r(lock, high_water, seq, id) ON r.id = q.id",
                self.fences()
            );
            let row = client.query_one(&sql, &[&resource_id, &file_path]).await.map_err(pg)?;
            let bytes: Option<Vec<u8>> = row.get(3);
            Ok(ReadResult { bytes: bytes.map(bytes::Bytes::from), fence: to_fence(row.get(0), row.get(1), row.get(2)) })
        })
    }

    fn fence<'a>(&'a self, resource_id: &'a str) -> BoxFuture<'a, Result<Option<Fence>, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            let client = self.client().await?;
            let sql = format!("SELECT * FROM ({}) r(lock, high_water, seq, id) WHERE r.id = $1", self.fences());
            let row = client.query_opt(&sql, &[&resource_id]).await.map_err(pg)?;
            Ok(row.and_then(|r| to_fence(r.get(0), r.get(1), r.get(2))))
        })
    }

    fn reset_fence<'a>(
        &'a self,
        resource_id: &'a str,
        to: Option<Fence>,
        reason: &'a str,
    ) -> BoxFuture<'a, Result<Option<Fence>, StorageError>> {
        Box::pin(async move {
            super::validate_resource_id(resource_id)?;
            let mut client = self.client().await?;
            let txn = client.transaction().await.map_err(pg)?;
            let before = match self.guard {
                PgGuard::Host(_) => reset_here(&txn, resource_id, to.as_ref()).await?,
                PgGuard::Extension => pg_extension::reset(&txn, resource_id, to.as_ref(), reason).await?,
            };
            txn.commit().await.map_err(pg)?;
            Ok(before)
        })
    }
}
