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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Policy {
    /// A token equal to the high-water mark is admitted (one holder, many writes).
    #[default]
    NonDecreasing,
    /// Each token admits one write; an equal token is rejected as reused.
    StrictlyIncreasing,
}

impl Policy {
    /// Every policy, in declaration order.
    pub const ALL: [Policy; 2] = [Policy::NonDecreasing, Policy::StrictlyIncreasing];

    /// The policy's name in the WIT contract and on command lines (`non-decreasing`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::NonDecreasing => "non-decreasing",
            Policy::StrictlyIncreasing => "strictly-increasing",
        }
    }
}

impl core::str::FromStr for Policy {
    type Err = UnknownPolicy;

    /// Parses a [`Policy::name`].
    fn from_str(s: &str) -> Result<Policy, UnknownPolicy> {
        Policy::ALL.into_iter().find(|p| p.name() == s).ok_or(UnknownPolicy)
    }
}

/// A policy name that is not one of [`Policy::ALL`]'s names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownPolicy;

impl core::fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("unknown policy: expected non-decreasing or strictly-increasing")
    }
}

/// What a storage engine keeps beside a resource.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct Sequencer {
    /// The lock whose token this is.
    pub lock: String,
    /// The fencing token.
    pub token: u64,
    /// The per-write counter within the token, if any.
    pub sequence: Option<u64>,
}

impl Fence {
    /// The fence's numbers without its lock: what the rules decide against.
    #[inline]
    pub fn state(&self) -> FenceState {
        FenceState { high_water: self.high_water, sequence: self.sequence }
    }
}

impl Sequencer {
    /// The presented numbers without the lock.
    #[inline]
    pub fn write(&self) -> BatchWrite {
        BatchWrite { token: self.token, sequence: self.sequence }
    }
}

/// An admitted write: the fence to persist is `{presented lock, high_water, sequence}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields))]
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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
pub struct BatchWrite {
    /// The presented token.
    pub token: u64,
    /// The presented sequence, if any.
    pub sequence: Option<u64>,
}

/// The numeric part of a fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
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

/// A compact verdict of the token-stream fast path. Each discriminant is the
/// verdict code ([`code`]) it stands for, so codes convert without a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Verdict {
    /// Admitted; the high-water mark is now this token.
    Admitted = code::ADMITTED,
    /// The token is zero.
    InvalidToken = code::INVALID_TOKEN,
    /// Below the high-water mark.
    StaleToken = code::STALE_TOKEN,
    /// Strict policy: equal to the high-water mark.
    TokenReused = code::TOKEN_REUSED,
}

/// The outcome of [`admit_stream`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(deny_unknown_fields))]
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
    let state = current.map(Fence::state);
    let same_lock = || current.is_some_and(|f| f.lock == presented.lock);
    decide(state, same_lock, presented.token, presented.sequence, policy)
}

/// [`admit`] with the fence split into its numeric part and a lock
/// comparison, for callers that hold lock names in another form (the
/// component holds interned names). `same_lock` is asked only when there is a
/// fence, and must say whether its lock equals the presented one.
#[inline]
pub fn decide(
    current: Option<FenceState>,
    same_lock: impl FnOnce() -> bool,
    token: u64,
    sequence: Option<u64>,
    policy: Policy,
) -> Result<Admission, Rejection> {
    let c = decide_code(current, same_lock, token, sequence, policy);
    expand(current, BatchWrite { token, sequence }, c).expect("a rule code is possible for its own inputs")
}

/// [`decide`] as a verdict code ([`code`]): the component's `admit-code`.
/// [`expand`] turns the code back into the decision with its evidence.
#[inline]
pub fn decide_code(
    current: Option<FenceState>,
    same_lock: impl FnOnce() -> bool,
    token: u64,
    sequence: Option<u64>,
    policy: Policy,
) -> u8 {
    if token == 0 {
        return code::INVALID_TOKEN;
    }
    let Some(fence) = current else {
        return code::ADMITTED_NEW_TERM;
    };
    if !same_lock() {
        return code::WRONG_LOCK;
    }
    rule_code(fence.high_water, fence.sequence, token, sequence, policy == Policy::StrictlyIncreasing)
}

