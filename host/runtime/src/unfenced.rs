//! A guard that admits every write: storage without fencing.
//!
//! It exists only so that `fencing serve --no-fencing` can show what fencing
//! prevents (`fencing chaos --no-fencing` must find violations with it). It
//! never refuses: the stored high-water mark becomes whatever token arrived
//! last, which is exactly the unsafe behaviour of a storage that ignores tokens.

use super::{Admission, FenceState, Verdict};
use super::{
    BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, GuardKind, Policy, Sequencer, SignedDecision,
    StreamOutcome, Verifier,
};

/// Admits everything. Never use it to protect data.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnfencedGuard;

impl Guard for UnfencedGuard {
    fn kind(&self) -> GuardKind {
        GuardKind::Native
    }

    fn admit(
        &self,
        _current: Option<&Fence>,
        presented: &Sequencer,
        _policy: Policy,
    ) -> Result<Decision, GuardFailure> {
        Ok(Ok(Admission { high_water: presented.token, sequence: presented.sequence, new_term: true }))
    }

    fn admit_batch(
        &self,
        current: Option<&Fence>,
        _lock: &str,
        writes: &[BatchWrite],
        _policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure> {
        let verdicts = writes
            .iter()
            .map(|w| Ok(Admission { high_water: w.token, sequence: w.sequence, new_term: true }))
            .collect();
        let fence = writes
            .last()
            .map(|w| FenceState { high_water: w.token, sequence: w.sequence })
            .or(current.map(Fence::state));
        Ok(BatchOutcome { verdicts, fence })
    }

    /// Admits every write, proof or not.
    fn admit_signed(
        &self,
        _verifier: &Verifier,
        current: Option<&Fence>,
        presented: &Sequencer,
        _proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure> {
        Ok(self.admit(current, presented, policy)?.map_err(|_| unreachable!("the unfenced guard refuses nothing")))
    }

    fn admit_stream(&self, high_water: u64, tokens: &[u64], _policy: Policy) -> Result<StreamOutcome, GuardFailure> {
        Ok(StreamOutcome {
            verdicts: vec![Verdict::Admitted; tokens.len()],
            high_water: tokens.last().copied().unwrap_or(high_water),
        })
    }
}
