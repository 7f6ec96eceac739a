//! The component, as the extension runs it.
//!
//! A process that loads the extension gets one embedded guard, built the
//! first time any of its connections asks for a decision (compiling the
//! component takes tens of milliseconds; loading the extension stays cheap).
//! The engine is configured for a host inside another program
//! ([`accept::host_guard`]): no signal handlers, no compile
//! threads, so the loading program (Python, the sqlite3 shell, an
//! application) keeps its own signal handling.
//!
//! Invariant: a guard failure (timeout, trap, memory) is never an admission;
//! it fails the statement like a refusal, and the connection stays usable.

use fencing_runtime::{Decision, Fence, Guard, Policy, Sequencer, SignedDecision, Verifier, WasmGuard, accept};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A built guard.
pub struct Decider {
    guard: WasmGuard,
    /// Where it came from, for `fencing_guard_info`.
    pub source: String,
}

impl Decider {
    /// Builds a guard for the component at `path`, or the embedded one.
    pub fn build(path: Option<&Path>) -> Result<Decider, String> {
        let guard = accept::host_guard(path, None).map_err(|e| e.to_string())?;
        let source = path.map_or_else(|| "embedded".to_string(), |p| p.display().to_string());
        Ok(Decider { guard, source })
    }

    /// The component's decision, or `reason: message` when it could not decide.
    pub fn decide(&self, current: Option<&Fence>, presented: &Sequencer, policy: Policy) -> Result<Decision, String> {
        self.guard.admit(current, presented, policy).map_err(|f| format!("{}: {f}", f.reason()))
    }

    /// The component's decision on a write, signed when the connection has
    /// keys (`verifier`), or `reason: message` when it could not decide.
    pub fn decide_signed(
        &self,
        verifier: Option<&Verifier>,
        current: Option<&Fence>,
        presented: &Sequencer,
        proof: &[u8],
        policy: Policy,
    ) -> Result<SignedDecision, String> {
        self.guard
            .admit_with_keys(verifier, current, presented, proof, policy)
            .map_err(|f| format!("{}: {f}", f.reason()))
    }

    /// Which component decides: its source, contract, size, digest and call path.
    pub fn info(&self) -> String {
        let i = self.guard.info();
        format!(
            "{}: {}, {} bytes, sha256 {}, call path {}",
            self.source,
            i.package.as_deref().unwrap_or("unknown contract"),
            i.size,
            i.sha256,
            i.call_path
        )
    }
}

/// The process's embedded guard, or why it could not be built.
pub fn embedded() -> Result<Arc<Decider>, String> {
    static EMBEDDED: OnceLock<Result<Arc<Decider>, String>> = OnceLock::new();
    EMBEDDED.get_or_init(|| Decider::build(None).map(Arc::new)).clone()
}

/// A connection's plugin, else the process's embedded guard.
pub fn or_embedded(plugin: Option<Arc<Decider>>) -> Result<Arc<Decider>, String> {
    match plugin {
        Some(p) => Ok(p),
        None => embedded(),
    }
}
