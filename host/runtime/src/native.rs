//! The native guard: the rules from `fencing-rules`, linked into the host.

use super::{
    BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, GuardKind, Policy, Sequencer, SignedDecision,
    StreamOutcome, Verifier,
};

/// Calls the rules directly. Never fails.
#[derive(Debug, Default, Clone, Copy)]
pub struct NativeGuard;

impl Guard for NativeGuard {
    fn kind(&self) -> GuardKind {
        GuardKind::Native
    }

    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure> {
        Ok(fencing_rules::admit(current, presented, policy))
    }

    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure> {
        Ok(fencing_rules::admit_batch(current, lock, writes, policy))
    }

    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure> {
        Ok(fencing_rules::admit_stream(high_water, tokens, policy))
    }

    fn admit_signed(
        &self,
        verifier: &Verifier,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure> {
        Ok(verifier
            .with_keyring(|keys| fencing_rules::proof::admit_signed(Some(keys), current, presented, proof, policy)))
    }
}
