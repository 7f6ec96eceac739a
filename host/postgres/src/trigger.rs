//! The row trigger of a protected table.
//!
//! `fencing_guard_a` (`BEFORE INSERT OR UPDATE OR DELETE FOR EACH ROW`,
//! function `fencing._guard_row`, arguments: resource, token, lock and
//! sequence columns, policy, and where the fences live) finds what the row
//! presents and runs the write against its resource's fence: the fence row
//! in `fencing.fences` (`write.rs`), or, for a table protected with
//! `fence_in_row`, the fence the old row carries. A refusal is raised with
//! its own SQLSTATE by the C entry point [`fencing_guard_row`] once the
//! decision's Rust values are gone (`raise.rs`).
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

use crate::functions::{bad_argument, policy, unsigned};
use crate::raise::{self, Raised, Refusal};
use crate::{settings, write};
use fencing_runtime::Policy;
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::num::NonZeroUsize;
use std::rc::Rc;

thread_local! {
    /// A refusal waiting to be raised by [`fencing_guard_row`].
    static PENDING: RefCell<Option<Refusal>> = const { RefCell::new(None) };
}

/// One column of the row: its number and type.
#[derive(Clone, Copy)]
struct Column {
    attnum: i16,
    type_oid: pg_sys::Oid,
    /// The type is passed by value (`typbyval`).
    byval: bool,
}

struct Row {
    tuple: *mut pg_sys::HeapTupleData,
    desc: pg_sys::TupleDesc,
}

impl Row {
    fn datum(&self, c: Column) -> Option<pg_sys::Datum> {
        let attnum = NonZeroUsize::new(c.attnum as usize)?;
        // SAFETY: the tuple and descriptor belong to the firing trigger.
        unsafe { pgrx::heap_getattr_raw(self.tuple, attnum, self.desc) }
    }

    /// The value as text, by its type's output function (integers and text directly).
    fn text(&self, c: Column) -> Option<String> {
        let datum = self.datum(c)?;
        match c.type_oid {
            pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID => return self.int(c).map(|v| v.to_string()),
            // SAFETY: a non-null text value of the row.
            pg_sys::TEXTOID | pg_sys::VARCHAROID => return unsafe { String::from_datum(datum, false) },
            _ => {}
        }
        let (mut out, mut varlena) = (pg_sys::Oid::INVALID, false);
        // SAFETY: `datum` is a non-null value of `c.type_oid`.
        unsafe {
            pg_sys::getTypeOutputInfo(c.type_oid, &mut out, &mut varlena);
            let text = pg_sys::OidOutputFunctionCall(out, datum);
            Some(CStr::from_ptr(text).to_string_lossy().into_owned())
        }
    }

    /// Whether a by-value column holds the same value in both rows (`false`
    /// for other types: the caller compares their text).
    fn same(&self, other: &Row, c: Column) -> bool {
        c.byval && self.datum(c).map(|d| d.value()) == other.datum(c).map(|d| d.value())
    }

    /// An integer column (smallint, integer or bigint; `protect` checked the type).
    fn int(&self, c: Column) -> Option<i64> {
        let datum = self.datum(c)?;
        Some(match c.type_oid {
            pg_sys::INT2OID => datum.value() as i16 as i64,
            pg_sys::INT4OID => datum.value() as i32 as i64,
            _ => datum.value() as i64,
        })
    }
}

fn column(relid: pg_sys::Oid, name: &str) -> Option<Column> {
    if name.is_empty() {
        return None;
    }
    let cname = CString::new(name).ok()?;
    // SAFETY: syscache lookups of the firing relation.
    let attnum = unsafe { pg_sys::get_attnum(relid, cname.as_ptr()) };
    if attnum <= 0 {
        bad_argument(
            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            format!("fencing: the protected table has no column {name} any more; protect it again"),
        );
    }
    // SAFETY: as above; the attribute exists.
    let type_oid = unsafe { pg_sys::get_atttype(relid, attnum) };
    // SAFETY: a syscache lookup of an existing type.
    let byval = unsafe { pg_sys::get_typbyval(type_oid) };
    Some(Column { attnum, type_oid, byval })
}

