//! The SQL-callable functions written in Rust (the row trigger is in `trigger.rs`).
//!
//! - `fencing._decide(..)`: the component's decision on plain SQL values; it
//!   returns refusals and guard failures, and `fencing.admit` (PL/pgSQL)
//!   raises the failures with their SQLSTATE.
//! - `fencing._try_write(..)`: one write against a resource's fence
//!   (`write.rs`); `fencing.try_write` and `fencing.check` wrap it.
//! - `fencing.guard_info()`, `fencing.guard_stats()`.
//! - `fencing._check_name(what, value)`, `fencing._check_policy(policy)`:
//!   the shared argument rules (`args.rs`) for the PL/pgSQL functions.

use crate::args::{check_name, name, policy, required, signed, unsigned};
use crate::{guard, write};
use fencing_runtime::{Admission, Fence, Sequencer};
use pgrx::prelude::*;

/// A decision as SQL values: whether it admits, the rejection's reason, the
/// new fence on admission or the fence it was decided against on a refusal,
/// whether a new term began, and the guard failure when the component could
/// not decide (then nothing else is set).
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
    (
        name!(admitted, bool),
        name!(reason, Option<&'static str>),
        name!(high_water, Option<i64>),
        name!(last_sequence, Option<i64>),
        name!(new_term, bool),
        name!(failure, Option<String>),
    ),
> {
    let lock = name("lock", lock);
    if let Some(current) = current_lock {
        check_name("current_lock", current);
    }
    let token = unsigned("token", required("token", token));
    let sequence = sequence.map(|s| unsigned("sequence", s));
    let policy = self::policy(required("policy", policy));
    let current = current_lock.map(|l| Fence {
        lock: l.to_owned(),
        high_water: unsigned("current_high_water", required("current_high_water", current_high_water)),
        sequence: current_sequence.map(|s| unsigned("current_sequence", s)),
    });
    let presented = Sequencer { lock: lock.to_owned(), token, sequence };
    TableIterator::once(match guard::decide(current.as_ref(), &presented, policy) {
        Err(failure) => (false, None, None, None, false, Some(failure)),
        Ok(Ok(Admission { high_water, sequence, new_term })) => (
            true,
            None,
            Some(signed("high_water", high_water)),
            sequence.map(|s| signed("sequence", s)),
            new_term,
            None,
        ),
        Ok(Err(reason)) => {
            // The evidence is the fence the write was decided against.
            let fence = current.as_ref();
            let (hw, last) = (
                fence.map(|f| signed("high_water", f.high_water)),
                fence.and_then(|f| f.sequence).map(|s| signed("sequence", s)),
            );
            (false, Some(reason), hw, last, false, None)
        }
    })
}

/// One write against `resource`'s fence in the calling transaction: admitted
/// (the fence is raised) or refused (nothing changed), with the evidence.
#[allow(clippy::type_complexity)]
#[pg_extern(name = "_try_write", parallel_unsafe)]
fn try_write(
    resource: Option<&str>,
    lock: Option<&str>,
    token: Option<i64>,
    sequence: Option<i64>,
    policy: Option<&str>,
) -> TableIterator<
    'static,
    (
        name!(admitted, bool),
        name!(reason, Option<String>),
        name!(high_water, Option<i64>),
        name!(last_sequence, Option<i64>),
        name!(new_term, bool),
        name!(fence_lock, Option<String>),
        name!(failure, Option<String>),
    ),
> {
    let presented = write::Presented {
        resource: name("resource", resource),
        lock: name("lock", lock),
        token: signed("token", unsigned("token", required("token", token))),
        sequence: sequence.map(|s| signed("sequence", unsigned("sequence", s))),
        policy: self::policy(required("policy", policy)),
        carrier: None,
    };
    TableIterator::once(match write::write(&presented) {
        write::Outcome::Admitted { high_water, sequence, new_term } => {
            (true, None, Some(high_water), sequence, new_term, Some(presented.lock.to_owned()), None)
        }
        write::Outcome::Refused { reason, fence } => {
            let (lock, hw, seq) = fence.map(|f| (Some(f.lock), Some(f.high_water), f.sequence)).unwrap_or_default();
            (false, Some(reason.to_owned()), hw, seq, false, lock, None)
        }
        write::Outcome::Failed { failure, fence } => {
            let (lock, hw, seq) = fence.map(|f| (Some(f.lock), Some(f.high_water), f.sequence)).unwrap_or_default();
            (false, Some("guard_failure".to_owned()), hw, seq, false, lock, Some(failure))
        }
        write::Outcome::CarriedBy(table) | write::Outcome::CarriedHere(table) => {
            write::refuse_carried(presented.resource, table)
        }
    })
}

/// This backend's component calls and the time spent inside them (for the
/// component's share of a write), since the backend started.
#[pg_extern(name = "guard_stats", parallel_unsafe)]
fn guard_stats() -> TableIterator<'static, (name!(calls, i64), name!(nanos, i64))> {
    let (calls, nanos) = guard::stats();
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

/// Raises the refusal of `value` as a name (resource or lock) by the shared rule.
#[pg_extern(name = "_check_name", immutable, parallel_safe)]
fn check_name_sql(what: &str, value: &str) {
    check_name(what, value);
}

/// Raises the refusal of `value` as a policy by the shared rule (NULL is refused too).
#[pg_extern(name = "_check_policy", immutable, parallel_safe)]
fn check_policy(value: Option<&str>) {
    policy(required("policy", value));
}
