//! The canonical-ABI view of `fencing:guard/check@0.3.0`, and the one place
//! where its types convert to and from the rule types of `fencing-rules`:
//! the component path lifts into these types with wasmtime's derives, the
//! direct path reads the same types from guest memory ([`fence_state_at`]);
//! both reach the rule types through the same `From`s. The direct path's
//! single decisions take `admit-code`, whose verdict code
//! `fencing_rules::rules::expand` turns into the decision.
//!
//! Lock names cross as `lock-name` handles (interned per worker by
//! `base.rs`), so a call copies no string into the component. Batch and
//! stream verdicts come back as `list<u8>` codes, which lift as one copy; the
//! evidence is rebuilt from the inputs by `fencing_rules::rules::expand_batch`.
//! Field and case names must match `wit/guard.wit` exactly; the signatures
//! are type-checked against the component when a worker is built.

use super::base::{Result, contract};
use crate::proof::{Algorithm, KeyError, ProofRejection, SignedRejection, VerifierKey};
use crate::{Admission, BatchWrite, Decision, FenceState, Policy, Rejection};
use wasmtime::component::{ComponentType, Lift, Lower, ResourceAny};

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
pub enum PolicyArg {
    #[component(name = "non-decreasing")]
    NonDecreasing,
    #[component(name = "strictly-increasing")]
    StrictlyIncreasing,
}

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
pub struct FenceArg {
    pub lock: ResourceAny,
    #[component(name = "high-water")]
    pub high_water: u64,
    pub sequence: Option<u64>,
}

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
pub struct SequencerArg {
    pub lock: ResourceAny,
    pub token: u64,
    pub sequence: Option<u64>,
}

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
pub struct BatchWriteArg {
    token: u64,
    sequence: Option<u64>,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(record)]
pub struct AdmissionRet {
    #[component(name = "high-water")]
    high_water: u64,
    sequence: Option<u64>,
    #[component(name = "new-term")]
    new_term: bool,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(record)]
pub struct TokenConflictRet {
    presented: u64,
    #[component(name = "high-water")]
    high_water: u64,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(record)]
pub struct SequenceConflictRet {
    token: u64,
    presented: Option<u64>,
    last: u64,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(variant)]
pub enum RejectionRet {
    #[component(name = "invalid-token")]
    InvalidToken,
    #[component(name = "wrong-lock")]
    WrongLock,
    #[component(name = "stale-token")]
    StaleToken(TokenConflictRet),
    #[component(name = "token-reused")]
    TokenReused(TokenConflictRet),
    #[component(name = "sequence-regressed")]
    SequenceRegressed(SequenceConflictRet),
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(record)]
pub struct FenceStateRet {
    #[component(name = "high-water")]
    pub high_water: u64,
    pub sequence: Option<u64>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct BatchOutcomeRet {
    pub verdicts: Vec<u8>,
    pub fence: Option<FenceStateRet>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct StreamOutcomeRet {
    pub verdicts: Vec<u8>,
    #[component(name = "high-water")]
    pub high_water: u64,
}

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
pub enum KeyAlgorithmArg {
    #[component(name = "ed25519")]
    Ed25519,
    #[component(name = "hmac-sha256")]
    HmacSha256,
}

#[derive(ComponentType, Lower, Clone)]
#[component(record)]
pub struct VerifierKeyArg {
    pub id: u32,
    pub algorithm: KeyAlgorithmArg,
    pub material: Vec<u8>,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(variant)]
pub enum KeyErrorRet {
    #[component(name = "no-keys")]
    NoKeys,
    #[component(name = "too-many")]
    TooMany,
    #[component(name = "duplicate-id")]
    DuplicateId(u32),
    #[component(name = "bad-key")]
    BadKey(u32),
}

/// `verdict-code`, lifted: case N is code N.
#[allow(dead_code, reason = "lifted from the component, never built by the host")]
#[derive(ComponentType, Lift, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
pub enum VerdictCodeRet {
    #[component(name = "admitted")]
    Admitted,
    #[component(name = "admitted-new-term")]
    AdmittedNewTerm,
    #[component(name = "invalid-token")]
    InvalidToken,
    #[component(name = "wrong-lock")]
    WrongLock,
    #[component(name = "stale-token")]
    StaleToken,
    #[component(name = "token-reused")]
    TokenReused,
    #[component(name = "sequence-regressed")]
    SequenceRegressed,
    #[component(name = "proof-no-keys")]
    ProofNoKeys,
    #[component(name = "proof-missing")]
    ProofMissing,
    #[component(name = "proof-malformed")]
    ProofMalformed,
    #[component(name = "proof-unknown-key")]
    ProofUnknownKey,
    #[component(name = "proof-bad")]
    ProofBad,
}

/// `[constructor]lock-name` parameters and results.
pub type LockParams<'a> = (&'a str,);
pub type LockResults = (ResourceAny,);
/// `admit` parameters and results.
pub type AdmitParams = (Option<FenceArg>, SequencerArg, PolicyArg);
pub type AdmitResults = (std::result::Result<AdmissionRet, RejectionRet>,);
/// `admit-batch` parameters and results.
pub type BatchParams<'a> = (Option<FenceArg>, ResourceAny, &'a [BatchWriteArg], PolicyArg);
pub type BatchResults = (BatchOutcomeRet,);
/// `admit-stream` parameters and results.
pub type StreamParams<'a> = (u64, &'a [u64], PolicyArg);
pub type StreamResults = (StreamOutcomeRet,);

