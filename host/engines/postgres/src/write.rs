//! One write against its resource's fence, in the calling transaction: the
//! single implementation behind the row trigger and `fencing.try_write`.
//!
//! The common case is one statement:
//! `UPDATE fencing.fences SET <presented> WHERE resource = $1 AND fencing._admits(<row>, <presented>)`.
//! PostgreSQL locks the fence row before it evaluates `_admits` on it, and
//! in READ COMMITTED re-evaluates it on the newest version if another
//! transaction changed the row meanwhile, so the component always decides
//! against the latest committed fence with the row locked, and the new
//! fence is exactly the presented lock, token and sequence (an admission's
//! high-water mark is its token). `_admits` leaves the decision with its
//! evidence in [`LAST`]:
//! - admitted: the row is updated;
//! - the same write (this transaction already wrote exactly this lock, token
//!   and sequence into the fence): admitted, the row left as it is;
//! - refused or failed: no row is updated, nothing changes.
//!
//! When no fence row exists the component decides against none and the row
//! is INSERTed; if a concurrent first write wins the INSERT, start over.
//!
//! A fence row whose `carrier` names a table is a claim: that table keeps
//! its fences in its rows (`trigger.rs`, fence in row), so the mark is in
//! the table's row for the resource, not here. Such a resource is written
//! only through its carrier: any other write ends as [`Outcome::CarriedBy`].
//! The carrier's INSERTs claim a resource through [`write`] (its presented
//! `carrier`), and its DELETEs give the mark back through [`release`].
//!
//! The fence table belongs to the extension's owner and ordinary roles may
//! not change it, so the statements run as that owner, the way a SECURITY
//! DEFINER function would (`owner.rs`: every name in them qualified, so the
//! caller's `search_path` resolves nothing); the role is restored on every
//! exit, and by PostgreSQL's own abort handling on an error. Plans are
//! prepared once per backend and kept.

use crate::args::{self, bad_argument, signed};
use crate::guard;
use crate::owner::AsRole;
use fencing_runtime::{Admission, Fence, Policy, Sequencer};
use pgrx::prelude::*;
use pgrx::spi::{OwnedPreparedStatement, SpiClient};
use std::cell::RefCell;

/// What a write presents. Tokens and sequences are non-negative (checked by the callers).
pub struct Presented<'a> {
    pub resource: &'a str,
    pub lock: &'a str,
    pub token: i64,
    pub sequence: Option<i64>,
    pub policy: Policy,
    /// The fence-in-row table whose row will carry this resource's fence
    /// (its INSERT claims the resource); `None` for every other write.
    pub carrier: Option<pg_sys::Oid>,
}

/// The fence a write was decided against.
#[derive(Debug, Clone)]
pub struct FenceRow {
    pub lock: String,
    pub high_water: i64,
    pub sequence: Option<i64>,
}

/// How a write ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The fence now holds `high_water`/`sequence`.
    Admitted { high_water: i64, sequence: Option<i64>, new_term: bool },
    /// Refused by the rules: the reason's name and the fence it was compared with.
    Refused { reason: &'static str, fence: Option<FenceRow> },
    /// The component could not decide (`reason: message`); the write is refused.
    Failed { failure: String, fence: Option<FenceRow> },
    /// The resource's fence is carried by the rows of this table; nothing changed.
    CarriedBy(pg_sys::Oid),
    /// The presented carrier (this table) already carries the resource: a
    /// row of it has the resource. Nothing was decided here; the table's
    /// unique key refuses the second row (or an upsert updates the first).
    CarriedHere(pg_sys::Oid),
}

struct Plans {
    raise: OwnedPreparedStatement,
    insert: OwnedPreparedStatement,
    release: OwnedPreparedStatement,
}

/// What `_admits` decided for the row it was asked about.
enum Decided {
    Outcome(Outcome),
    SameWrite,
}

fn oid_of(v: Option<i64>) -> Option<pg_sys::Oid> {
    v.and_then(|v| u32::try_from(v).ok()).map(pg_sys::Oid::from)
}

fn int_of(oid: Option<pg_sys::Oid>) -> Option<i64> {
    oid.map(|o| i64::from(o.to_u32()))
}

thread_local! {
    static PLANS: RefCell<Option<Plans>> = const { RefCell::new(None) };
    /// The last decision `_admits` made in this backend (taken by `write`).
    static LAST: RefCell<Option<Decided>> = const { RefCell::new(None) };
}