/// A trigger's arguments, resolved against its table's columns.
struct Setup {
    /// The resource, token, lock and sequence column names ("": none).
    names: [String; 4],
    resource: Column,
    token: Column,
    lock: Option<Column>,
    sequence: Option<Column>,
    policy: Policy,
    /// The table carries its fences in its rows (`fence_in_row`).
    in_row: bool,
}

thread_local! {
    /// Setups by trigger OID: a trigger's arguments never change, and each
    /// use checks the columns against the table's current descriptor.
    static SETUPS: RefCell<HashMap<pg_sys::Oid, Rc<Setup>>> = RefCell::new(HashMap::new());
}

impl Setup {
    /// Whether every column is still where, and of the type, it was.
    fn matches(&self, desc: pg_sys::TupleDesc) -> bool {
        // SAFETY: the descriptor belongs to the firing relation; `natts` entries follow it.
        let attrs = unsafe { (*desc).attrs.as_slice((*desc).natts as usize) };
        let columns = [Some(self.resource), Some(self.token), self.lock, self.sequence];
        columns.iter().zip(&self.names).all(|(c, name)| match c {
            None => true,
            Some(c) => attrs.get(c.attnum as usize - 1).is_some_and(|a| {
                // SAFETY: attname is a NUL-terminated NameData.
                let attname = unsafe { CStr::from_ptr(a.attname.data.as_ptr()) };
                !a.attisdropped && a.atttypid == c.type_oid && attname.to_bytes() == name.as_bytes()
            }),
        })
    }
}

/// The firing trigger's setup, resolved once per backend.
fn setup(trigger: &PgTrigger<'_>, relid: pg_sys::Oid, desc: pg_sys::TupleDesc) -> Result<Rc<Setup>, PgTriggerError> {
    // SAFETY: the trigger description belongs to the firing trigger.
    let oid = unsafe { (*trigger.trigger_data().tg_trigger).tgoid };
    if let Some(s) = SETUPS.with(|m| m.borrow().get(&oid).cloned())
        && s.matches(desc)
    {
        return Ok(s);
    }
    let args = trigger.extra_args()?;
    let (names, policy_name, in_row) = match &args[..] {
        [r, t, l, s, p] => ([r, t, l, s], p, false),
        [r, t, l, s, p, mode] => ([r, t, l, s], p, mode == "row"),
        _ => bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "fencing: protect the table again".into()),
    };
    let setup = Rc::new(Setup {
        resource: column(relid, names[0]).expect("the resource column is required"),
        token: column(relid, names[1]).expect("the token column is required"),
        lock: column(relid, names[2]),
        sequence: column(relid, names[3]),
        policy: policy(policy_name),
        in_row,
        names: names.map(String::clone),
    });
    SETUPS.with(|m| m.borrow_mut().insert(oid, setup.clone()));
    Ok(setup)
}

/// A decimal setting as a token or sequence.
fn setting_number(name: &str, value: Option<String>) -> Option<i64> {
    let value = value?;
    if value.is_empty() || value.len() > 20 || !value.bytes().all(|b| b.is_ascii_digit()) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
            format!("fencing: {name} {value:?} is not a decimal number"),
        );
    }
    match value.parse::<i64>() {
        Ok(v) => Some(v),
        Err(_) => bad_argument(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("fencing: {name} {value} is above 9223372036854775807, the largest value SQL can present"),
        ),
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
    let fcinfo = unsafe { fcinfo.as_ref() }.expect("fcinfo is not NULL");
    // SAFETY: as above; from_fcinfo checks that this is a trigger call.
    let trigger = unsafe { PgTrigger::from_fcinfo(fcinfo) }
        .unwrap_or_else(|e| bad_argument(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, e.to_string()));
    let datum = guard_row(&trigger).unwrap_or_else(|e| {
        bad_argument(PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED, format!("fencing: {e}"))
    });
    match PENDING.with(|p| p.borrow_mut().take()) {
        Some(refusal) => (pg_sys::Datum::from(0), Some(refusal.raised())),
        None => (datum, None),
    }
}