/// `set-keys` parameters and results.
pub type SetKeysParams<'a> = (&'a [VerifierKeyArg],);
pub type SetKeysResults = (std::result::Result<(), KeyErrorRet>,);
/// `admit-signed` parameters and results.
pub type SignedParams<'a> = (Option<FenceArg>, SequencerArg, &'a [u8], PolicyArg);
pub type SignedResults = (VerdictCodeRet,);

impl From<Algorithm> for KeyAlgorithmArg {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::Ed25519 => KeyAlgorithmArg::Ed25519,
            Algorithm::HmacSha256 => KeyAlgorithmArg::HmacSha256,
        }
    }
}

impl From<&VerifierKey> for VerifierKeyArg {
    fn from(k: &VerifierKey) -> Self {
        VerifierKeyArg { id: k.id, algorithm: k.algorithm.into(), material: k.material.clone() }
    }
}

impl From<KeyErrorRet> for KeyError {
    fn from(e: KeyErrorRet) -> Self {
        match e {
            KeyErrorRet::NoKeys => KeyError::NoKeys,
            KeyErrorRet::TooMany => KeyError::TooMany,
            KeyErrorRet::DuplicateId(id) => KeyError::DuplicateId(id),
            KeyErrorRet::BadKey(id) => KeyError::BadKey(id),
        }
    }
}

/// The decision a signed write's verdict code stands for, its evidence
/// rebuilt from the inputs; `None` for a code impossible for them.
pub fn signed_decision(
    current: Option<FenceState>,
    write: BatchWrite,
    proof: &[u8],
    c: u8,
) -> Option<crate::SignedDecision> {
    if let Some(r) = ProofRejection::from_code(c, proof) {
        return Some(Err(SignedRejection::Proof(r)));
    }
    fencing_rules::rules::expand(current, write, c).map(|d| d.map_err(SignedRejection::Fence))
}

impl From<Policy> for PolicyArg {
    fn from(p: Policy) -> Self {
        match p {
            Policy::NonDecreasing => PolicyArg::NonDecreasing,
            Policy::StrictlyIncreasing => PolicyArg::StrictlyIncreasing,
        }
    }
}

impl From<&BatchWrite> for BatchWriteArg {
    fn from(w: &BatchWrite) -> Self {
        BatchWriteArg { token: w.token, sequence: w.sequence }
    }
}

impl From<AdmissionRet> for Admission {
    fn from(a: AdmissionRet) -> Self {
        Admission { high_water: a.high_water, sequence: a.sequence, new_term: a.new_term }
    }
}

impl From<RejectionRet> for Rejection {
    fn from(r: RejectionRet) -> Self {
        match r {
            RejectionRet::InvalidToken => Rejection::InvalidToken,
            RejectionRet::WrongLock => Rejection::WrongLock,
            RejectionRet::StaleToken(c) => Rejection::StaleToken { presented: c.presented, high_water: c.high_water },
            RejectionRet::TokenReused(c) => Rejection::TokenReused { presented: c.presented, high_water: c.high_water },
            RejectionRet::SequenceRegressed(c) => {
                Rejection::SequenceRegressed { token: c.token, presented: c.presented, last: c.last }
            }
        }
    }
}

impl From<FenceStateRet> for FenceState {
    fn from(f: FenceStateRet) -> Self {
        FenceState { high_water: f.high_water, sequence: f.sequence }
    }
}

/// Converts one lifted verdict.
pub fn decision(r: std::result::Result<AdmissionRet, RejectionRet>) -> Decision {
    r.map(Into::into).map_err(Into::into)
}

/// Lifts an `option<fence-state>` laid out at `at` (discriminant byte, record 8 bytes later).
pub fn fence_state_at(b: &[u8], at: usize) -> Result<Option<FenceState>> {
    match b[at] {
        0 => Ok(None),
        1 => Ok(Some(FenceStateRet { high_water: u64_at(b, at + 8), sequence: option_at(b, at + 16)? }.into())),
        d => Err(contract(format_args!("option discriminant {d}"))),
    }
}

/// The little-endian `u64` at `at`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// An `option<u64>` laid out at `at` (discriminant byte, value 8 bytes later).
pub fn option_at(b: &[u8], at: usize) -> Result<Option<u64>> {
    match b[at] {
        0 => Ok(None),
        1 => Ok(Some(u64_at(b, at + 8))),
        d => Err(contract(format_args!("option discriminant {d}"))),
    }
}