/// The fence statements. They run as the extension's owner, so every name
/// in them is schema-qualified, every operator is `OPERATOR(pg_catalog.=)`
/// and every cast names a `pg_catalog` type (`owner.rs`): the caller's
/// `search_path`, under which PostgreSQL plans them again when it differs,
/// resolves nothing in them.
fn prepare(client: &SpiClient<'_>) -> Plans {
    let text = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
    let int8 = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
    let keep = |sql: &str, args: &[PgOid]| {
        client
            .prepare_mut(sql, args)
            .unwrap_or_else(|e| bad_argument(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("fencing: {e}")))
            .keep()
    };
    Plans {
        raise: keep(
            "UPDATE fencing.fences f SET lock = $2, high_water = $3, sequence = $4, \
             carrier = $6::pg_catalog.oid::pg_catalog.regclass, updated_at = pg_catalog.now() \
             WHERE f.resource OPERATOR(pg_catalog.=) $1 \
             AND fencing._admits(f.resource, f.lock, f.high_water, f.sequence, \
                                 f.xmin::pg_catalog.text::pg_catalog.int8, \
                                 f.carrier::pg_catalog.oid::pg_catalog.int8, $1, $2, $3, $4, $5, $6)",
            &[text, text, int8, int8, text, int8],
        ),
        insert: keep(
            "INSERT INTO fencing.fences (resource, lock, high_water, sequence, carrier) \
             VALUES ($1, $2, $3, $4, $5::pg_catalog.oid::pg_catalog.regclass) \
             ON CONFLICT ON CONSTRAINT fences_pkey DO NOTHING",
            &[text, text, int8, int8, int8],
        ),
        release: keep(
            "INSERT INTO fencing.fences AS f (resource, lock, high_water, sequence) VALUES ($1, $2, $3, $4) \
             ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE SET lock = EXCLUDED.lock, \
             high_water = EXCLUDED.high_water, sequence = EXCLUDED.sequence, carrier = NULL, \
             updated_at = pg_catalog.now()",
            &[text, text, int8, int8],
        ),
    }
}

/// A fence value from the fence table (written only by admissions: never negative).
fn u(v: i64) -> u64 {
    crate::args::unsigned("fence value", v)
}

fn fence_of(f: &FenceRow) -> Fence {
    Fence { lock: f.lock.clone(), high_water: u(f.high_water), sequence: f.sequence.map(u) }
}

/// The component's decision of `p` against `fence`, as an [`Outcome`].
pub fn decide(fence: Option<FenceRow>, p: &Presented) -> Outcome {
    let presented = Sequencer { lock: p.lock.to_owned(), token: u(p.token), sequence: p.sequence.map(u) };
    match guard::decide(fence.as_ref().map(fence_of).as_ref(), &presented, p.policy) {
        Err(failure) => Outcome::Failed { failure, fence },
        Ok(Err(reason)) => Outcome::Refused { reason, fence },
        Ok(Ok(Admission { high_water, sequence, new_term })) => Outcome::Admitted {
            high_water: signed("high_water", high_water),
            sequence: sequence.map(|s| signed("sequence", s)),
            new_term,
        },
    }
}

/// Decides `p` against its resource's fence and, on admission, raises the fence.
pub fn write(p: &Presented) -> Outcome {
    Spi::connect_mut(|client| {
        let _owner = AsRole::extension_owner();
        let (raise_plan, insert_plan) = with_plans(client, |plans| (&plans.raise, &plans.insert));
        let policy = p.policy.name();
        let carrier = int_of(p.carrier);
        loop {
            LAST.with(|l| l.borrow_mut().take());
            let args =
                [p.resource.into(), p.lock.into(), p.token.into(), p.sequence.into(), policy.into(), carrier.into()];
            client.update(raise_plan, None, &args).unwrap_or_else(|e| spi_failed("raise the fence", e));
            match LAST.with(|l| l.borrow_mut().take()) {
                Some(Decided::SameWrite) => {
                    return Outcome::Admitted { high_water: p.token, sequence: p.sequence, new_term: false };
                }
                Some(Decided::Outcome(outcome)) => return outcome,
                None => {}
            }
            // No fence yet: the first write binds the resource.
            let outcome = decide(None, p);
            let Outcome::Admitted { high_water, sequence, .. } = outcome else { return outcome };
            let args = [p.resource.into(), p.lock.into(), high_water.into(), sequence.into(), carrier.into()];
            if !client.update(insert_plan, None, &args).unwrap_or_else(|e| spi_failed("create the fence", e)).is_empty()
            {
                return outcome;
            }
            // A concurrent first write committed meanwhile: decide against its fence.
        }
    })
}

