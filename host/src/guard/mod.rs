//! The `Guard`: one admission check, two implementations.
//!
//! [`NativeGuard`] calls the rules linked from `fencing-guest`; [`WasmGuard`]
//! runs the `fencing:guard` component under wasmtime. Both answer with the
//! rule types of `fencing-guest`, so every caller can switch between them.
//!
//! A Wasm call that traps, runs out of time or memory never takes the host
//! down: it returns a [`GuardFailure`], which callers treat as a refusal
//! (fail closed), and the instance that failed is discarded.

mod abi;
mod component;
mod direct;
mod native;
pub mod plugin;
mod unfenced;
mod wasm;

pub use fencing_guest::rules::{
    Admission, BatchOutcome, BatchWrite, Fence, FenceState, Policy, Rejection, Sequencer, StreamOutcome, Verdict,
};
pub use native::NativeGuard;
pub use plugin::{Plugin, PluginError, PluginInfo};
pub use unfenced::UnfencedGuard;
pub use wasm::{CallPath, WasmGuard, WasmLimits};

/// The rules' answer for one write.
pub type Decision = Result<Admission, Rejection>;

/// Why the guard could not decide. Callers must refuse the write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardFailure {
    /// The call ran past its deadline.
    #[error("guard call exceeded its time limit")]
    Timeout,
    /// The instance asked for more memory than its limit.
    #[error("guard call exceeded its memory limit")]
    OutOfMemory,
    /// The component trapped.
    #[error("guard trapped: {0}")]
    Trap(String),
    /// No instance could be created.
    #[error("guard unavailable: {0}")]
    Unavailable(String),
}

impl GuardFailure {
    /// Stable snake_case reason used in HTTP bodies, metrics and logs.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardKind {
    /// The rules linked into the host.
    Native,
    /// The `fencing:guard` component under wasmtime.
    Wasm,
}

/// The admission check. Implementations are pure functions of their inputs.
pub trait Guard: Send + Sync {
    /// Which implementation this is.
    fn kind(&self) -> GuardKind;

    /// Decides one write against the resource's fence (`None`: no fence yet).
    fn admit(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, GuardFailure>;

    /// Decides writes to one resource under one lock, in order.
    fn admit_batch(
        &self,
        current: Option<&Fence>,
        lock: &str,
        writes: &[BatchWrite],
        policy: Policy,
    ) -> Result<BatchOutcome, GuardFailure>;

    /// Decides a stream of sequence-less tokens on one resource.
    fn admit_stream(&self, high_water: u64, tokens: &[u64], policy: Policy) -> Result<StreamOutcome, GuardFailure>;
}
