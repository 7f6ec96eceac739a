//! `FENCING.DECIDE`: one decision with no key, for checking the module
//! against the shared vectors and for clients that keep fences elsewhere.
//!
//! `FENCING.DECIDE policy lock token [SEQ n] [FENCE lock high_water [SEQ n]] [PROOF hex]`
//! answers `[verdict, ...evidence]`: `admitted high_water sequence new_term`,
//! `stale_token presented high_water`, `token_reused presented high_water`,
//! `sequence_regressed token presented last`, `wrong_lock`, `invalid_token`.
//! With the module's `VERIFY` keys the decision is signed, as a write's is:
//! the proof is checked first, and its refusals answer `proof_missing`,
//! `proof_malformed`, `proof_unknown_key key_id` or `proof_bad`.
//! Numbers are bulk strings (a u64 does not fit a RESP integer), a missing
//! sequence is nil.

use crate::args::{contract_lock, invalid, number as u64_arg, policy as policy_arg, proof as proof_arg};
use crate::boundary::{Answer, Refusal, Reply};
use fencing_runtime::proof::{ProofRejection, SignedRejection};
use fencing_runtime::{Fence, Guard, Rejection, Sequencer};
use redis_module::{Context, RedisString};

fn number(n: u64) -> Reply {
    Reply::Bulk(n.to_string().into_bytes())
}

fn optional(n: Option<u64>) -> Reply {
    n.map_or(Reply::Nil, number)
}

/// `SEQ n` at the front of `args`, if there.
fn sequence(args: &[RedisString]) -> Result<(Option<u64>, &[RedisString]), Refusal> {
    match args {
        [word, value, rest @ ..] if word.as_slice().eq_ignore_ascii_case(b"SEQ") => {
            Ok((Some(u64_arg(value, "SEQ")?), rest))
        }
        [word] if word.as_slice().eq_ignore_ascii_case(b"SEQ") => Err(invalid("SEQ", "needs a value")),
        _ => Ok((None, args)),
    }
}

/// `FENCING.DECIDE policy lock token [SEQ n] [FENCE lock high_water [SEQ n]] [PROOF hex]`
pub fn decide(_ctx: &Context, args: &[RedisString]) -> Answer {
    let [_, policy, lock, token, rest @ ..] = args else { return Err(Refusal::Arity) };
    let policy = policy_arg(policy)?;
    let (seq, rest) = sequence(rest)?;
    let presented = Sequencer { lock: contract_lock(lock)?, token: u64_arg(token, "token")?, sequence: seq };
    let (proof, rest) = match rest {
        [head @ .., word, hex] if word.as_slice().eq_ignore_ascii_case(b"PROOF") => (Some(proof_arg(hex)?), head),
        _ => (None, rest),
    };
    let current = match rest {
        [] => None,
        [word, lock, high_water, rest @ ..] if word.as_slice().eq_ignore_ascii_case(b"FENCE") => {
            let (seq, rest) = sequence(rest)?;
            if !rest.is_empty() {
                return Err(Refusal::Arity);
            }
            Some(Fence { lock: contract_lock(lock)?, high_water: u64_arg(high_water, "high_water")?, sequence: seq })
        }
        _ => return Err(Refusal::Arity),
    };
    let guard = crate::guard::get()?;
    let decision = guard
        .admit_with_keys(crate::guard::verifier(), current.as_ref(), &presented, &proof.unwrap_or_default(), policy)
        .map_err(|e| Refusal::new(format!("GUARD_FAILURE {} {e}", e.reason())))?;
    let word = |w: &'static std::ffi::CStr| Reply::Status(w);
    let decision = match decision {
        Ok(a) => Ok(a),
        Err(SignedRejection::Fence(r)) => Err(r),
        Err(SignedRejection::Proof(ProofRejection::UnknownKey { key_id })) => {
            return Ok(Reply::Array(vec![word(c"proof_unknown_key"), number(u64::from(key_id))]));
        }
        Err(SignedRejection::Proof(r)) => {
            return Ok(Reply::Array(vec![Reply::Bulk(r.reason().as_bytes().to_vec())]));
        }
    };
    Ok(Reply::Array(match decision {
        Ok(a) => vec![word(c"admitted"), number(a.high_water), optional(a.sequence), Reply::Int(i64::from(a.new_term))],
        Err(Rejection::StaleToken { presented, high_water }) => {
            vec![word(c"stale_token"), number(presented), number(high_water)]
        }
        Err(Rejection::TokenReused { presented, high_water }) => {
            vec![word(c"token_reused"), number(presented), number(high_water)]
        }
        Err(Rejection::SequenceRegressed { token, presented, last }) => {
            vec![word(c"sequence_regressed"), number(token), optional(presented), number(last)]
        }
        Err(Rejection::WrongLock) => vec![word(c"wrong_lock")],
        Err(Rejection::InvalidToken) => vec![word(c"invalid_token")],
    }))
}
