//! The admission rules, written once.
//!
//! Invariants (see `docs/design.md`):
//! - a token of 0 is never admitted;
//! - a resource bound to lock L admits writes under L only;
//! - an admitted token is never below the stored high-water mark, so the
//!   high-water mark never goes backwards;
//! - under [`Policy::StrictlyIncreasing`] a token admits exactly one write;
//! - within one token, admitted sequences strictly increase, and once a token
//!   has admitted a sequenced write it admits no unsequenced one.
//!
//! The functions are pure: no clocks, no I/O, no randomness.

use alloc::string::String;
use alloc::vec::Vec;

/// How a presented token is compared with the high-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// A token equal to the high-water mark is admitted (one holder, many writes).
    #[default]
    NonDecreasing,
    /// Each token admits one write; an equal token is rejected as reused.
    StrictlyIncreasing,
}

/// What a storage engine keeps beside a resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The lock the resource is bound to.
    pub lock: String,
    /// The highest admitted token.
    pub high_water: u64,
    /// The last admitted sequence under `high_water`, if any.
    pub sequence: Option<u64>,
}

/// What a writer presents.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sequencer {
    /// The lock whose token this is.
    pub lock: String,
    /// The fencing token.
    pub token: u64,
    /// The per-write counter within the token, if any.
    pub sequence: Option<u64>,
}

/// An admitted write: the fence to persist is `{presented lock, high_water, sequence}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Admission {
    /// The new high-water mark.
    pub high_water: u64,
    /// The new last sequence.
    pub sequence: Option<u64>,
    /// True when the write began a new token (term).
    pub new_term: bool,
}

/// Why a write was refused. Every variant carries its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// The token is zero.
    InvalidToken,
    /// The resource is bound to another lock (the caller's fence names it).
    WrongLock,
    /// The token is below the high-water mark.
    StaleToken { presented: u64, high_water: u64 },
    /// Strict policy: the token equals the high-water mark.
    TokenReused { presented: u64, high_water: u64 },
    /// Same token, but the sequence is missing or does not advance.
    SequenceRegressed { token: u64, presented: Option<u64>, last: u64 },
}

impl Rejection {
    /// The stable snake_case name of the reason, as used in HTTP bodies and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Rejection::InvalidToken => "invalid_token",
            Rejection::WrongLock => "wrong_lock",
            Rejection::StaleToken { .. } => "stale_token",
            Rejection::TokenReused { .. } => "token_reused",
            Rejection::SequenceRegressed { .. } => "sequence_regressed",
        }
    }
}

/// One write of a batch on a single resource and lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BatchWrite {
    /// The presented token.
    pub token: u64,
    /// The presented sequence, if any.
    pub sequence: Option<u64>,
}

/// The numeric part of a fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FenceState {
    /// The high-water mark.
    pub high_water: u64,
    /// The last admitted sequence under it.
    pub sequence: Option<u64>,
}

/// The outcome of [`admit_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchOutcome {
    /// One verdict per write, in input order.
    pub verdicts: Vec<Result<Admission, Rejection>>,
    /// The fence after the batch; `None` if the resource has none.
    pub fence: Option<FenceState>,
}

/// A compact verdict of the token-stream fast path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Admitted; the high-water mark is now this token.
    Admitted,
    /// The token is zero.
    InvalidToken,
    /// Below the high-water mark.
    StaleToken,
    /// Strict policy: equal to the high-water mark.
    TokenReused,
}

/// The outcome of [`admit_stream`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOutcome {
    /// One verdict per token, in input order.
    pub verdicts: Vec<Verdict>,
    /// The high-water mark after the stream.
    pub high_water: u64,
}

/// Decides one write. `current` is `None` for a resource that never admitted a write.
///
/// Checks run in this order, and the first that fails decides: token is
/// non-zero; lock matches the binding; token is not below the high-water
/// mark; under the strict policy the token is above it; within an equal token
/// the sequence advances.
pub fn admit(current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Admission, Rejection> {
    if presented.token == 0 {
        return Err(Rejection::InvalidToken);
    }
    let Some(fence) = current else {
        return Ok(Admission { high_water: presented.token, sequence: presented.sequence, new_term: true });
    };
    if fence.lock != presented.lock {
        return Err(Rejection::WrongLock);
    }
    let state = FenceState { high_water: fence.high_water, sequence: fence.sequence };
    admit_token(state, presented.token, presented.sequence, policy)
}

/// The numeric rule shared by [`admit`] and [`admit_batch`], once the token is
/// known to be non-zero and the lock to match.
#[inline]
fn admit_token(fence: FenceState, token: u64, sequence: Option<u64>, policy: Policy) -> Result<Admission, Rejection> {
    let high_water = fence.high_water;
    if token > high_water {
        return Ok(Admission { high_water: token, sequence, new_term: true });
    }
    if token < high_water {
        return Err(Rejection::StaleToken { presented: token, high_water });
    }
    if policy == Policy::StrictlyIncreasing {
        return Err(Rejection::TokenReused { presented: token, high_water });
    }
    match (fence.sequence, sequence) {
        (Some(last), Some(next)) if next <= last => {
            Err(Rejection::SequenceRegressed { token, presented: Some(next), last })
        }
        (Some(last), None) => Err(Rejection::SequenceRegressed { token, presented: None, last }),
        _ => Ok(Admission { high_water: token, sequence, new_term: false }),
    }
}

/// Decides `writes` to one resource under `lock`, in order, each against the
/// fence left by the writes admitted before it: the same verdicts as calling
/// [`admit`] once per write and persisting each admission.
pub fn admit_batch(current: Option<&Fence>, lock: &str, writes: &[BatchWrite], policy: Policy) -> BatchOutcome {
    let mut verdicts = Vec::with_capacity(writes.len());
    let wrong_lock = current.is_some_and(|f| f.lock != lock);
    let mut state = current.map(|f| FenceState { high_water: f.high_water, sequence: f.sequence });
    for write in writes {
        let verdict = if write.token == 0 {
            Err(Rejection::InvalidToken)
        } else if wrong_lock {
            Err(Rejection::WrongLock)
        } else {
            let decided = match state {
                None => Ok(Admission { high_water: write.token, sequence: write.sequence, new_term: true }),
                Some(s) => admit_token(s, write.token, write.sequence, policy),
            };
            if let Ok(a) = &decided {
                state = Some(FenceState { high_water: a.high_water, sequence: a.sequence });
            }
            decided
        };
        verdicts.push(verdict);
    }
    BatchOutcome { verdicts, fence: state }
}

/// The fast path for sequence-less tokens on one resource whose lock binding
/// the caller has checked. `high_water` is 0 for a resource with no fence.
pub fn admit_stream(high_water: u64, tokens: &[u64], policy: Policy) -> StreamOutcome {
    let mut hw = high_water;
    let strict = policy == Policy::StrictlyIncreasing;
    let verdicts = tokens
        .iter()
        .map(|&t| {
            if t == 0 {
                Verdict::InvalidToken
            } else if t < hw {
                Verdict::StaleToken
            } else if t == hw && strict {
                Verdict::TokenReused
            } else {
                hw = t;
                Verdict::Admitted
            }
        })
        .collect();
    StreamOutcome { verdicts, high_water: hw }
}
