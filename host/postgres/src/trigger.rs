//! The row trigger of a protected table.
//!
//! `fencing_guard_a` (this file, `BEFORE INSERT OR UPDATE OR DELETE FOR EACH
//! ROW`, arguments: resource, token, lock and sequence columns, policy) finds
//! what the row presents, runs the write against its resource's fence
//! (`write.rs`) and, on a refusal, leaves it pending. `fencing_guard_b`
//! (PL/pgSQL, `sql/fencing.sql`) comes right after it for the same row (row
//! triggers fire in name order); its `WHEN (fencing._refusal_pending())` lets
//! it run only when a refusal is pending, and it raises that refusal with its
//! SQLSTATE: errors raised from Rust can carry only PostgreSQL's own
//! SQLSTATEs. Every `a` starts by clearing what an earlier row left, so a
//! `b` only ever sees its own row's refusal.
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
use crate::{settings, write};
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::num::NonZeroUsize;

/// A refusal waiting for `fencing_guard_b`.
#[derive(Clone)]
struct Refusal {
    reason: String,
    resource: String,
    lock: String,
    token: Option<i64>,
    sequence: Option<i64>,
    fence: Option<write::FenceRow>,
    failure: Option<String>,
}

thread_local! {
    static PENDING: RefCell<Option<Refusal>> = const { RefCell::new(None) };
}

/// One column of the row: its number and type.
#[derive(Clone, Copy)]
struct Column {
    attnum: i16,
    type_oid: pg_sys::Oid,
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

    /// The value as text, by its type's output function.
    fn text(&self, c: Column) -> Option<String> {
        let datum = self.datum(c)?;
        let (mut out, mut varlena) = (pg_sys::Oid::INVALID, false);
        // SAFETY: `datum` is a non-null value of `c.type_oid`.
        unsafe {
            pg_sys::getTypeOutputInfo(c.type_oid, &mut out, &mut varlena);
            let text = pg_sys::OidOutputFunctionCall(out, datum);
            Some(CStr::from_ptr(text).to_string_lossy().into_owned())
        }
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
    Some(Column { attnum, type_oid })
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

#[pg_trigger]
fn _guard_row<'a>(trigger: &'a PgTrigger<'a>) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, PgTriggerError> {
    PENDING.with(|p| p.borrow_mut().take());
    let args = trigger.extra_args()?;
    let [resource_col, token_col, lock_col, seq_col, policy_name] = &args[..] else {
        bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "fencing: protect the table again".into());
    };
    let data = trigger.trigger_data();
    let op = trigger.op()?;
    // SAFETY: the relation belongs to the firing trigger.
    let (relid, desc) = unsafe { ((*data.tg_relation).rd_id, (*data.tg_relation).rd_att) };
    let resource_c = column(relid, resource_col).expect("the resource column is required");
    let token_c = column(relid, token_col).expect("the token column is required");
    let (lock_c, seq_c) = (column(relid, lock_col), column(relid, seq_col));
    let policy = policy(policy_name);
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
    let lock = lock_setting.or_else(|| lock_c.and_then(|c| subject.text(c))).unwrap_or_else(|| resource.clone());
    let row_seq = if new.is_some() { seq_c.and_then(|c| new.as_ref().and_then(|n| n.int(c))) } else { None };
    let sequence = row_seq.or_else(|| setting_number("fencing.sequence", seq_setting));
    let sequence = sequence.map(|s| unsigned("sequence", s) as i64);
    for (what, value) in [("resource", &resource), ("lock", &lock)] {
        if value.is_empty() || value.len() > write::MAX_NAME {
            bad_argument(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("fencing: {what} must be 1 to {} bytes, got {}", write::MAX_NAME, value.len()),
            );
        }
    }

    // A row that moves to another resource writes the one it leaves too.
    let mut resources = vec![resource.clone()];
    if let (true, Some(old_resource)) = (update, old.text(resource_c))
        && old_resource != resource
    {
        resources.insert(0, old_resource);
    }
    for r in &resources {
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
        let presented = write::Presented { resource: r, lock: &lock, token: t, sequence, policy };
        match write::write(&presented) {
            write::Outcome::Admitted { .. } => {}
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

    Ok(match new {
        None => trigger.old().map(|t| t.into_owned()),
        Some(_) => {
            let mut tuple = trigger.new().map(|t| t.into_owned());
            if let (true, Some(t), Some(tuple)) = (from_setting, token, tuple.as_mut()) {
                // The row records the token that wrote it.
                let attnum = NonZeroUsize::new(token_c.attnum as usize).expect("a user column");
                fn out_of_range(t: i64, column: &str) -> ! {
                    bad_argument(
                        PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                        format!("fencing: token {t} does not fit the {column} column"),
                    )
                }
                let stored = match token_c.type_oid {
                    pg_sys::INT2OID => {
                        tuple.set_by_index(attnum, i16::try_from(t).unwrap_or_else(|_| out_of_range(t, token_col)))
                    }
                    pg_sys::INT4OID => {
                        tuple.set_by_index(attnum, i32::try_from(t).unwrap_or_else(|_| out_of_range(t, token_col)))
                    }
                    _ => tuple.set_by_index(attnum, t),
                };
                stored.expect("the token column accepts its own type");
            }
            tuple
        }
    })
}

/// Whether `fencing_guard_a` left a refusal for this row.
#[pg_extern(name = "_refusal_pending", parallel_unsafe)]
fn refusal_pending() -> bool {
    PENDING.with(|p| p.borrow().is_some())
}

/// Takes the pending refusal (no row when there is none).
#[allow(clippy::type_complexity)]
#[pg_extern(name = "_take_refusal", parallel_unsafe)]
fn take_refusal() -> TableIterator<
    'static,
    (
        name!(reason, String),
        name!(resource, String),
        name!(lock, String),
        name!(token, Option<i64>),
        name!(sequence, Option<i64>),
        name!(fence_lock, Option<String>),
        name!(high_water, Option<i64>),
        name!(last_sequence, Option<i64>),
        name!(failure, Option<String>),
    ),
> {
    let taken = PENDING.with(|p| p.borrow_mut().take());
    TableIterator::new(taken.into_iter().map(|r| {
        let (fl, hw, ls) = r.fence.map(|f| (Some(f.lock), Some(f.high_water), f.sequence)).unwrap_or_default();
        (r.reason, r.resource, r.lock, r.token, r.sequence, fl, hw, ls, r.failure)
    }))
}
