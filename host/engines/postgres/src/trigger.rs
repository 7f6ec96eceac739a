//! The row trigger of a protected table.
//!
//! `fencing_guard_a` (`BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW`,
//! function `fencing._guard_row`, arguments: resource, token, lock and
//! sequence columns, policy, and where the fences live) finds what the row
//! presents and runs the write against its resource's fence: the fence row
//! in `fencing.fences` (`write.rs`), or, for a table protected with
//! `fence_in_row`, the fence the old row carries. A refusal is raised with
//! its own SQLSTATE by the C entry point [`fencing_guard_row`] once the
//! decision's Rust values are gone (`raise.rs`). The table's arguments are
//! resolved in `setup.rs`, the row's values read through `row.rs`.
//!
//! A fence-in-row table (its resource column unique on its own) keeps each
//! resource's fence in the resource's row: the token column is the
//! high-water mark, the lock column (else the resource's name) the lock, the
//! sequence column the last sequence. An UPDATE that keeps the resource is
//! decided against the old row, which the UPDATE has locked and which READ
//! COMMITTED re-reads if a concurrent write committed first, so it touches
//! no other table. An INSERT claims the resource in `fencing.fences`
//! (deciding against a fence left by an earlier row), a DELETE gives the mark
//! back there, and a row that moves to another resource does both.
//!
//! Where a row's values come from (see docs/postgres.md):
//! - token: INSERT, and UPDATE whose SET list names the token column: the
//!   new row's token (if NULL: `fencing.token`); any other UPDATE, and
//!   DELETE: `fencing.token`, never the old row's token. A token taken from
//!   the setting is written into the new row.
//! - lock: `fencing.lock`, else the lock column, else the resource's name.
//! - sequence: the sequence column (DELETE: the old row's is not used), else
//!   `fencing.sequence`.

use crate::args::{bad_argument, check_name, setting_number, unsigned};
use crate::raise::{self, Raised, Refusal};
use crate::row::{Row, set_int};
use crate::setup::{Setup, setup};
use crate::{settings, write};
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::num::NonZeroUsize;

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_fencing_guard_row() -> &'static pg_sys::Pg_finfo_record {
    const V1: &pg_sys::Pg_finfo_record = &pg_sys::Pg_finfo_record { api_version: 1 };
    V1
}

/// `fencing._guard_row()`, called by PostgreSQL for every row of a protected
/// table. The decision runs under pgrx's guard (a panic or a PostgreSQL
/// error inside becomes this statement's ERROR); a refusal comes back as
/// plain pointers and is raised here, where nothing is left to drop.
///
/// # Safety
/// Called by PostgreSQL's function manager as a trigger function.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn fencing_guard_row(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the guard runs the closure and reports its panics as ERRORs.
    let (datum, refused) = unsafe { pg_sys::submodules::panic::pgrx_extern_c_guard(move || fire(fcinfo)) };
    if let Some(refused) = refused {
        // SAFETY: `fire` returned; this frame holds only plain values.
        unsafe { raise::refusal(refused) }
    }
    datum
}

/// Runs the trigger for one row: the tuple to store, or the refusal to raise.
fn fire(fcinfo: pg_sys::FunctionCallInfo) -> (pg_sys::Datum, Option<Raised>) {
    // SAFETY: PostgreSQL passes a valid fcinfo to a trigger function.
    let fcinfo = unsafe { fcinfo.as_ref() }.expect("fcinfo is not NULL");
    // SAFETY: as above; from_fcinfo checks that this is a trigger call.
    let trigger = unsafe { PgTrigger::from_fcinfo(fcinfo) }
        .unwrap_or_else(|e| bad_argument(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, e.to_string()));
    match guard_row(&trigger) {
        Ok(Ok(datum)) => (datum, None),
        Ok(Err(refusal)) => (pg_sys::Datum::from(0), Some(refusal.raised())),
        Err(e) => bad_argument(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, format!("fencing: {e}")),
    }
}

