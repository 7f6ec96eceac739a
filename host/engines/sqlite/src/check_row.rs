//! The protected-table triggers' decision: `fencing_check_row` decides one
//! row against its resource's mark, and `fencing_pending` hands the admitted
//! fence to the trigger's body, which writes the fence row.
//!
//! `fencing_check_row(table, op, resource, lock, token, sequence, policy,
//! fence_lock, fence_high_water, fence_sequence, fence_carrier, carried,
//! row_token, conflict)` is the trigger's `WHEN`. `table` is the name the
//! table was protected under, `op` the trigger's operation (`insert-rowid`:
//! an INSERT into a table keyed by its `INTEGER PRIMARY KEY` resource),
//! `resource` the row's key as SQLite holds it (named by `args::name_of`: an
//! integer by its decimal form, text by the name rule; a real or a blob is
//! refused); `lock`, `token` and `sequence` are what the row itself presents
//! (NULL: the connection's `fencing_present` values, the lock defaulting to
//! the resource); the `fence_*` arguments are the resource's fence row (all
//! NULL without one); `carried` is the token this table's row held before
//! the write and `row_token` the token it holds after, when the table keeps
//! its fences in its rows (`fence_in_row.rs`); `conflict` names another
//! resource whose row the new row collides with on a unique key
//! (`schema.rs`), which a REPLACE would delete undecided. A refusal fails the
//! statement; an admission answers a [`FenceRowWrite`]. On a connection with
//! verifier keys (`fencing_set_keys`), the row is decided signed: the proof
//! of `fencing_present_proof` must hold for the presented lock and token
//! before the mark is consulted.

use crate::args::{borrowed, fail, int, name_of, policy, to_i64, unsigned};
use crate::fence_in_row;
use crate::guard::or_embedded;
use crate::session::{FenceRowWrite, Pending, Presented, Session};
use fencing_runtime::{Admission, Fence, Sequencer, accept};
use rusqlite::Result;
use rusqlite::functions::Context;
use rusqlite::types::{Value, ValueRef};

/// `fencing_check_row(..)`: decides the row; the [`FenceRowWrite`] it leaves, as SQL sees it.
pub fn check_row(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    let table = borrowed(ctx, 0, "table")?.unwrap_or_default();
    let resource = row_name(ctx, table)?;
    let resource = resource.as_str();
    let (session, plugin, verifier, proof) = {
        let state = s.lock();
        // The proof is taken only where it is checked.
        let proof = state.verifier.as_ref().and_then(|_| state.proof.clone()).unwrap_or_default();
        (state.presented.clone(), state.plugin.clone(), state.verifier.clone(), proof)
    };
    let row = RowCheck { ctx, table, resource };
    let presented = row.presented(&session)?;
    if let Some(other) = borrowed(ctx, 13, "conflict")? {
        return Err(fail(format!(
            "fencing: key_conflict: {}: the new row collides on a unique key with the row of resource {other:?}, which a \
             REPLACE would delete without deciding it; nothing was written (delete that row first, presenting its token)",
            row.at(&presented.lock)
        )));
    }
    let fence = FenceArgs::read(ctx)?;
    let current = row.current_mark(&fence)?;
    let decider = or_embedded(plugin).map_err(|why| fail(format!("fencing: guard_unavailable: {why}")))?;
    let policy = policy(borrowed(ctx, 6, "policy")?)?;
    // With keys on the connection, the presented proof is checked before the fence.
    let decision = decider
        .decide_signed(verifier.as_deref(), current.as_ref(), &presented, &proof, policy)
        .map(|d| d.map_err(|r| r.reason()))
        .map_err(|why| {
            fail(format!(
                "fencing: guard_failure: {}: the guard could not decide ({why}); nothing was written",
                row.at(&presented.lock)
            ))
        })?;
    match decision {
        Ok(admission) => {
            let write = row.fence_row_write(&presented, &admission, &fence, int(ctx, 12, "row token")?)?;
            s.lock().pending = (write != FenceRowWrite::Kept).then(|| Pending {
                resource: resource.to_string(),
                lock: presented.lock,
                high_water: admission.high_water,
                sequence: admission.sequence,
                write,
            });
            Ok(write.sql())
        }
        Err(reason) => Err(row.refusal(reason, &presented, current.as_ref())),
    }
}

/// The name of the row's resource (argument 2), or the refusal: a key that
/// has no one name, or the -1 SQLite shows an auto-assigned `INTEGER PRIMARY
/// KEY` as.
fn row_name(ctx: &Context<'_>, table: &str) -> Result<String> {
    let key = ctx.get_raw(2);
    if borrowed(ctx, 1, "op")? == Some("insert-rowid") && key == ValueRef::Integer(-1) {
        return Err(fail(format!(
            "fencing: key_auto: table {table}: the INSERT does not name the resource, the table's INTEGER PRIMARY KEY \
             (SQLite assigns it after the triggers decide, and shows it to them as -1); name the resource in the row"
        )));
    }
    name_of(key).map_err(|why| fail(format!("fencing: table {table}: the resource {why}; nothing was written")))
}

/// The row being decided: its table and resource.
struct RowCheck<'a> {
    ctx: &'a Context<'a>,
    table: &'a str,
    resource: &'a str,
}

/// The resource's fence row as the trigger read it (all `None` without one).
struct FenceArgs<'a> {
    lock: Option<&'a str>,
    high_water: Option<u64>,
    sequence: Option<u64>,
    carrier: Option<&'a str>,
}

