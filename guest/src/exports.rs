//! The bodies of the `fencing:guard` exports in terms of the rules, and the
//! one place WIT types convert to rule types.
//!
//! Compiled only for `target_family = "wasm"`. This file is the one copy: the
//! guest's `component.rs` includes it as a child module, and the deliberately
//! misbehaving test component (`tests/plugins/misbehaving`) includes it by
//! `#[path]`. The including module must have `rules` (the rules module) and
//! `wit` (the generated `fencing::guard::check` export interface) in scope.
//! How two lock names compare is the including component's choice, so these
//! functions take the comparison's result.

#![cfg(target_family = "wasm")]

use super::{rules, wit};
use alloc::vec::Vec;

impl From<wit::Policy> for rules::Policy {
    #[inline]
    fn from(p: wit::Policy) -> Self {
        match p {
            wit::Policy::NonDecreasing => rules::Policy::NonDecreasing,
            wit::Policy::StrictlyIncreasing => rules::Policy::StrictlyIncreasing,
        }
    }
}

impl From<rules::Admission> for wit::Admission {
    #[inline]
    fn from(a: rules::Admission) -> Self {
        wit::Admission { high_water: a.high_water, sequence: a.sequence, new_term: a.new_term }
    }
}

impl From<rules::Rejection> for wit::Rejection {
    #[inline]
    fn from(r: rules::Rejection) -> Self {
        use rules::Rejection as R;
        match r {
            R::InvalidToken => wit::Rejection::InvalidToken,
            R::WrongLock => wit::Rejection::WrongLock,
            R::StaleToken { presented, high_water } => {
                wit::Rejection::StaleToken(wit::TokenConflict { presented, high_water })
            }
            R::TokenReused { presented, high_water } => {
                wit::Rejection::TokenReused(wit::TokenConflict { presented, high_water })
            }
            R::SequenceRegressed { token, presented, last } => {
                wit::Rejection::SequenceRegressed(wit::SequenceConflict { token, presented, last })
            }
        }
    }
}

fn state(f: &wit::Fence<'_>) -> rules::FenceState {
    rules::FenceState { high_water: f.high_water, sequence: f.sequence }
}

/// `admit`; `same_lock` tells whether the fence names the presented lock.
#[inline]
pub fn admit(
    current: Option<&wit::Fence<'_>>,
    same_lock: impl FnOnce() -> bool,
    presented: &wit::Sequencer<'_>,
    policy: wit::Policy,
) -> Result<wit::Admission, wit::Rejection> {
    rules::decide(current.map(state), same_lock, presented.token, presented.sequence, policy.into())
        .map(Into::into)
        .map_err(Into::into)
}

/// `admit-batch`; `wrong_lock` is true when the fence names another lock.
#[inline]
pub fn admit_batch(
    current: Option<&wit::Fence<'_>>,
    wrong_lock: bool,
    writes: Vec<wit::BatchWrite>,
    policy: wit::Policy,
) -> wit::BatchOutcome {
    // `wit::BatchWrite` and `rules::BatchWrite` have the same fields: the rules read the lifted list as it is.
    let writes = writes.iter().map(|w| rules::BatchWrite { token: w.token, sequence: w.sequence });
    let mut verdicts = Vec::new();
    let fence = rules::admit_batch_codes(current.map(state), wrong_lock, writes, policy.into(), &mut verdicts);
    wit::BatchOutcome {
        verdicts,
        fence: fence.map(|f| wit::FenceState { high_water: f.high_water, sequence: f.sequence }),
    }
}

/// `admit-stream`.
#[inline]
pub fn admit_stream(high_water: u64, tokens: Vec<u64>, policy: wit::Policy) -> wit::StreamOutcome {
    let mut verdicts = Vec::new();
    let high_water = rules::admit_stream_codes(high_water, &tokens, policy.into(), &mut verdicts);
    wit::StreamOutcome { verdicts, high_water }
}