/// The row's decision: the tuple to store, or the refusal to raise.
fn guard_row(trigger: &PgTrigger<'_>) -> Result<Result<pg_sys::Datum, Refusal>, PgTriggerError> {
    let data = trigger.trigger_data();
    // SAFETY: the relation belongs to the firing trigger.
    let (relid, desc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let setup = setup(trigger, relid, desc)?;
    let row = RowWrite::read(trigger, &setup, desc)?;
    if let Some(refusal) = row.decide(&setup, relid) {
        return Ok(Err(refusal));
    }
    Ok(Ok(row.stored(trigger, &setup)))
}

/// What one row's write presents, read once from the row and the settings.
struct RowWrite {
    insert: bool,
    update: bool,
    old: Row,
    /// The row as it will be stored (`None` for a DELETE).
    new: Option<Row>,
    resource: String,
    /// `fencing.lock`, else the row's lock column, else the resource's name.
    lock: String,
    /// Whether `fencing.lock` was set.
    lock_from_setting: bool,
    /// The lock column's value in the row.
    row_lock: Option<String>,
    token: Option<i64>,
    /// The token came from `fencing.token`: it is written into the stored row.
    token_from_setting: bool,
    sequence: Option<i64>,
    /// The sequence column's value in the new row.
    row_sequence: Option<i64>,
}

impl RowWrite {
    /// Reads the row's resource, lock, token and sequence (where each comes
    /// from: the module's docs) and checks them.
    fn read(trigger: &PgTrigger<'_>, setup: &Setup, desc: pg_sys::TupleDesc) -> Result<RowWrite, PgTriggerError> {
        let data = trigger.trigger_data();
        let op = trigger.op()?;
        let (insert, update) = (matches!(op, PgTriggerOperation::Insert), matches!(op, PgTriggerOperation::Update));
        let old = Row { tuple: data.tg_trigtuple, desc };
        let new = match (insert, update) {
            (true, _) => Some(Row { tuple: data.tg_trigtuple, desc }),
            (_, true) => Some(Row { tuple: data.tg_newtuple, desc }),
            _ => None,
        };
        let (token_setting, lock_setting, seq_setting) = settings::presented();
        let row_token = match &new {
            Some(n) if insert || token_column_set(data, setup) => n.int(setup.token),
            _ => None,
        };
        let token_from_setting = row_token.is_none();
        let token = row_token.or_else(|| setting_number("fencing.token", token_setting));
        let token = token.map(|t| unsigned("token", t) as i64);

        let subject = new.as_ref().unwrap_or(&old);
        let Some(resource) = subject.text(setup.resource) else {
            let column = &setup.names[0];
            bad_argument(PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION, format!("fencing: {column} is NULL"));
        };
        let row_lock = setup.lock.and_then(|c| subject.text(c));
        let lock_from_setting = lock_setting.is_some();
        let lock = lock_setting.clone().or_else(|| row_lock.clone()).unwrap_or_else(|| resource.clone());
        let row_sequence = setup.sequence.and_then(|c| new.as_ref().and_then(|n| n.int(c)));
        let sequence = row_sequence.or_else(|| setting_number("fencing.sequence", seq_setting.clone()));
        let sequence = sequence.map(|s| unsigned("sequence", s) as i64);
        check_name("resource", &resource);
        check_name("lock", &lock);
        if setup.in_row {
            let other_lock = setup.lock.is_none() && lock_setting.as_deref().is_some_and(|l| l != resource);
            cannot_carry(other_lock, "fencing.lock", "lock");
            cannot_carry(setup.sequence.is_none() && seq_setting.is_some(), "fencing.sequence", "sequence");
        }
        Ok(RowWrite {
            insert,
            update,
            old,
            new,
            resource,
            lock,
            lock_from_setting,
            row_lock,
            token,
            token_from_setting,
            sequence,
            row_sequence,
        })
    }

    /// The resources this write changes: its own, and first the one a row
    /// that moves to another resource leaves.
    fn resources(&self, setup: &Setup) -> Vec<String> {
        let mut resources = vec![self.resource.clone()];
        if self.update
            && !self.old.same(self.new.as_ref().unwrap_or(&self.old), setup.resource)
            && let Some(old_resource) = self.old.text(setup.resource)
            && old_resource != self.resource
        {
            resources.insert(0, old_resource);
        }
        resources
    }

    /// Runs the write against each resource's fence; the first refusal, if any.
    fn decide(&self, setup: &Setup, relid: pg_sys::Oid) -> Option<Refusal> {
        let resources = self.resources(setup);
        let moved = resources.len() == 2;
        for (i, r) in resources.iter().enumerate() {
            // Without a lock column, a resource's lock is its own name.
            let lock = if !self.lock_from_setting && setup.lock.is_none() { r.clone() } else { self.lock.clone() };
            let refusal = |reason: &str, fence, failure| Refusal {
                reason: reason.to_owned(),
                resource: r.clone(),
                lock: lock.clone(),
                token: self.token,
                sequence: self.sequence,
                fence,
                failure,
            };
            let Some(token) = self.token else { return Some(refusal("no_token", None, None)) };
            let leaving = !self.insert && (!self.update || (moved && i == 0));
            let in_place = self.update && !moved;
            let carrier = setup.in_row.then_some(relid);
            let presented = write::Presented {
                resource: r,
                lock: &lock,
                token,
                sequence: self.sequence,
                policy: setup.policy,
                carrier,
            };
            let outcome = if setup.in_row && (leaving || in_place) {
                decide_in_row_and_release(&self.old, setup, &presented, leaving)
            } else {
                write::write(&presented)
            };
            match outcome {
                write::Outcome::Admitted { .. } => {}
                write::Outcome::CarriedHere(_) if setup.in_row => {}
                write::Outcome::CarriedBy(table) | write::Outcome::CarriedHere(table) => {
                    write::refuse_carried(r, table)
                }
                write::Outcome::Refused { reason, fence } => return Some(refusal(reason, fence, None)),
                write::Outcome::Failed { failure, fence } => {
                    return Some(refusal("guard_failure", fence, Some(failure)));
                }
            }
        }
        None
    }

    /// The row to store once admitted: as it came, unless it must record what
    /// wrote it (a token from the setting, and for a fence in row the lock
    /// and sequence too).
    fn stored(&self, trigger: &PgTrigger<'_>, setup: &Setup) -> pg_sys::Datum {
        let data = trigger.trigger_data();
        let as_came = pg_sys::Datum::from(if self.update { data.tg_newtuple } else { data.tg_trigtuple });
        let (Some(_), Some(token)) = (&self.new, self.token) else { return as_came };
        let set_lock = setup.in_row && setup.lock.is_some() && self.row_lock.as_deref() != Some(self.lock.as_str());
        let set_seq =
            setup.in_row && setup.sequence.is_some() && self.sequence.is_some() && self.row_sequence != self.sequence;
        if !(self.token_from_setting || set_lock || set_seq) {
            return as_came;
        }
        let mut tuple = trigger.new().expect("a new row").into_owned();
        if self.token_from_setting {
            set_int(&mut tuple, setup.token, token, &setup.names[1]);
        }
        if let (true, Some(c)) = (set_lock, setup.lock) {
            let attnum = NonZeroUsize::new(c.attnum as usize).expect("a user column");
            tuple.set_by_index(attnum, self.lock.as_str()).expect("the lock column is text");
        }
        if let (true, Some(c), Some(s)) = (set_seq, setup.sequence, self.sequence) {
            set_int(&mut tuple, c, s, &setup.names[3]);
        }
        tuple.into_trigger_datum().unwrap_or(pg_sys::Datum::from(0))
    }
}

/// Whether an UPDATE's SET list names the token column.
fn token_column_set(data: &pg_sys::TriggerData, setup: &Setup) -> bool {
    // SAFETY: the updated-columns set belongs to the firing trigger.
    unsafe {
        pg_sys::bms_is_member(
            i32::from(setup.token.attnum) - pg_sys::FirstLowInvalidHeapAttributeNumber,
            data.tg_updatedcols,
        )
    }
}

/// A fence-in-row write decided against the old row, which this statement
/// has locked and which holds the latest committed fence; a row that leaves
/// its resource gives the admitted mark back to the fence table.
fn decide_in_row_and_release(
    old: &Row,
    setup: &Setup,
    presented: &write::Presented<'_>,
    leaving: bool,
) -> write::Outcome {
    let outcome = decide_in_row(old, setup, presented);
    if let (true, write::Outcome::Admitted { high_water, sequence, .. }) = (leaving, &outcome) {
        let mark = write::FenceRow { lock: presented.lock.to_owned(), high_water: *high_water, sequence: *sequence };
        write::release(presented.resource, &mark);
    }
    outcome
}

/// Refuses a setting a fence-in-row table has no column to keep.
fn cannot_carry(refused: bool, setting: &str, what: &str) {
    if refused {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!(
                "fencing: this table keeps its fences in its rows and has no {what} column, \
                 so {setting} cannot be carried; protect it with a {what} column, or without fence_in_row"
            ),
        );
    }
}

/// Decides a write to a fence-in-row table against the fence its old row
/// carries (no token: no write was admitted yet). The same write again in
/// the transaction that made the row is admitted without a decision.
fn decide_in_row(old: &Row, c: &Setup, p: &write::Presented<'_>) -> write::Outcome {
    let fence = old.int(c.token).map(|high_water| write::FenceRow {
        lock: c.lock.and_then(|l| old.text(l)).unwrap_or_else(|| p.resource.to_owned()),
        high_water,
        sequence: c.sequence.and_then(|s| old.int(s)),
    });
    if let Some(f) = &fence {
        let same = f.lock == p.lock && f.high_water == p.token && f.sequence == p.sequence;
        // SAFETY: the old tuple belongs to the firing trigger; a plain query of the transaction state.
        if same
            && unsafe {
                pg_sys::TransactionIdIsCurrentTransactionId(pg_sys::HeapTupleHeaderGetXmin((*old.tuple).t_data))
            }
        {
            return write::Outcome::Admitted { high_water: p.token, sequence: p.sequence, new_term: false };
        }
    }
    write::decide(fence, p)
}
