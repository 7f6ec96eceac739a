//! `--pg-guard extension`: the PostgreSQL engine leaves every decision to the
//! `fencing` extension inside the database, so the HTTP API and direct SQL
//! clients share one fence (`fencing.fences`).
//!
//! Set-up: `CREATE EXTENSION IF NOT EXISTS fencing`, columns `lock_id`,
//! `fencing_token` and `sequence` on `fencing_objects`, and
//! `fencing.protect('fencing_objects', ...)`, so a program that writes the
//! objects table directly is decided by the same fence.
//!
//! A write: `fencing.try_write(..)` (which the server's role may call as the
//! extension's owner or as a member of `fencing_writer`) locks the resource's fence row, asks the
//! component and raises the fence (or returns the refusal with its
//! evidence); the mutation follows in the same transaction, and the table's
//! trigger recognises it as the same write (same transaction, lock, token
//! and sequence) without deciding again. Tokens and sequences must fit in
//! `bigint`: anything above 2^63-1 is refused as an invalid field.
//!
//! Signed tokens: the keys are PostgreSQL's (`fencing.verify_keys`, set by
//! its superuser), not the server's; the server hands each write's
//! `fencing_proof` to the extension (`fencing.proof`, for the transaction)
//! and reports the extension's proof refusals as the host guard would.

use super::{Mutation, StorageError, ValidWrite, WriteOutcome};
use fencing_runtime::proof::ProofRejection;
use fencing_runtime::{Admission, Fence, GuardFailure, Policy, Rejection, accept, key_text};
use tokio_postgres::Transaction;
use tokio_postgres::error::SqlState;

/// Makes the database ready for extension-decided writes under `policy`.
///
/// Fences the server kept while it decided itself (`fencing_resources`)
/// move into `fencing.fences` first, never lowering one there, so switching
/// to the extension admits no stale write. A mark above 2^63-1 (stored
/// bit-for-bit, so negative in SQL) cannot be held by the extension: set-up
/// stops with its resource named.
pub(super) fn setup_sql(policy: Policy) -> String {
    format!(
        "CREATE EXTENSION IF NOT EXISTS fencing;
         DO $$ DECLARE r text; BEGIN
             SELECT resource_id INTO r FROM fencing_resources
             WHERE lock_id IS NOT NULL AND last_fencing_token < 0 LIMIT 1;
             IF r IS NOT NULL THEN
                 RAISE EXCEPTION 'resource % has a high-water mark above 2^63-1, which the fencing extension cannot \
                                  hold; keep serving it with --pg-guard host', r;
             END IF;
             -- Only when there is something to carry over: writing fencing.fences needs its owner's rights.
             IF EXISTS (SELECT 1 FROM fencing_resources WHERE lock_id IS NOT NULL) THEN
                 INSERT INTO fencing.fences (resource, lock, high_water, sequence)
                     SELECT resource_id, lock_id, last_fencing_token, last_sequence FROM fencing_resources
                     WHERE lock_id IS NOT NULL AND last_fencing_token > 0
                 ON CONFLICT (resource) DO UPDATE
                     SET lock = EXCLUDED.lock, high_water = EXCLUDED.high_water, sequence = EXCLUDED.sequence
                     WHERE fencing.fences.high_water < EXCLUDED.high_water;
             END IF;
         END $$;
         ALTER TABLE fencing_objects ADD COLUMN IF NOT EXISTS lock_id TEXT,
             ADD COLUMN IF NOT EXISTS fencing_token BIGINT, ADD COLUMN IF NOT EXISTS sequence BIGINT;
         SELECT fencing.protect('fencing_objects', 'resource_id', 'fencing_token', 'lock_id', 'sequence', '{}');",
        policy.name()
    )
}

/// For `--pg-guard host` on a database where the extension decided before:
/// its fences (including those raised by direct SQL writers) move into
/// `fencing_resources`, never lowering one there.
pub(super) const ADOPT_EXTENSION_FENCES: &str = "
DO $$ BEGIN
    IF pg_catalog.to_regclass('fencing.fences') IS NOT NULL THEN
        INSERT INTO fencing_resources (resource_id, lock_id, last_fencing_token, last_sequence)
            SELECT resource, lock, high_water, sequence FROM fencing.fences
        ON CONFLICT (resource_id) DO UPDATE
            SET lock_id = EXCLUDED.lock_id, last_fencing_token = EXCLUDED.last_fencing_token,
                last_sequence = EXCLUDED.last_sequence
            WHERE fencing_resources.lock_id IS NULL
               OR (fencing_resources.last_fencing_token >= 0
                   AND fencing_resources.last_fencing_token < EXCLUDED.last_fencing_token);
    END IF;
