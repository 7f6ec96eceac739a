//! The SQL-callable functions written in Rust.
//!
//! - `fencing._decide(..)`: the component's decision on plain SQL values. It
//!   never raises for a refusal or a guard failure; it returns them, and the
//!   PL/pgSQL callers raise them with the fencing SQLSTATEs.
//! - `fencing._written_here(xmin)`: whether a row version was written by the
//!   current transaction (or one of its live subtransactions).
//! - `fencing._mark_token_set()` and `fencing._statement_sets_token()`: the
//!   two halves of "does this UPDATE set the token column", which PL/pgSQL
//!   cannot ask (see `sql/fencing.sql`, `fencing.protect`).

use crate::guard;
use fencing_runtime::{Admission, Fence, Guard, Policy, Rejection, Sequencer, code};
use pgrx::prelude::*;
use std::cell::Cell;

/// Why an argument cannot be used; raised as a PostgreSQL error with a standard SQLSTATE.
fn bad_argument(code: PgSqlErrorCode, message: String) -> ! {
    ereport!(ERROR, code, message);
}

/// A token or sequence from SQL: `bigint` holds 0..=2^63-1 of the contract's
/// u64; a negative value is refused, never reinterpreted.
fn unsigned(name: &str, value: i64) -> u64 {
    u64::try_from(value).unwrap_or_else(|_| {
        bad_argument(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!(
                "{name} must be between 0 and 9223372036854775807, got {value}: tokens are unsigned 64-bit numbers \
                 and SQL carries them as bigint, so tokens above 2^63-1 cannot be presented through SQL"
            ),
        )
    })
}