/// The row's decision; on a refusal, [`PENDING`] holds it.
fn guard_row(trigger: &PgTrigger<'_>) -> Result<pg_sys::Datum, PgTriggerError> {
    PENDING.with(|p| p.borrow_mut().take());
    let data = trigger.trigger_data();
    let op = trigger.op()?;
    // SAFETY: the relation belongs to the firing trigger.
    let (relid, desc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let setup = setup(trigger, relid, desc)?;
    let Setup { resource: resource_c, token: token_c, lock: lock_c, sequence: seq_c, policy, in_row, .. } = *setup;
    let [resource_col, token_col, _, seq_col] = &setup.names;
    let (token_setting, lock_setting, seq_setting) = settings::presented();

    let (insert, update) = (matches!(op, PgTriggerOperation::Insert), matches!(op, PgTriggerOperation::Update));
    let old = Row { tuple: data.tg_trigtuple, desc };
    let new = match (insert, update) {
        (true, _) => Some(Row { tuple: data.tg_trigtuple, desc }),
        (_, true) => Some(Row { tuple: data.tg_newtuple, desc }),
        _ => None,
    };
    // The token: from the row when the statement set it, else from the setting.
    let row_token = match (insert, update, &new) {
        (true, _, Some(n)) => n.int(token_c),
        (_, true, Some(n)) => {
            // SAFETY: the updated-columns set belongs to the firing trigger.
            let set = unsafe {
                pg_sys::bms_is_member(
                    i32::from(token_c.attnum) - pg_sys::FirstLowInvalidHeapAttributeNumber,
                    data.tg_updatedcols,
                )
            };
            if set { n.int(token_c) } else { None }
        }
        _ => None,
    };
    let from_setting = row_token.is_none();
    let token = row_token.or_else(|| setting_number("fencing.token", token_setting));
    let token = token.map(|t| unsigned("token", t) as i64);

    let subject = new.as_ref().unwrap_or(&old);
    let Some(resource) = subject.text(resource_c) else {
        bad_argument(PgSqlErrorCode::ERRCODE_NOT_NULL_VIOLATION, format!("fencing: {resource_col} is NULL"));
    };
    let row_lock = lock_c.and_then(|c| subject.text(c));
    let lock = lock_setting.clone().or_else(|| row_lock.clone()).unwrap_or_else(|| resource.clone());
    let row_seq = if new.is_some() { seq_c.and_then(|c| new.as_ref().and_then(|n| n.int(c))) } else { None };
    let sequence = row_seq.or_else(|| setting_number("fencing.sequence", seq_setting.clone()));
    let sequence = sequence.map(|s| unsigned("sequence", s) as i64);
    for (what, value) in [("resource", &resource), ("lock", &lock)] {
        if value.is_empty() || value.len() > write::MAX_NAME {
            bad_argument(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("fencing: {what} must be 1 to {} bytes, got {}", write::MAX_NAME, value.len()),
            );
        }
    }
    if in_row {
        cannot_carry(
            lock_c.is_none() && lock_setting.as_deref().is_some_and(|l| l != resource),
            "fencing.lock",
            "lock",
        );
        cannot_carry(seq_c.is_none() && seq_setting.is_some(), "fencing.sequence", "sequence");
    }

    // A row that moves to another resource writes the one it leaves too.
    let mut resources = vec![resource.clone()];
    if update
        && !old.same(new.as_ref().unwrap_or(&old), resource_c)
        && let Some(old_resource) = old.text(resource_c)
        && old_resource != resource
    {
        resources.insert(0, old_resource);
    }
    let moved = resources.len() == 2;
    for (i, r) in resources.iter().enumerate() {
        // Without a lock column, a resource's lock is its own name.
        let lock = if lock_setting.is_none() && lock_c.is_none() { r.clone() } else { lock.clone() };
        let refusal = |reason: &str, fence, failure| Refusal {
            reason: reason.to_owned(),
            resource: r.clone(),
            lock: lock.clone(),
            token,
            sequence,
            fence,
            failure,
        };
        let Some(t) = token else {
            PENDING.with(|p| *p.borrow_mut() = Some(refusal("no_token", None, None)));
            break;
        };
        let leaving = !insert && (!update || (moved && i == 0));
        let in_place = update && !moved;
        let presented =
            write::Presented { resource: r, lock: &lock, token: t, sequence, policy, carrier: in_row.then_some(relid) };
        let outcome = if in_row && (leaving || in_place) {
            // The old row is locked by this statement and holds the latest committed fence.
            let outcome = decide_in_row(&old, &setup, &presented);
            if let (true, write::Outcome::Admitted { high_water, sequence, .. }) = (leaving, &outcome) {
                write::release(
                    r,
                    &write::FenceRow { lock: lock.clone(), high_water: *high_water, sequence: *sequence },
                );
            }
            outcome
        } else {
            write::write(&presented)
        };
        match outcome {
            write::Outcome::Admitted { .. } => {}
            write::Outcome::CarriedHere(_) if in_row => {}
            write::Outcome::CarriedBy(table) | write::Outcome::CarriedHere(table) => write::refuse_carried(r, table),
            write::Outcome::Refused { reason, fence } => {
                PENDING.with(|p| *p.borrow_mut() = Some(refusal(reason, fence, None)));
                break;
            }
            write::Outcome::Failed { failure, fence } => {
                PENDING.with(|p| *p.borrow_mut() = Some(refusal("guard_failure", fence, Some(failure))));
                break;
            }
        }
    }

    // The row as it came, unless it must record what wrote it: a token from
    // the setting, and for a fence in row the lock and sequence too.
    let as_came = pg_sys::Datum::from(if update { data.tg_newtuple } else { data.tg_trigtuple });
    let admitted = PENDING.with(|p| p.borrow().is_none());
    let (Some(_), Some(t), true) = (&new, token, admitted) else { return Ok(as_came) };
    let set_lock = in_row && lock_c.is_some() && row_lock.as_deref() != Some(lock.as_str());
    let set_seq = in_row && seq_c.is_some() && sequence.is_some() && row_seq != sequence;
    if !(from_setting || set_lock || set_seq) {
        return Ok(as_came);
    }
    let mut tuple = trigger.new().expect("a new row").into_owned();
    if from_setting {
        set_int(&mut tuple, token_c, t, token_col);
    }
    if let (true, Some(c)) = (set_lock, lock_c) {
        let attnum = NonZeroUsize::new(c.attnum as usize).expect("a user column");
        tuple.set_by_index(attnum, lock.as_str()).expect("the lock column is text");
    }
    if let (true, Some(c), Some(s)) = (set_seq, seq_c, sequence) {
        set_int(&mut tuple, c, s, seq_col);
    }
    Ok(tuple.into_trigger_datum().unwrap_or(pg_sys::Datum::from(0)))
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
fn decide_in_row(old: &Row, c: &Setup, p: &write::Presented) -> write::Outcome {
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

/// Stores `value` in an integer column of its own width.
fn set_int(tuple: &mut PgHeapTuple<'_, AllocatedByRust>, c: Column, value: i64, name: &str) {
    let attnum = NonZeroUsize::new(c.attnum as usize).expect("a user column");
    let out_of_range = || -> ! {
        bad_argument(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("fencing: {value} does not fit the {name} column"),
        )
    };
    let stored = match c.type_oid {
        pg_sys::INT2OID => tuple.set_by_index(attnum, i16::try_from(value).unwrap_or_else(|_| out_of_range())),
        pg_sys::INT4OID => tuple.set_by_index(attnum, i32::try_from(value).unwrap_or_else(|_| out_of_range())),
        _ => tuple.set_by_index(attnum, value),
    };
    stored.expect("the column accepts its own type");
}