END $$;";

/// What an error during set-up means for the operator.
pub(super) fn setup_error(e: tokio_postgres::Error) -> StorageError {
    let hint = match e.code() {
        Some(c) if *c == SqlState::UNDEFINED_FILE || *c == SqlState::UNDEFINED_OBJECT => {
            " (the fencing extension is not installed in this PostgreSQL: run `scripts/pg-extension install`, \
             or serve with --pg-guard host)"
        }
        _ => "",
    };
    StorageError::Backend(format!("postgres: set up the fencing extension: {}{hint}", db_message(&e)))
}

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| e.to_string())
}

fn pg(e: tokio_postgres::Error) -> StorageError {
    if e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL) {
        return StorageError::NoSpace(format!("postgres: {}", db_message(&e)));
    }
    StorageError::Backend(format!("postgres: {}", db_message(&e)))
}

/// A u64 from the API as the extension's `bigint` ([`accept::to_signed`]).
fn bigint(field: &'static str, v: u64) -> Result<i64, StorageError> {
    accept::to_signed(v).map_err(|e| StorageError::InvalidField {
        field,
        message: format!("{e}; this server decides in PostgreSQL's bigint (--pg-guard extension)"),
    })
}

/// Decides `req` in the database and, on admission, raises the fence. The
/// admission, or the refusal to report, after which the caller rolls back.
pub(super) async fn decide(
    txn: &Transaction<'_>,
    req: &ValidWrite,
    policy: Policy,
    max_advance: u64,
) -> Result<Result<Admission, WriteOutcome>, StorageError> {
    let token = bigint("fencing_token", req.token)?;
    let sequence = req.sequence.map(|s| bigint("sequence", s)).transpose()?;
    let rid = req.resource_id.as_str();
    let lock = req.lock_id.as_str();
    if max_advance != u64::MAX {
        // The bound is the server's: checked against the fence row, locked until this transaction ends.
        let row = txn
            .query_opt("SELECT lock, high_water, sequence FROM fencing.fences WHERE resource = $1 FOR UPDATE", &[&rid])
            .await
            .map_err(pg)?;
        let fence = row.map(|r| Fence {
            lock: r.get(0),
            high_water: r.get::<_, i64>(1) as u64,
            sequence: r.get::<_, Option<i64>>(2).map(|s| s as u64),
        });
        if super::too_far_ahead(req.token, fence.as_ref(), max_advance) {
            return Ok(Err(WriteOutcome::TooFarAhead { max_advance, fence }));
        }
    }
    if let Some(proof) = &req.proof {
        // Checked by the extension when PostgreSQL has `fencing.verify_keys`.
        txn.execute("SELECT set_config('fencing.proof', $1, true)", &[&key_text::hex(proof)]).await.map_err(pg)?;
    }
    let decided = txn
        .query_one(
            "SELECT admitted, reason, high_water, last_sequence, new_term FROM fencing.try_write($1, $2, $3, $4, $5)",
            &[&rid, &lock, &token, &sequence, &policy.name()],
        )
        .await;
    let row = match decided {
        Ok(row) => row,
        Err(e) if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) => {
            return Err(StorageError::Backend(format!(
                "postgres: deciding in the fencing extension needs the role fencing_writer ({})",
                db_message(&e)
            )));
        }
        Err(e) if e.code().is_some_and(|c| c.code() == "FN010") => {
            let failure = guard_failure(&e);
            let fence = fence_in(txn, rid).await?;
            return Ok(Err(WriteOutcome::GuardFailed { failure, fence }));
        }
        Err(e) => return Err(pg(e)),
    };
    let high_water = row.get::<_, Option<i64>>(2).map(|v| v as u64).unwrap_or(0);
    let last = row.get::<_, Option<i64>>(3).map(|v| v as u64);
    if row.get::<_, bool>(0) {
        // The objects table's trigger decides DELETEs by these settings (rows carry the rest).
        if req.mutation == Mutation::Delete {
            txn.execute(
                "SELECT set_config('fencing.token', $1, true), set_config('fencing.lock', $2, true),
                        set_config('fencing.sequence', $3, true)",
                &[&token.to_string(), &lock, &sequence.map(|s| s.to_string()).unwrap_or_default()],
            )
            .await
            .map_err(pg)?;
        }
        return Ok(Ok(Admission { high_water, sequence: last, new_term: row.get(4) }));
    }
    let reason: String = row.get(1);
    let rejection = match reason.as_str() {
        "invalid_token" => Rejection::InvalidToken,
        "wrong_lock" => Rejection::WrongLock,
        "stale_token" => Rejection::StaleToken { presented: req.token, high_water },
        "token_reused" => Rejection::TokenReused { presented: req.token, high_water },
        "sequence_regressed" => {
            Rejection::SequenceRegressed { token: req.token, presented: req.sequence, last: last.unwrap_or(0) }
        }
        proof if proof.starts_with("proof_") => {
            let rejection = proof_rejection(proof, req.proof.as_deref().unwrap_or_default())?;
            return Ok(Err(WriteOutcome::ProofRefused { rejection, fence: fence_in(txn, rid).await? }));
        }
        other => {
            return Err(StorageError::Backend(format!("postgres: the extension answered an unknown reason `{other}`")));
        }
    };
    let fence = fence_in(txn, rid).await?;
    Ok(Err(WriteOutcome::Rejected { rejection, fence }))
}

