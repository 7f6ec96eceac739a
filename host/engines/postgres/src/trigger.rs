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
//! resolved and checked in `setup.rs` at every decision, the row's values
//! read through `row.rs` (a resource by its setting-independent name,
//! `names.rs`).
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
//! A partition's trigger is its partitioned table's clone: a fence-in-row
//! partition's fences are carried by the partitioned table ([`Setup::carrier`]),
//! so a row that an UPDATE moves to another partition (PostgreSQL's DELETE
//! from one partition and INSERT into the other, after the UPDATE's BEFORE
//! triggers) keeps its claim; that DELETE presents what the UPDATE presented
//! ([`Moving`]). The operator's reset of a carried fence rewrites one row
//! past this trigger (`carry.rs`, [`ResetPass`]).
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
use crate::row::{Row, set_int, set_text};
use crate::setup::{Setup, setup};
use crate::{settings, write};
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::cell::RefCell;

/// What a row that may move to another partition presented in its UPDATE.
///
/// PostgreSQL moves a row between partitions as a DELETE from the old
/// partition and an INSERT into the new one, after the UPDATE's BEFORE
/// triggers, and fires the BEFORE DELETE trigger too. That DELETE is the
/// UPDATE's own: it presents what the UPDATE presented, not `fencing.token`.
struct Moving {
    relid: pg_sys::Oid,
    /// The old row's (block, offset), the subtransaction and the client
    /// statement that update it.
    at: (u32, u16, pg_sys::SubTransactionId, pg_sys::TimestampTz),
    token: Option<i64>,
    lock: String,
    lock_from_setting: bool,
    sequence: Option<i64>,
}

thread_local! {
    static MOVING: RefCell<Option<Moving>> = const { RefCell::new(None) };
    /// The one row the operator's reset rewrites past the decision (`carry.rs`).
    static RESETTING: RefCell<Option<(pg_sys::Oid, String)>> = const { RefCell::new(None) };
}

/// Lets the next UPDATE of `resource`'s row in the table carrying it
/// through undecided, once, while it lives: the operator's reset of a
/// carried fence (`carry.rs`). Dropped (on an error too), the pass is gone.
pub struct ResetPass;

impl ResetPass {
    pub fn new(carrier: pg_sys::Oid, resource: &str) -> ResetPass {
        RESETTING.with(|r| *r.borrow_mut() = Some((carrier, resource.to_owned())));
        ResetPass
    }
}

impl Drop for ResetPass {
    fn drop(&mut self) {
        RESETTING.with(|r| *r.borrow_mut() = None);
    }
}

/// Where a row version is, and the subtransaction and client statement
/// that change it. (Not the command id: the fence statements the UPDATE's
/// trigger runs advance it before the DELETE half fires. A row version that
/// an UPDATE did not move is dead afterwards, unless its subtransaction
/// rolled back, so no later DELETE in the same statement and
/// subtransaction finds it.)
fn position(tuple: *mut pg_sys::HeapTupleData) -> (u32, u16, pg_sys::SubTransactionId, pg_sys::TimestampTz) {
    // SAFETY: the tuple belongs to the firing trigger; plain reads of the transaction state.
    unsafe {
        let tid = (*tuple).t_self;
        let block = (u32::from(tid.ip_blkid.bi_hi) << 16) | u32::from(tid.ip_blkid.bi_lo);
        (block, tid.ip_posid, pg_sys::GetCurrentSubTransactionId(), pg_sys::GetCurrentStatementStartTimestamp())
    }
}

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
    let Some(fcinfo) = (unsafe { fcinfo.as_ref() }) else {
        bad_argument(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, "fencing: no call info".into())
    };
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
    if passes_reset(trigger, &setup, desc)? {
        return Ok(Ok(pg_sys::Datum::from(data.tg_newtuple)));
    }
    // SAFETY: the firing relation's pg_class row, read in place.
    let owner = unsafe { (*(*data.tg_relation).rd_rel).relowner };
    if !crate::owner::may_write_fences(owner) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "fencing: the owner of {} is not a member of fencing_writer, so its writes may not raise fences; \
                 the write is refused (GRANT fencing_writer TO the owner, or protect a table an owner with that role owns)",
                crate::owner::qualified_name(relid)
            ),
        );
    }
    let row = RowWrite::read(trigger, &setup, relid, desc)?;
    if let Some(refusal) = row.decide(&setup) {
        return Ok(Err(refusal));
    }
    Ok(Ok(row.stored(trigger, &setup)))
}