/// The decision, with its evidence, that verdict code `c` stands for when
/// `write` was decided against `current` (the inverse of [`decide_code`]).
/// `None` when the code is unknown or impossible for these numbers, so a
/// host can refuse a plugin's garbage instead of guessing. (Whether the locks
/// matched is not among the numbers: `wrong-lock` is possible for any valid
/// token against a fence.)
#[inline]
pub fn expand(current: Option<FenceState>, write: BatchWrite, c: u8) -> Option<Result<Admission, Rejection>> {
    let t = write.token;
    let possible = match (c, current) {
        (code::INVALID_TOKEN, _) => t == 0,
        _ if t == 0 => false,
        (code::ADMITTED_NEW_TERM, None) => true,
        (_, None) => false,
        (code::ADMITTED_NEW_TERM, Some(f)) => t > f.high_water,
        (code::ADMITTED | code::TOKEN_REUSED, Some(f)) => t == f.high_water,
        (code::WRONG_LOCK, Some(_)) => true,
        (code::STALE_TOKEN, Some(f)) => t < f.high_water,
        (code::SEQUENCE_REGRESSED, Some(f)) => t == f.high_water && f.sequence.is_some(),
        _ => false,
    };
    if !possible {
        return None;
    }
    decision_of(c, current, write)
}

/// The verdict code of a decision: the inverse of [`expand`] for the inputs
/// the decision was made on.
pub fn code_of(decision: &Result<Admission, Rejection>) -> u8 {
    match decision {
        Ok(a) if a.new_term => code::ADMITTED_NEW_TERM,
        Ok(_) => code::ADMITTED,
        Err(Rejection::InvalidToken) => code::INVALID_TOKEN,
        Err(Rejection::WrongLock) => code::WRONG_LOCK,
        Err(Rejection::StaleToken { .. }) => code::STALE_TOKEN,
        Err(Rejection::TokenReused { .. }) => code::TOKEN_REUSED,
        Err(Rejection::SequenceRegressed { .. }) => code::SEQUENCE_REGRESSED,
    }
}

/// The numeric rule, written once: the verdict code of `token` (with
/// `sequence`) against a fence at `high_water` whose last admitted sequence is
/// `last`, once the lock is known to match. Every form (single, batch, stream)
/// decides with it or, for the stream, with its sequence-less special case.
#[inline]
fn rule_code(high_water: u64, last: Option<u64>, token: u64, sequence: Option<u64>, strict: bool) -> u8 {
    if token == 0 {
        code::INVALID_TOKEN
    } else if token > high_water {
        code::ADMITTED_NEW_TERM
    } else if token < high_water {
        code::STALE_TOKEN
    } else if strict {
        code::TOKEN_REUSED
    } else if sequence_regressed(last, sequence) {
        code::SEQUENCE_REGRESSED
    } else {
        code::ADMITTED
    }
}