/// The proof's refusal the extension named (`fencing.verify_keys` set in
/// PostgreSQL); an unknown key's id is the proof's own.
fn proof_rejection(reason: &str, proof: &[u8]) -> Result<ProofRejection, StorageError> {
    Ok(match reason {
        "proof_missing" => ProofRejection::Missing,
        "proof_malformed" => ProofRejection::Malformed,
        "proof_bad" => ProofRejection::BadProof,
        "proof_unknown_key" => match proof.get(1..5) {
            Some(id) => ProofRejection::UnknownKey { key_id: u32::from_be_bytes(id.try_into().expect("four bytes")) },
            None => ProofRejection::Malformed,
        },
        other => {
            return Err(StorageError::Backend(format!("postgres: the extension answered an unknown reason `{other}`")));
        }
    })
}

/// The guard failure an FN010 error reports (its DETAIL's `failure` starts with the reason).
fn guard_failure(e: &tokio_postgres::Error) -> GuardFailure {
    let detail = e.as_db_error().and_then(|d| d.detail()).unwrap_or_default();
    let failure = serde_json::from_str::<serde_json::Value>(detail)
        .ok()
        .and_then(|v| v.get("failure").and_then(|f| f.as_str()).map(str::to_owned))
        .unwrap_or_else(|| db_message(e));
    let (reason, message) = failure.split_once(": ").unwrap_or((failure.as_str(), ""));
    match reason {
        "guard_timeout" => GuardFailure::Timeout,
        "guard_out_of_memory" => GuardFailure::OutOfMemory,
        "guard_trap" => GuardFailure::Trap(message.to_owned()),
        _ => GuardFailure::Unavailable(failure.clone()),
    }
}

/// An operator's reset through the extension's own `fencing.reset_fence`,
/// which records it in `fencing.resets` (the server's role needs
/// `fencing_admin`). Returns the fence it replaced.
pub(super) async fn reset(
    txn: &Transaction<'_>,
    rid: &str,
    to: Option<&Fence>,
    reason: &str,
) -> Result<Option<Fence>, StorageError> {
    let before = fence_in(txn, rid).await?;
    let high_water = to.map(|f| bigint("high_water", f.high_water)).transpose()?;
    txn.execute(
        "SELECT fencing.reset_fence($1, $2, $3, $4)",
        &[&rid, &reason, &to.map(|f| f.lock.as_str()), &high_water],
    )
    .await
    .map_err(|e| match e.code() {
        Some(c) if c.code() == "42501" => StorageError::Backend(format!(
            "postgres: resetting a fence in the fencing extension needs the role fencing_admin ({})",
            db_message(&e)
        )),
        _ => pg(e),
    })?;
    Ok(before)
}

/// The resource's fence as the extension keeps it.
pub(super) async fn fence_in(txn: &Transaction<'_>, rid: &str) -> Result<Option<Fence>, StorageError> {
    let row = txn
        .query_opt("SELECT lock, high_water, sequence FROM fencing.fences WHERE resource = $1", &[&rid])
        .await
        .map_err(pg)?;
    Ok(row.map(|r| Fence {
        lock: r.get(0),
        high_water: r.get::<_, i64>(1) as u64,
        sequence: r.get::<_, Option<i64>>(2).map(|s| s as u64),
    }))
}