impl<'a> FenceArgs<'a> {
    fn read(ctx: &'a Context<'_>) -> Result<FenceArgs<'a>> {
        Ok(FenceArgs {
            lock: borrowed(ctx, 7, "fence lock")?,
            high_water: unsigned(ctx, 8, "fence high_water")?,
            sequence: unsigned(ctx, 9, "fence sequence")?,
            carrier: borrowed(ctx, 10, "fence carrier")?,
        })
    }
}

impl RowCheck<'_> {
    /// Where a refusal happened; built only when there is one (this runs for every protected row).
    fn at(&self, lock: &str) -> String {
        format!("table {}, resource {:?}, lock {lock:?}", self.table, self.resource)
    }

    /// What the write presents: the row's lock, token and sequence, else the connection's.
    fn presented(&self, session: &Presented) -> Result<Sequencer> {
        let lock = match (&session.lock, self.ctx.get_raw(3)) {
            (Some(l), _) => l.clone(),
            (None, ValueRef::Null) => self.resource.to_string(),
            (None, v) => name_of(v).map_err(|why| {
                fail(format!("fencing: table {}, resource {:?}: the lock column {why}", self.table, self.resource))
            })?,
        };
        let token = match int(self.ctx, 4, "token")? {
            Some(t) => accept::from_signed(t)
                .map_err(|e| fail(format!("fencing: invalid_token: {}: token {e}", self.at(&lock))))?,
            None => session.token.ok_or_else(|| {
                fail(format!(
                    "fencing: missing_token: {}: the write presents no token (set the token column, or call fencing_present(token) first)",
                    self.at(&lock)
                ))
            })?,
        };
        let sequence = unsigned(self.ctx, 5, "sequence")?.or(session.sequence);
        Ok(Sequencer { lock, token, sequence })
    }

    /// The resource's mark: its fence row, raised by the token a carrier row holds.
    fn current_mark(&self, fence: &FenceArgs<'_>) -> Result<Option<Fence>> {
        let Some(fence_lock) = fence.lock else { return Ok(None) };
        let carried = match fence.carrier {
            None => None,
            Some(c) if c == self.table => {
                fence_in_row::carried_value(self.table, self.resource, int(self.ctx, 11, "carried token")?)?
            }
            Some(c) => {
                // SAFETY: the connection running this trigger; the read finishes before returning.
                let db = unsafe { self.ctx.get_connection()? };
                fence_in_row::read_carried(&db, c, self.resource)?
            }
        };
        Ok(Some(fence_in_row::mark(fence_lock, fence.high_water.unwrap_or(0), fence.sequence, carried)))
    }

    /// What the admission leaves for the fence row: nothing when the written
    /// row carries the new mark (it holds the admitted token, no sequence is
    /// involved) and the fence row already names this table as carrier.
    fn fence_row_write(
        &self,
        presented: &Sequencer,
        admission: &Admission,
        fence: &FenceArgs<'_>,
        row_token: Option<i64>,
    ) -> Result<FenceRowWrite> {
        let carries = row_token == Some(to_i64(presented.token, "token")?) && admission.sequence.is_none();
        let kept = carries
            && fence.carrier == Some(self.table)
            && fence.lock == Some(presented.lock.as_str())
            && fence.sequence.is_none();
        Ok(match (kept, carries) {
            (true, _) => FenceRowWrite::Kept,
            (false, true) => FenceRowWrite::NamingCarrier,
            (false, false) => FenceRowWrite::Plain,
        })
    }

    /// The refusal that fails the statement: its reason, where, what was
    /// presented and the fence it was decided against.
    fn refusal(&self, reason: &str, presented: &Sequencer, current: Option<&Fence>) -> rusqlite::Error {
        let shown = |seq: Option<u64>| seq.map_or_else(String::new, |v| format!(" sequence {v}"));
        let fence = match current {
            None => "no fence".to_string(),
            Some(f) => format!("high_water {}{} (bound to lock {:?})", f.high_water, shown(f.sequence), f.lock),
        };
        fail(format!(
            "fencing: {reason}: {}: presented token {}{}, {fence}",
            self.at(&presented.lock),
            presented.token,
            shown(presented.sequence)
        ))
    }
}

/// `fencing_pending(resource, field)`: the fence the check just admitted for
/// `resource`, for the trigger's body to write: `'lock'`, `'high_water'`,
/// `'sequence'`, or `'carrier'` (the [`FenceRowWrite`]: 1 when the body names
/// no carrier, 2 when it names the table). A body for another resource than
/// the check's fails closed.
pub fn pending(ctx: &Context<'_>, s: &Session) -> Result<Value> {
    let resource = borrowed(ctx, 0, "resource")?.unwrap_or_default();
    let state = s.lock();
    let Some(p) = state.pending.as_ref().filter(|p| p.resource == resource) else {
        return Err(fail(format!(
            "fencing: guard_failure: resource {resource:?}: no admission is pending; nothing was written"
        )));
    };
    Ok(match borrowed(ctx, 1, "field")? {
        Some("lock") => Value::Text(p.lock.clone()),
        Some("high_water") => Value::Integer(to_i64(p.high_water, "high_water")?),
        Some("sequence") => p.sequence.map(|v| to_i64(v, "sequence")).transpose()?.map_or(Value::Null, Value::Integer),
        Some("carrier") => Value::Integer(p.write.sql()),
        other => return Err(fail(format!("fencing_pending: unknown field {other:?}"))),
    })
}