/// Within one token: whether `presented` fails to advance past `last`. A
/// write without a sequence cannot follow one that had a sequence.
#[inline]
fn sequence_regressed(last: Option<u64>, presented: Option<u64>) -> bool {
    match (last, presented) {
        (Some(last), Some(next)) => next <= last,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The full decision a verdict code stands for, with its evidence: an
/// admitted write's fence is its own token and sequence; a rejected one was
/// compared with `fence`, the fence it was decided against. `None` when the
/// code is unknown or impossible against `fence`.
#[inline]
fn decision_of(c: u8, fence: Option<FenceState>, write: BatchWrite) -> Option<Result<Admission, Rejection>> {
    if c <= code::ADMITTED_NEW_TERM { Some(Ok(admission_of(c, write))) } else { rejection_of(c, fence, write).map(Err) }
}

/// The admission an admitted code (`ADMITTED` or `ADMITTED_NEW_TERM`) stands for.
#[inline]
fn admission_of(c: u8, write: BatchWrite) -> Admission {
    Admission { high_water: write.token, sequence: write.sequence, new_term: c == code::ADMITTED_NEW_TERM }
}

/// The rejection a refusing code stands for, with its evidence from `fence`.
#[inline]
fn rejection_of(c: u8, fence: Option<FenceState>, write: BatchWrite) -> Option<Rejection> {
    let BatchWrite { token, sequence } = write;
    Some(match c {
        code::INVALID_TOKEN => Rejection::InvalidToken,
        code::WRONG_LOCK => Rejection::WrongLock,
        code::STALE_TOKEN => Rejection::StaleToken { presented: token, high_water: fence?.high_water },
        code::TOKEN_REUSED => Rejection::TokenReused { presented: token, high_water: fence?.high_water },
        code::SEQUENCE_REGRESSED => Rejection::SequenceRegressed { token, presented: sequence, last: fence?.sequence? },
        _ => return None,
    })
}

/// The verdict bytes of the batch and stream forms (`verdict-code` in the WIT).
pub mod code {
    /// Admitted under the same token as the high-water mark.
    pub const ADMITTED: u8 = 0;
    /// Admitted; the write began a new token (term).
    pub const ADMITTED_NEW_TERM: u8 = 1;
    /// [`super::Rejection::InvalidToken`].
    pub const INVALID_TOKEN: u8 = 2;
    /// [`super::Rejection::WrongLock`].
    pub const WRONG_LOCK: u8 = 3;
    /// [`super::Rejection::StaleToken`].
    pub const STALE_TOKEN: u8 = 4;
    /// [`super::Rejection::TokenReused`].
    pub const TOKEN_REUSED: u8 = 5;
    /// [`super::Rejection::SequenceRegressed`].
    pub const SEQUENCE_REGRESSED: u8 = 6;
    /// [`crate::proof::ProofRejection::NoKeys`] (signed writes only).
    pub const PROOF_NO_KEYS: u8 = 7;
    /// [`crate::proof::ProofRejection::Missing`].
    pub const PROOF_MISSING: u8 = 8;
    /// [`crate::proof::ProofRejection::Malformed`].
    pub const PROOF_MALFORMED: u8 = 9;
    /// [`crate::proof::ProofRejection::UnknownKey`].
    pub const PROOF_UNKNOWN_KEY: u8 = 10;
    /// [`crate::proof::ProofRejection::BadProof`].
    pub const PROOF_BAD: u8 = 11;
}

/// Decides `writes` to one resource, in order, appending one verdict code per
/// write to `codes`, and returns the fence left after the batch.
///
/// `current` is the numeric part of the stored fence (`None`: no fence) and
/// `wrong_lock` whether the stored fence is bound to another lock than the
/// batch's. Each write is decided by the same rule as [`admit`], against the
/// fence left by the writes admitted before it. `writes` is any exact-size
/// sequence, so a caller holding writes in another form need not copy them.
pub fn admit_batch_codes(
    current: Option<FenceState>,
    wrong_lock: bool,
    writes: impl ExactSizeIterator<Item = BatchWrite>,
    policy: Policy,
    codes: &mut Vec<u8>,
) -> Option<FenceState> {
    codes.reserve(writes.len());
    if wrong_lock {
        codes.extend(writes.map(|w| if w.token == 0 { code::INVALID_TOKEN } else { code::WRONG_LOCK }));
        return current;
    }
    let strict = policy == Policy::StrictlyIncreasing;
    // No fence decides like a fence at high-water 0: every non-zero token is
    // above it and starts a term, whatever the stored sequence.
    let mut fenced = current.is_some();
    let (mut high_water, mut last) = current.map_or((0, None), |f| (f.high_water, f.sequence));
    codes.extend(writes.map(|w| {
        let c = rule_code(high_water, last, w.token, w.sequence, strict);
        if c <= code::ADMITTED_NEW_TERM {
            (high_water, last, fenced) = (w.token, w.sequence, true);
        }
        c
    }));
    fenced.then_some(FenceState { high_water, sequence: last })
}

/// Turns verdict codes back into full decisions with their evidence, which
/// follows from the inputs alone: an admitted write's fence is its own token
/// and sequence; a rejected write was compared with the fence left by the last
/// admitted write before it (or `current`). Returns `None` when a code is
/// unknown, when `codes` and `writes` differ in length, or when a code is
/// impossible for its write (so a host can refuse a plugin's garbage).
pub fn expand_batch(
    current: Option<FenceState>,
    writes: &[BatchWrite],
    codes: &[u8],
) -> Option<Vec<Result<Admission, Rejection>>> {
    if codes.len() != writes.len() {
        return None;
    }
    // Two passes keep the common case a plain exact-size map: every write is
    // first expanded as an admission (no state carried), then, only if the
    // batch refused something, one more pass tracks the fence each write was
    // decided against and puts the refusals' evidence in place.
    let mut out: Vec<_> = writes.iter().zip(codes).map(|(&w, &c)| Ok(admission_of(c, w))).collect();
    if codes.iter().any(|&c| c > code::ADMITTED_NEW_TERM) {
        let mut state = current;
        for ((decision, &write), &c) in out.iter_mut().zip(writes).zip(codes) {
            if c <= code::ADMITTED_NEW_TERM {
                state = Some(FenceState { high_water: write.token, sequence: write.sequence });
            } else {
                *decision = Err(rejection_of(c, state, write)?);
            }
        }
    }
    Some(out)
}

/// Decides `writes` to one resource under `lock`, in order, each against the
/// fence left by the writes admitted before it: the same verdicts as calling
/// [`admit`] once per write and persisting each admission.
pub fn admit_batch(current: Option<&Fence>, lock: &str, writes: &[BatchWrite], policy: Policy) -> BatchOutcome {
    let wrong_lock = current.is_some_and(|f| f.lock != lock);
    let state = current.map(Fence::state);
    let mut codes = Vec::new();
    let fence = admit_batch_codes(state, wrong_lock, writes.iter().copied(), policy, &mut codes);
    let verdicts = expand_batch(state, writes, &codes).expect("codes made by admit_batch_codes expand");
    BatchOutcome { verdicts, fence }
}

/// The stream fast path in codes: appends one verdict code per token to
/// `codes` and returns the high-water mark after the stream. Same verdicts as
/// [`admit`] for sequence-less tokens on a resource whose lock matches and
/// whose fence holds no sequence (`high_water` 0: no fence).
pub fn admit_stream_codes(high_water: u64, tokens: &[u64], policy: Policy, codes: &mut Vec<u8>) -> u64 {
    let reused = if policy == Policy::StrictlyIncreasing { code::TOKEN_REUSED } else { code::ADMITTED };
    let start = codes.len();
    codes.resize(start + tokens.len(), 0);
    // The high-water mark before token i is the largest of `high_water` and
    // the tokens before i: an admitted token raises it to itself, and a
    // refused one is 0 or not above it. So the only value carried from one
    // token to the next is a running max (a compare and a select), and every
    // verdict is computed from it without branches.
    let mut hw = high_water;
    for (c, &t) in codes[start..].iter_mut().zip(tokens) {
        let above = if t > hw { code::ADMITTED_NEW_TERM } else { code::STALE_TOKEN };
        let at_or_above = if t == hw { reused } else { above };
        *c = if t == 0 { code::INVALID_TOKEN } else { at_or_above };
        hw = hw.max(t);
    }
    hw
}

impl Verdict {
    /// The verdicts of a stream's codes, or `None` if any code is not a
    /// stream verdict.
    pub fn from_codes(codes: &[u8]) -> Option<Vec<Verdict>> {
        // The check is a branch-free fold over all the bytes; the conversion
        // after it needs no error path.
        let unknown = codes.iter().fold(false, |bad, &c| bad | (c > code::TOKEN_REUSED) | (c == code::WRONG_LOCK));
        if unknown {
            return None;
        }
        Some(
            codes
                .iter()
                .map(|&c| match c {
                    code::INVALID_TOKEN => Verdict::InvalidToken,
                    code::STALE_TOKEN => Verdict::StaleToken,
                    code::TOKEN_REUSED => Verdict::TokenReused,
                    _ => Verdict::Admitted, // ADMITTED or ADMITTED_NEW_TERM, after the check above
                })
                .collect(),
        )
    }
}

/// The fast path for sequence-less tokens on one resource whose lock binding
/// the caller has checked. `high_water` is 0 for a resource with no fence.
pub fn admit_stream(high_water: u64, tokens: &[u64], policy: Policy) -> StreamOutcome {
    let mut codes = Vec::new();
    let high_water = admit_stream_codes(high_water, tokens, policy, &mut codes);
    let verdicts = Verdict::from_codes(&codes).expect("stream codes are stream verdicts");
    StreamOutcome { verdicts, high_water }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn stream_codes_map_to_verdicts_and_others_are_refused() {
        let codes =
            [code::ADMITTED, code::ADMITTED_NEW_TERM, code::INVALID_TOKEN, code::STALE_TOKEN, code::TOKEN_REUSED];
        let want =
            [Verdict::Admitted, Verdict::Admitted, Verdict::InvalidToken, Verdict::StaleToken, Verdict::TokenReused];
        assert_eq!(Verdict::from_codes(&codes).as_deref(), Some(&want[..]));
        assert_eq!(Verdict::from_codes(&[code::ADMITTED, code::WRONG_LOCK]), None);
        assert_eq!(Verdict::from_codes(&[code::SEQUENCE_REGRESSED]), None);
        assert_eq!(Verdict::from_codes(&[7]), None);
    }

    #[test]
    fn expanded_refusals_carry_the_fence_left_by_the_last_admitted_write() {
        let w = |token, sequence| BatchWrite { token, sequence };
        let writes = [w(5, None), w(3, None), w(0, None), w(5, Some(1)), w(5, Some(1)), w(4, None)];
        let current = Some(FenceState { high_water: 4, sequence: Some(9) });
        let mut codes = Vec::new();
        let fence = admit_batch_codes(current, false, writes.iter().copied(), Policy::NonDecreasing, &mut codes);
        assert_eq!(fence, Some(FenceState { high_water: 5, sequence: Some(1) }));
        let got = expand_batch(current, &writes, &codes).expect("codes of the rules expand");
        assert_eq!(
            got,
            [
                Ok(Admission { high_water: 5, sequence: None, new_term: true }),
                Err(Rejection::StaleToken { presented: 3, high_water: 5 }),
                Err(Rejection::InvalidToken),
                Ok(Admission { high_water: 5, sequence: Some(1), new_term: false }),
                Err(Rejection::SequenceRegressed { token: 5, presented: Some(1), last: 1 }),
                Err(Rejection::StaleToken { presented: 4, high_water: 5 }),
            ]
        );
        let all_admitted = [code::ADMITTED_NEW_TERM; 6];
        assert!(expand_batch(current, &writes, &all_admitted).unwrap().iter().all(Result::is_ok));
    }

    #[test]
    fn a_single_code_expands_to_the_decision_of_admit() {
        let fences = [
            None,
            Some(FenceState { high_water: 5, sequence: None }),
            Some(FenceState { high_water: 5, sequence: Some(3) }),
        ];
        for current in fences {
            for token in [0, 4, 5, 6] {
                for sequence in [None, Some(3), Some(4)] {
                    for policy in [Policy::NonDecreasing, Policy::StrictlyIncreasing] {
                        for same in [true, false] {
                            let c = decide_code(current, || same, token, sequence, policy);
                            let write = BatchWrite { token, sequence };
                            let want = decide(current, || same, token, sequence, policy);
                            assert_eq!(
                                expand(current, write, c),
                                Some(want.clone()),
                                "{current:?} {write:?} {policy:?}"
                            );
                            assert_eq!(code_of(&want), c, "{want:?}");
                            for other in (0..=7).filter(|&o| o != c) {
                                if let Some(d) = expand(current, write, other) {
                                    assert_ne!(
                                        Some(d),
                                        Some(want.clone()),
                                        "code {other} must not stand for code {c}'s decision"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
        let w = |token| BatchWrite { token, sequence: None };
        assert_eq!(expand(None, w(4), code::STALE_TOKEN), None, "nothing is stale against no fence");
        assert_eq!(expand(None, w(4), code::ADMITTED), None, "a first write begins a term");
        assert_eq!(expand(Some(FenceState { high_water: 5, sequence: None }), w(9), code::STALE_TOKEN), None);
        assert_eq!(expand(None, w(4), 7), None, "unknown code");
    }

    #[test]
    fn codes_impossible_for_their_writes_are_refused() {
        let w = BatchWrite { token: 7, sequence: None };
        let bare = Some(FenceState { high_water: 9, sequence: None });
        // Compared with no fence, nothing can be stale, reused or out of sequence.
        for c in [code::STALE_TOKEN, code::TOKEN_REUSED, code::SEQUENCE_REGRESSED] {
            assert_eq!(expand_batch(None, &[w, w], &[code::INVALID_TOKEN, c]), None, "code {c}");
        }
        // A fence without a sequence has no last sequence to regress from.
        assert_eq!(expand_batch(bare, &[w], &[code::SEQUENCE_REGRESSED]), None);
        assert_eq!(expand_batch(bare, &[w], &[7]), None, "unknown code");
        assert_eq!(expand_batch(bare, &[w], &[]), None, "one code per write");
        assert_eq!(expand_batch(bare, &[w], &[code::WRONG_LOCK]), Some(vec![Err(Rejection::WrongLock)]));
    }
}
