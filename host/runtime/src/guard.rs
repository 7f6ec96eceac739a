//! The [`Guard`] trait: one admission check, several implementations.
//!
//! [`NativeGuard`](crate::NativeGuard) calls the rules linked from
//! `fencing-rules`; [`WasmGuard`](crate::WasmGuard) runs the `fencing:guard`
//! component under wasmtime. Both answer with the rule types of
//! `fencing-rules`, so a caller can switch between them.
//!
//! Invariant: a [`GuardFailure`] means the guard could not decide. Callers
//! must refuse the write (fail closed) and change nothing.

use crate::Verifier;
use crate::proof::SignedRejection;
use crate::{BatchOutcome, BatchWrite, Fence, Policy, Sequencer, StreamOutcome};
use fencing_rules::{Admission, Rejection};

/// The rules' answer for one write: the admission (whose high-water mark and
/// sequence form the fence to persist) or the rejection with its evidence.
pub type Decision = Result<Admission, Rejection>;

/// The answer for one signed write: the admission, or why the proof or the
/// fence refused it.
pub type SignedDecision = Result<Admission, SignedRejection>;

/// Why the guard could not decide. Callers must refuse the write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardFailure {
    /// The call ran past its deadline.
    #[error("guard call exceeded its time limit")]
    Timeout,
    /// The instance asked for more memory than its limit.
    #[error("guard call exceeded its memory limit")]
    OutOfMemory,
    /// The component trapped, or answered outside the contract.
    #[error("guard trapped: {0}")]
    Trap(String),
    /// No instance could be created.
    #[error("guard unavailable: {0}")]
    Unavailable(String),
}

impl GuardFailure {
    /// Stable snake_case reason, for HTTP bodies, metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            GuardFailure::Timeout => "guard_timeout",
            GuardFailure::OutOfMemory => "guard_out_of_memory",
            GuardFailure::Trap(_) => "guard_trap",
            GuardFailure::Unavailable(_) => "guard_unavailable",
        }
    }
}

/// Which implementation decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "snake_case"))]
pub enum GuardKind {
    /// The rules linked into the host.
    Native,
    /// The `fencing:guard` component under wasmtime.
    Wasm,
}

impl GuardKind {
    /// Every kind, in declaration order.
    pub const ALL: [GuardKind; 2] = [GuardKind::Native, GuardKind::Wasm];

    /// The kind's name on command lines and in reports (`native`, `wasm`).
    pub fn name(self) -> &'static str {
        match self {
            GuardKind::Native => "native",
            GuardKind::Wasm => "wasm",
        }
    }
}

impl std::str::FromStr for GuardKind {
    type Err = String;

    /// Parses a [`GuardKind::name`].
    fn from_str(s: &str) -> Result<GuardKind, String> {
        GuardKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| format!("unknown guard `{s}`: native or wasm"))
    }
}

/// The admission check. Implementations are pure functions of their inputs
/// and safe to share between threads.
pub trait Guard: Send + Sync {
    /// Which implementation this is.
    fn kind(&self) -> GuardKind;

    /// Decides one write against the resource's fence (`None`: no fence yet).
    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure>;

    /// Decides writes to one resource under one lock, in order, each against
    /// the fence left by the writes admitted before it.
    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure>;

    /// Decides a stream of sequence-less tokens on one resource.
    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure>;

    /// Decides one signed write: its proof must show that the lock service
    /// granted the presented token for the presented lock, under `verifier`'s
    /// keys; then the write is decided exactly as [`Guard::admit`].
    fn admit_signed(
        &self,
        verifier: &Verifier,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure>;

    /// Decides one write as an engine configured with or without keys does:
    /// with a `verifier`, [`Guard::admit_signed`]; without one, [`Guard::admit`]
    /// (`proof` unread), its refusals as [`SignedRejection::Fence`].
    fn admit_with_keys(
        &self,
        verifier: Option<&Verifier>,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, GuardFailure> {
        match verifier {
            Some(verifier) => self.admit_signed(verifier, current, presented, proof, policy),
            None => self.admit(current, presented, policy).map(|d| d.map_err(SignedRejection::Fence)),
        }
    }
}
