//! One fenced write, whatever its command: read what it presents, decide it
//! against the key's fence with the guard, and only if admitted run the
//! write and store the new fence (`writes.rs` and `exec.rs` call it).
//!
//! A refusal is an error reply whose first word is the reason
//! (`STALE_TOKEN`, `TOKEN_REUSED`, `WRONG_LOCK`, `SEQUENCE_REGRESSED`,
//! `INVALID_TOKEN`), followed by the evidence; `GUARD_FAILURE` when the
//! guard could not decide (the write is refused: fail closed). With the
//! module's `VERIFY` keys every write must carry its grant's `PROOF hex`,
//! checked before the fence (`PROOF_MISSING`, `PROOF_MALFORMED`,
//! `PROOF_UNKNOWN_KEY`, `PROOF_BAD`).
//!
//! Invariants:
//! - the fence is stored only after the write succeeded, and a refused or
//!   failed write changes neither the key nor its fence;
//! - an admitted write's fence is its own lock, token and sequence (the
//!   rules make it so), which is what lets a replica or an AOF replay apply
//!   a replicated fenced write ([`replay`]) without deciding it again;
//! - the decision, the write and the fence's update happen under one hold
//!   of the state, with one lookup of the key's fence.

use crate::args::{WriteOptions, name, number, write_options};
use crate::boundary::Refusal;
use crate::state::Db;
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Fence, Guard, Rejection};
use redis_module::RedisString;

/// What a fenced write presented.
pub struct Presented<'a> {
    pub key: &'a RedisString,
    pub lock: &'a str,
    pub token: u64,
    pub options: WriteOptions,
}

/// Reads `key lock token`, then `values` positional arguments, then the
/// options; the positional arguments and whatever follows the options.
pub fn presented(
    args: &[RedisString],
    values: usize,
) -> Result<(Presented<'_>, &[RedisString], &[RedisString]), Refusal> {
    let [_, key, lock, token, rest @ ..] = args else { return Err(Refusal::Arity) };
    if rest.len() < values {
        return Err(Refusal::Arity);
    }
    let (positional, rest) = rest.split_at(values);
    let lock = name(lock, "lock")?;
    let token = number(token, "token")?;
    let (options, rest) = write_options(rest)?;
    Ok((Presented { key, lock, token, options }, positional, rest))
}

/// The refusal's error reply.
fn refusal(r: &Rejection, fence: Option<&Fence>) -> Refusal {
    Refusal::Text(match r {
        Rejection::StaleToken { presented, high_water } => {
            format!("STALE_TOKEN presented={presented} high_water={high_water}")
        }
        Rejection::TokenReused { presented, high_water } => {
            format!("TOKEN_REUSED presented={presented} high_water={high_water}")
        }
        Rejection::SequenceRegressed { token, presented, last } => format!(
            "SEQUENCE_REGRESSED token={token} presented={} last={last}",
            presented.map_or("none".into(), |s| s.to_string())
        ),
        Rejection::WrongLock => {
            let bound = fence.map_or(String::new(), |f| format!("\"{}\"", crate::text::escape(f.lock.as_bytes())));
            format!("WRONG_LOCK the key is fenced by lock {bound}")
        }
        Rejection::InvalidToken => "INVALID_TOKEN token 0 is never issued".into(),
    })
}

/// The error reply of a write whose proof does not hold (module loaded with `VERIFY`).
fn proof_refusal(r: ProofRejection) -> Refusal {
    Refusal::Text(match r {
        ProofRejection::UnknownKey { key_id } => format!("PROOF_UNKNOWN_KEY key_id={key_id} is not a VERIFY key"),
        ProofRejection::Missing => "PROOF_MISSING signed tokens: the write needs the grant's PROOF".into(),
        r => format!("{} {r}", r.reason().to_ascii_uppercase()),
    })
}

/// Stores `key`'s fence after an admitted (or replayed) write: the mark and
/// sequence change in place; a new fence is bound to the write's lock.
fn store(db: &mut Db, p: &Presented, high_water: u64, sequence: Option<u64>) {
    match db.fences.get_mut(p.key.as_slice()) {
        Some(f) => {
            f.high_water = high_water;
            f.sequence = sequence;
        }
        None => {
            db.fences.insert(p.key.as_slice().to_vec(), Fence { lock: p.lock.to_owned(), high_water, sequence });
        }
    }
}

/// Decides `p` in database `db`; if admitted runs `write` and stores the fence.
pub fn fenced<R>(db: i32, p: &Presented, write: impl FnOnce() -> Result<R, Refusal>) -> Result<R, Refusal> {
    crate::events::require_writable()?;
    let guard = crate::guard::get()?;
    let mut state = crate::state::lock().map_err(Refusal::new)?;
    let (dbs, sequencer) = state.parts();
    let db = dbs.entry(db).or_default();
    let slot = db.fences.get_mut(p.key.as_slice());
    let current = slot.as_deref();
    sequencer.lock.clear();
    sequencer.lock.push_str(p.lock);
    sequencer.token = p.token;
    sequencer.sequence = p.options.sequence;
    let proof = p.options.proof.as_deref().unwrap_or_default();
    let admitted = match guard.admit_with_keys(crate::guard::verifier(), current, sequencer, proof, p.options.policy) {
        Ok(Ok(a)) => a,
        Ok(Err(SignedRejection::Fence(rejection))) => {
            crate::stats::refused();
            return Err(refusal(&rejection, current));
        }
        Ok(Err(SignedRejection::Proof(rejection))) => {
            crate::stats::refused();
            return Err(proof_refusal(rejection));
        }
        Err(failure) => {
            crate::stats::failed();
            return Err(Refusal::new(format!("GUARD_FAILURE {} the write is refused: {failure}", failure.reason())));
        }
    };
    let out = write()?;
    match slot {
        Some(f) => {
            f.high_water = admitted.high_water;
            f.sequence = admitted.sequence;
        }
        None => store(db, p, admitted.high_water, admitted.sequence),
    }
    crate::stats::admitted();
    Ok(out)
}

/// Applies a fenced write that the primary admitted (from the replication
/// link or the AOF): runs `write` and stores the fence the admitted write
/// produced, its own lock, token and sequence, without deciding again.
pub fn replay<R>(db: i32, p: &Presented, write: impl FnOnce() -> Result<R, Refusal>) -> Result<R, Refusal> {
    let out = write()?;
    let mut state = crate::state::lock().map_err(Refusal::new)?;
    let db = state.db_mut(db);
    // A replay never lowers a mark (a replica whose state is ahead keeps it).
    if db.fences.get(p.key.as_slice()).is_none_or(|f| f.high_water <= p.token) {
        store(db, p, p.token, p.options.sequence);
    }
    Ok(out)
}