/// Gives a carried resource's fence back to `fencing.fences` (its carrier's
/// row is deleted, or leaves the resource): the fence row now holds the mark
/// and no carrier.
pub fn release(resource: &str, fence: &FenceRow) {
    Spi::connect_mut(|client| {
        let _owner = AsRole::extension_owner();
        let plan = with_plans(client, |plans| &plans.release);
        let args = [resource.into(), fence.lock.as_str().into(), fence.high_water.into(), fence.sequence.into()];
        client.update(plan, None, &args).unwrap_or_else(|e| spi_failed("release the fence", e));
    })
}

/// An SPI failure (PostgreSQL raised its own ERROR already in nearly every case).
pub fn spi_failed(what: &str, e: pgrx::spi::SpiError) -> ! {
    bad_argument(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("fencing: {what}: {e}"))
}

/// Fails the statement: `resource` is written only through the table whose
/// rows carry its fence.
pub fn refuse_carried(resource: &str, carrier: pg_sys::Oid) -> ! {
    // SAFETY: a syscache lookup; NULL when the table is gone.
    let table = unsafe {
        let name = pg_sys::get_rel_name(carrier);
        (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned())
    };
    let code = PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
    match table {
        Some(table) => bad_argument(
            code,
            format!(
                "fencing: the fence of {resource} is carried in the rows of table {table} (fence_in_row); \
                 write {resource} through that table"
            ),
        ),
        None => bad_argument(
            code,
            format!(
                "fencing: the fence of {resource} was carried by a table that no longer exists (oid {}); \
                 a member of fencing_admin can release it with fencing.reset_fence",
                carrier.to_u32()
            ),
        ),
    }
}

/// The backend's kept plans (prepared on first use).
fn with_plans<R>(client: &SpiClient<'_>, f: impl FnOnce(&'static Plans) -> R) -> R {
    PLANS.with(|cell| {
        let mut cell = cell.borrow_mut();
        let plans = cell.get_or_insert_with(|| prepare(client));
        // SAFETY: kept plans live for the backend; the references do not outlive the caller's SPI connection.
        f(unsafe { &*(plans as *const Plans) })
    })
}

/// The `WHERE` of the fence update: decides the presented write against the
/// locked fence row, records the decision for [`write`], and says whether
/// the row is to be updated. Only the presented resource's row is decided.
#[allow(clippy::too_many_arguments)]
#[pg_extern(name = "_admits", parallel_unsafe)]
fn admits(
    resource: &str,
    lock: &str,
    high_water: i64,
    sequence: Option<i64>,
    xmin: i64,
    carrier: Option<i64>,
    presented_resource: &str,
    presented_lock: &str,
    token: i64,
    presented_sequence: Option<i64>,
    policy: &str,
    presented_carrier: Option<i64>,
) -> bool {
    if resource != presented_resource {
        return false;
    }
    if let Some(carrier) = oid_of(carrier) {
        let outcome = if Some(carrier) == oid_of(presented_carrier) {
            Outcome::CarriedHere(carrier)
        } else {
            Outcome::CarriedBy(carrier)
        };
        LAST.with(|l| *l.borrow_mut() = Some(Decided::Outcome(outcome)));
        return false;
    }
    let fence = FenceRow { lock: lock.to_owned(), high_water, sequence };
    let same = fence.lock == presented_lock && high_water == token && sequence == presented_sequence;
    // SAFETY: a plain query of the backend's own transaction state.
    if same && unsafe { pg_sys::TransactionIdIsCurrentTransactionId((xmin as u32).into()) } {
        if presented_carrier.is_none() {
            LAST.with(|l| *l.borrow_mut() = Some(Decided::SameWrite));
            return false;
        }
        // A fence-in-row table claims what this transaction just gave back
        // (a row deleted and inserted again, or moved between partitions):
        // the same write, and the row now carries the fence.
        let claimed = Outcome::Admitted { high_water, sequence, new_term: false };
        LAST.with(|l| *l.borrow_mut() = Some(Decided::Outcome(claimed)));
        return true;
    }
    let p = Presented {
        resource,
        lock: presented_lock,
        token,
        sequence: presented_sequence,
        policy: args::policy(policy),
        carrier: oid_of(presented_carrier),
    };
    let outcome = decide(Some(fence), &p);
    let admitted = matches!(outcome, Outcome::Admitted { .. });
    LAST.with(|l| *l.borrow_mut() = Some(Decided::Outcome(outcome)));
    admitted
}
