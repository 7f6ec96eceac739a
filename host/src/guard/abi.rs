//! The canonical-ABI view of `fencing:guard/check@0.1.0`, and the one place
//! where its types convert to and from the rule types of `fencing-guest`.
//!
//! Arguments borrow the host's data (`&str`, slices) so a call copies each
//! lock name once, straight into guest memory, and allocates nothing on the
//! host side. Field and case names must match `wit/guard.wit` exactly; the
//! signatures are type-checked against the component when a worker is built.

use super::{
    Admission, BatchOutcome, BatchWrite, Fence, FenceState, Policy, Rejection, Sequencer, StreamOutcome, Verdict,
};
use wasmtime::component::{ComponentType, Lift, Lower};

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
pub struct FenceArg<'a> {
    lock: &'a str,
    #[component(name = "high-water")]
    high_water: u64,
    sequence: Option<u64>,
}

#[derive(ComponentType, Lower, Clone, Copy)]
#[component(record)]
pub struct SequencerArg<'a> {
    lock: &'a str,
    token: u64,
    sequence: Option<u64>,
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
    high_water: u64,
    sequence: Option<u64>,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct BatchOutcomeRet {
    verdicts: Vec<Result<AdmissionRet, RejectionRet>>,
    fence: Option<FenceStateRet>,
}

#[derive(ComponentType, Lift, Clone, Copy)]
#[component(enum)]
#[repr(u8)]
pub enum VerdictRet {
    #[component(name = "admitted")]
    Admitted,
    #[component(name = "invalid-token")]
    InvalidToken,
    #[component(name = "stale-token")]
    StaleToken,
    #[component(name = "token-reused")]
    TokenReused,
}

#[derive(ComponentType, Lift)]
#[component(record)]
pub struct StreamOutcomeRet {
    verdicts: Vec<VerdictRet>,
    #[component(name = "high-water")]
    high_water: u64,
}

/// `admit` parameters and results.
pub type AdmitParams<'a> = (Option<FenceArg<'a>>, SequencerArg<'a>, PolicyArg);
pub type AdmitResults = (Result<AdmissionRet, RejectionRet>,);
/// `admit-batch` parameters and results.
pub type BatchParams<'a> = (Option<FenceArg<'a>>, &'a str, &'a [BatchWriteArg], PolicyArg);
pub type BatchResults = (BatchOutcomeRet,);
/// `admit-stream` parameters and results.
pub type StreamParams<'a> = (u64, &'a [u64], PolicyArg);
pub type StreamResults = (StreamOutcomeRet,);

impl From<Policy> for PolicyArg {
    fn from(p: Policy) -> Self {
        match p {
            Policy::NonDecreasing => PolicyArg::NonDecreasing,
            Policy::StrictlyIncreasing => PolicyArg::StrictlyIncreasing,
        }
    }
}

impl<'a> From<&'a Fence> for FenceArg<'a> {
    fn from(f: &'a Fence) -> Self {
        FenceArg { lock: &f.lock, high_water: f.high_water, sequence: f.sequence }
    }
}

impl<'a> From<&'a Sequencer> for SequencerArg<'a> {
    fn from(s: &'a Sequencer) -> Self {
        SequencerArg { lock: &s.lock, token: s.token, sequence: s.sequence }
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

/// Converts one lifted verdict.
pub fn decision(r: Result<AdmissionRet, RejectionRet>) -> Result<Admission, Rejection> {
    r.map(Into::into).map_err(Into::into)
}

impl From<BatchOutcomeRet> for BatchOutcome {
    fn from(b: BatchOutcomeRet) -> Self {
        BatchOutcome {
            verdicts: b.verdicts.into_iter().map(decision).collect(),
            fence: b.fence.map(|f| FenceState { high_water: f.high_water, sequence: f.sequence }),
        }
    }
}

impl From<VerdictRet> for Verdict {
    fn from(v: VerdictRet) -> Self {
        match v {
            VerdictRet::Admitted => Verdict::Admitted,
            VerdictRet::InvalidToken => Verdict::InvalidToken,
            VerdictRet::StaleToken => Verdict::StaleToken,
            VerdictRet::TokenReused => Verdict::TokenReused,
        }
    }
}

impl From<StreamOutcomeRet> for StreamOutcome {
    fn from(s: StreamOutcomeRet) -> Self {
        StreamOutcome { verdicts: s.verdicts.into_iter().map(Into::into).collect(), high_water: s.high_water }
    }
}
