//! Signed tokens in SQLite: `fencing_set_keys(id, algorithm, key, ...)` gives
//! this connection the lock service's verifier keys (the per-connection
//! call; `fencing_set_keys(NULL)` forgets them); from then on every write of
//! a protected table on this connection must present the proof set with
//! `fencing_present_proof(proof)` (`check_row.rs` decides it), and
//! `fencing_admit_signed(current_lock, current_high_water, current_sequence,
//! lock, token, sequence, proof [, policy])` decides a write whose proof
//! (the grant's `fencing_proof`: a blob, or its hex as text) must hold under
//! those keys before the fence is consulted. The answer is
//! `fencing_admit`'s JSON, with the proof's own reasons
//! (`proof_missing`, `proof_malformed`, `proof_unknown_key` with `key_id`,
//! `proof_bad`).

use crate::answer::decision_json;
use crate::args::{fail, fence_lock_token, policy_arg, text, unsigned};
use crate::session::Session;
use fencing_runtime::proof::{ProofRejection, SignedRejection, VerifierKey};
use fencing_runtime::{Sequencer, Verifier, accept, key_text};
use rusqlite::Result;
use rusqlite::functions::Context;
use rusqlite::types::ValueRef;
use std::sync::Arc;

/// Longest proof taken as a blob: as many bytes as the longest hex text
/// `accept::proof` takes holds (a proof is 37 or 69 bytes).
const MAX_PROOF: usize = accept::MAX_PROOF_HEX / 2;

/// `fencing_set_keys(id, algorithm, key [, id, algorithm, key ...])`: the
/// number of keys installed; `fencing_set_keys(NULL)`: 0, none.
pub fn set_keys(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    if ctx.len() == 1 && matches!(ctx.get_raw(0), ValueRef::Null) {
        s.lock().verifier = None;
        return Ok(0);
    }
    if ctx.is_empty() || !ctx.len().is_multiple_of(3) {
        return Err(fail(
            "fencing_set_keys(id, algorithm, key [, id, algorithm, key ...]) takes keys in threes, or NULL",
        ));
    }
    let mut keys = Vec::with_capacity(ctx.len() / 3);
    for k in 0..ctx.len() / 3 {
        let id = unsigned(ctx, 3 * k, "key id")?.ok_or_else(|| fail("fencing: key id is NULL"))?;
        let id = u32::try_from(id).map_err(|_| fail(format!("fencing: key id {id} is above 4294967295")))?;
        let algorithm = text(ctx, 3 * k + 1, "algorithm")?.ok_or_else(|| fail("fencing: algorithm is NULL"))?;
        let algorithm = key_text::algorithm(&algorithm).map_err(|e| fail(format!("fencing: {e}")))?;
        let material = bytes(ctx, 3 * k + 2, "key")?.ok_or_else(|| fail("fencing: key is NULL"))?;
        keys.push(VerifierKey { id, algorithm, material });
    }
    let n = keys.len() as i64;
    let verifier = Verifier::new(keys).map_err(|e| fail(format!("fencing: {e}")))?;
    s.lock().verifier = Some(Arc::new(verifier));
    Ok(n)
}

/// `fencing_present_proof(proof)`: the proof (a blob, or its hex as text) of
/// the token this connection's writes to protected tables present, checked
/// while the connection has keys; `NULL` clears it. Answers the proof's bytes.
pub fn present_proof(ctx: &Context<'_>, s: &Session) -> Result<i64> {
    let proof = bytes(ctx, 0, "proof")?;
    if let Some(p) = proof.as_ref().filter(|p| p.len() > MAX_PROOF) {
        return Err(fail(format!("fencing: proof is {} bytes, more than {MAX_PROOF} (proof_too_long)", p.len())));
    }
    let n = proof.as_ref().map_or(0, Vec::len) as i64;
    s.lock().proof = proof;
    Ok(n)
}

/// `fencing_admit_signed(..)`: the decision as JSON.
pub fn admit_signed(ctx: &Context<'_>, s: &Session) -> Result<String> {
    if !(7..=8).contains(&ctx.len()) {
        return Err(fail(
            "fencing_admit_signed(current_lock, current_high_water, current_sequence, lock, token, sequence, proof [, policy]) takes 7 or 8 arguments",
        ));
    }
    let (current, lock, token) = fence_lock_token(ctx)?;
    let sequence = unsigned(ctx, 5, "sequence")?;
    let proof = bytes(ctx, 6, "proof")?.unwrap_or_default();
    if proof.len() > MAX_PROOF {
        return Err(fail(format!("fencing: proof is {} bytes, more than {MAX_PROOF} (proof_too_long)", proof.len())));
    }
    let policy = policy_arg(ctx, 7)?;
    let (decider, verifier) = {
        let state = s.lock();
        (state.plugin.clone(), state.verifier.clone())
    };
    let verifier =
        verifier.ok_or_else(|| fail("fencing: no verifier keys on this connection: call fencing_set_keys first"))?;
    let decider =
        crate::guard::or_embedded(decider).map_err(|why| fail(format!("fencing: guard_unavailable: {why}")))?;
    let presented = Sequencer { lock, token, sequence };
    let decision = decider
        .decide_signed(Some(&verifier), current.as_ref(), &presented, &proof, policy)
        .map_err(|why| fail(format!("fencing: the guard could not decide ({why})")))?;
    Ok(match decision {
        Ok(a) => decision_json(&Ok(a)),
        Err(SignedRejection::Fence(r)) => decision_json(&Err(r)),
        Err(SignedRejection::Proof(ProofRejection::UnknownKey { key_id })) => {
            format!(r#"{{"admitted":false,"reason":"proof_unknown_key","key_id":{key_id}}}"#)
        }
        Err(SignedRejection::Proof(r)) => format!(r#"{{"admitted":false,"reason":"{}"}}"#, r.reason()),
    })
}

/// Argument `i` as bytes: a blob as it is, text as hex (a proof's by
/// `accept::proof`, bounded); `None` for NULL.
fn bytes(ctx: &Context<'_>, i: usize, what: &str) -> Result<Option<Vec<u8>>> {
    match ctx.get_raw(i) {
        ValueRef::Null => Ok(None),
        ValueRef::Blob(b) => Ok(Some(b.to_vec())),
        ValueRef::Text(t) if what == "proof" => {
            accept::proof(t).map(Some).map_err(|e| fail(format!("fencing: {what} as text {e}")))
        }
        ValueRef::Text(t) => accept::unhex(t)
            .map(Some)
            .ok_or_else(|| fail(format!("fencing: {what} as text must be hex digits, two per byte"))),
        other => Err(fail(format!("fencing: {what} must be a blob or hex text, got {}", other.data_type()))),
    }
}