/// Whether this is the one UPDATE the operator's reset lets through (the
/// pass is used up by it).
fn passes_reset(trigger: &PgTrigger<'_>, setup: &Setup, desc: pg_sys::TupleDesc) -> Result<bool, PgTriggerError> {
    if RESETTING.with(|r| r.borrow().is_none()) || !matches!(trigger.op()?, PgTriggerOperation::Update) {
        return Ok(false);
    }
    let row = Row { tuple: trigger.trigger_data().tg_newtuple, desc };
    let resource = row.name(setup.resource, setup.naming, &setup.names[0]);
    Ok(RESETTING.with(|r| {
        let mut r = r.borrow_mut();
        let passes = r.as_ref().is_some_and(|(t, name)| *t == setup.carrier && Some(name) == resource.as_ref());
        if passes {
            *r = None;
        }
        passes
    }))
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
    fn read(
        trigger: &PgTrigger<'_>,
        setup: &Setup,
        relid: pg_sys::Oid,
        desc: pg_sys::TupleDesc,
    ) -> Result<RowWrite, PgTriggerError> {
        let data = trigger.trigger_data();
        let op = trigger.op()?;
        let (insert, update) = (matches!(op, PgTriggerOperation::Insert), matches!(op, PgTriggerOperation::Update));
        let old = Row { tuple: data.tg_trigtuple, desc };
        let new = match (insert, update) {
            (true, _) => Some(Row { tuple: data.tg_trigtuple, desc }),
            (_, true) => Some(Row { tuple: data.tg_newtuple, desc }),
            _ => None,
        };
        if !insert
            && !update
            && let Some(moving) = moved_out(relid, data.tg_trigtuple)
        {
            return RowWrite::moving(old, setup, moving);
        }
        let (token_setting, lock_setting, seq_setting) = settings::presented();
        let row_token = match &new {
            Some(n) if insert || token_column_set(data, setup) => n.int(setup.token),
            _ => None,
        };
        let token_from_setting = row_token.is_none();
        let token = row_token.or_else(|| setting_number("fencing.token", token_setting));
        let token = token.map(|t| unsigned("token", t) as i64);

        let subject = new.as_ref().unwrap_or(&old);
        let Some(resource) = subject.name(setup.resource, setup.naming, &setup.names[0]) else {
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
        if update && setup.partition {
            let moving = Moving {
                relid,
                at: position(data.tg_trigtuple),
                token,
                lock: lock.clone(),
                lock_from_setting,
                sequence,
            };
            MOVING.with(|m| *m.borrow_mut() = Some(moving));
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

    /// The DELETE half of a row moving to another partition: what the
    /// UPDATE presented, for the resource the row leaves.
    fn moving(old: Row, setup: &Setup, m: Moving) -> Result<RowWrite, PgTriggerError> {
        let Some(resource) = old.name(setup.resource, setup.naming, &setup.names[0]) else {
            let column = &setup.names[0];
            bad_argument(PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION, format!("fencing: {column} is NULL"));
        };
        let row_lock = setup.lock.and_then(|c| old.text(c));
        let lock = if m.lock_from_setting || setup.lock.is_some() { m.lock } else { resource.clone() };
        Ok(RowWrite {
            insert: false,
            update: false,
            old,
            new: None,
            resource,
            lock,
            lock_from_setting: m.lock_from_setting,
            row_lock,
            token: m.token,
            token_from_setting: false,
            sequence: m.sequence,
            row_sequence: None,
        })
    }

    /// The resources this write changes: its own, and first the one a row
    /// that moves to another resource leaves.
    fn resources(&self, setup: &Setup) -> Vec<String> {
        let mut resources = vec![self.resource.clone()];
        if self.update
            && !self.old.same(self.new.as_ref().unwrap_or(&self.old), setup.resource)
            && let Some(old_resource) = self.old.name(setup.resource, setup.naming, &setup.names[0])
            && old_resource != self.resource
        {
            resources.insert(0, old_resource);
        }
        resources
    }

    /// Runs the write against each resource's fence; the first refusal, if any.
    fn decide(&self, setup: &Setup) -> Option<Refusal> {
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
            let carrier = setup.in_row.then_some(setup.carrier);
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
        let Some(new) = trigger.new() else { return as_came };
        let mut tuple = new.into_owned();
        if self.token_from_setting {
            set_int(&mut tuple, setup.token, token, &setup.names[1]);
        }
        if let (true, Some(c)) = (set_lock, setup.lock) {
            set_text(&mut tuple, c, &self.lock, &setup.names[2]);
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

/// What the UPDATE of this row presented, when this DELETE moves the row
/// out of its partition (the same command, the same row version).
fn moved_out(relid: pg_sys::Oid, old: *mut pg_sys::HeapTupleData) -> Option<Moving> {
    let at = position(old);
    MOVING.with(|m| {
        let mut m = m.borrow_mut();
        m.as_ref().is_some_and(|moving| moving.relid == relid && moving.at == at).then(|| m.take()).flatten()
    })
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