fn required<T>(name: &str, value: Option<T>) -> T {
    value.unwrap_or_else(|| bad_argument(PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{name} is NULL")))
}

/// Never above `i64::MAX`: every value came in as a non-negative bigint.
fn signed(v: u64) -> i64 {
    i64::try_from(v).expect("a fence value came from a non-negative bigint")
}

/// A decision as SQL values: the rule's verdict code (`fencing_runtime::code`),
/// the new fence on admission or the fence it was decided against on a
/// refusal, and the guard failure when the component could not decide.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
#[pg_extern(name = "_decide", parallel_safe)]
fn decide(
    current_lock: Option<&str>,
    current_high_water: Option<i64>,
    current_sequence: Option<i64>,
    lock: Option<&str>,
    token: Option<i64>,
    sequence: Option<i64>,
    policy: Option<&str>,
) -> TableIterator<
    'static,
    (name!(code, i32), name!(high_water, Option<i64>), name!(sequence, Option<i64>), name!(failure, Option<String>)),
> {
    let lock = required("lock", lock);
    let token = unsigned("token", required("token", token));
    let sequence = sequence.map(|s| unsigned("sequence", s));
    let policy: Policy = required("policy", policy).parse().unwrap_or_else(|e| {
        bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("policy `{}`: {e}", policy.unwrap_or("")))
    });
    let current = current_lock.map(|l| Fence {
        lock: l.to_owned(),
        high_water: unsigned("current_high_water", required("current_high_water", current_high_water)),
        sequence: current_sequence.map(|s| unsigned("current_sequence", s)),
    });
    let presented = Sequencer { lock: lock.to_owned(), token, sequence };
    let decided = guard::with_guard(|g| {
        let started = std::time::Instant::now();
        let decided = g.admit(current.as_ref(), &presented, policy);
        let nanos = started.elapsed().as_nanos() as u64;
        STATS.with(|s| s.set((s.get().0 + 1, s.get().1 + nanos)));
        decided
    });
    let row = match decided {
        Err(unavailable) => (code::INVALID_TOKEN, None, None, Some(format!("guard_unavailable: {unavailable}"))),
        Ok(Err(failure)) => (code::INVALID_TOKEN, None, None, Some(format!("{}: {failure}", failure.reason()))),
        Ok(Ok(Ok(Admission { high_water, sequence, new_term }))) => {
            let c = if new_term { code::ADMITTED_NEW_TERM } else { code::ADMITTED };
            (c, Some(signed(high_water)), sequence.map(signed), None)
        }
        Ok(Ok(Err(rejection))) => {
            let c = match rejection {
                Rejection::InvalidToken => code::INVALID_TOKEN,
                Rejection::WrongLock => code::WRONG_LOCK,
                Rejection::StaleToken { .. } => code::STALE_TOKEN,
                Rejection::TokenReused { .. } => code::TOKEN_REUSED,
                Rejection::SequenceRegressed { .. } => code::SEQUENCE_REGRESSED,
            };
            // The evidence is the fence the write was decided against.
            let fence = current.as_ref();
            (c, fence.map(|f| signed(f.high_water)), fence.and_then(|f| f.sequence).map(signed), None)
        }
    };
    let (c, high_water, sequence, failure) = row;
    TableIterator::once((i32::from(c), high_water, sequence, failure))
}

thread_local! {
    /// Component calls made by this backend, and the nanoseconds spent in them.
    static STATS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// This backend's component calls and the time spent inside them (for the
/// component's share of a write), since the backend started.
#[pg_extern(name = "guard_stats", parallel_unsafe)]
fn guard_stats() -> TableIterator<'static, (name!(calls, i64), name!(nanos, i64))> {
    let (calls, nanos) = STATS.with(Cell::get);
    TableIterator::once((calls as i64, nanos as i64))
}

/// The component this backend runs: its source, SHA-256, exports, call
/// path and whether it came from the compile cache (builds the guard if needed).
#[pg_extern(name = "guard_info", parallel_unsafe)]
fn guard_info() -> pgrx::JsonB {
    match guard::with_guard(|g| serde_json::to_value(g.info()).unwrap_or_default()) {
        Ok(info) => pgrx::JsonB(info),
        Err(why) => pgrx::JsonB(serde_json::json!({ "error": why })),
    }
}

/// Whether the row version with this `xmin` was written by the current
/// transaction or one of its live subtransactions.
#[pg_extern(name = "_written_here", parallel_unsafe)]
fn written_here(xmin: i64) -> bool {
    let Ok(xid) = u32::try_from(xmin) else { return false };
    // SAFETY: a plain query of the backend's own transaction state.
    unsafe { pg_sys::TransactionIdIsCurrentTransactionId(xid.into()) }
}

thread_local! {
    /// Left by the `fencing_guard_a` trigger for the `fencing_guard_b` trigger
    /// of the same row: whether the UPDATE's SET list names the token column.
    static TOKEN_SET: Cell<bool> = const { Cell::new(false) };
}

/// `BEFORE UPDATE FOR EACH ROW`, argument: the token column. Records whether
/// the statement's SET list names it (even when the value is unchanged),
/// which PL/pgSQL cannot ask. Triggers of one row fire in name order, so
/// `fencing_guard_a` runs right before `fencing_guard_b` for every updated
/// row and the mark it leaves is always the current row's.
#[pg_trigger]
fn _mark_token_set<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, impl WhoAllocated>>, pgrx::PgTriggerError> {
    let data = trigger.trigger_data();
    let column = trigger.extra_args()?.into_iter().next().unwrap_or_default();
    let column = std::ffi::CString::new(column).unwrap_or_default();
    // SAFETY: the relation and the updated-columns set belong to the firing
    // trigger and live for the duration of this call.
    let set = unsafe {
        let relid = (*data.tg_relation).rd_id;
        let attnum = pg_sys::get_attnum(relid, column.as_ptr());
        attnum > 0
            && pg_sys::bms_is_member(
                i32::from(attnum) - pg_sys::FirstLowInvalidHeapAttributeNumber,
                data.tg_updatedcols,
            )
    };
    TOKEN_SET.with(|m| m.set(set));
    Ok(trigger.new())
}

/// Whether the UPDATE of the current row sets the token column; consumes the mark.
#[pg_extern(name = "_statement_sets_token", parallel_unsafe)]
fn statement_sets_token() -> bool {
    TOKEN_SET.with(|m| m.replace(false))
}
