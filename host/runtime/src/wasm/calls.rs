//! A worker's way into the rules, as one enum over the two paths.
//!
//! An enum rather than a `Box<dyn PathCalls>`: the guard's calls dispatch
//! statically, so a single decision on the direct path (the lookup of the
//! interned lock, the flat call, the check of its verdict code) inlines into
//! the guard's `admit`.

use super::base::{Batch, BatchCodes, PathCalls, Result, Signed, StreamCodes, WorkerStore};
use super::component::ComponentCalls;
use super::direct::DirectCalls;
use crate::proof::VerifierKey;
use crate::{Fence, Policy, Sequencer};

/// The path one worker takes.
// Workers are boxed whole; boxing the direct path again would put a pointer
// chase in front of every call.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Calls {
    /// Into the component's core module (`direct.rs`).
    Direct(DirectCalls),
    /// Through wasmtime's component runtime (`component.rs`).
    Component(ComponentCalls),
}

/// `$call` on whichever path `$calls` holds.
macro_rules! on_path {
    ($calls:expr, $p:ident => $call:expr) => {
        match $calls {
            Calls::Direct($p) => $call,
            Calls::Component($p) => $call,
        }
    };
}

impl PathCalls for Calls {
    #[inline]
    fn interned(&self) -> usize {
        on_path!(self, p => p.interned())
    }

    #[inline]
    fn admit(&mut self, s: &mut WorkerStore, f: Option<&Fence>, p: &Sequencer, policy: Policy) -> Result<u8> {
        on_path!(self, c => c.admit(s, f, p, policy))
    }

    fn admit_batch(&mut self, s: &mut WorkerStore, f: Option<&Fence>, b: Batch<'_>, p: Policy) -> Result<BatchCodes> {
        on_path!(self, c => c.admit_batch(s, f, b, p))
    }

    fn admit_stream(&mut self, s: &mut WorkerStore, high_water: u64, t: &[u64], p: Policy) -> Result<StreamCodes> {
        on_path!(self, c => c.admit_stream(s, high_water, t, p))
    }

    fn set_keys(&mut self, s: &mut WorkerStore, keys: &[VerifierKey]) -> Result<()> {
        on_path!(self, c => c.set_keys(s, keys))
    }

    fn admit_signed(&mut self, s: &mut WorkerStore, f: Option<&Fence>, w: Signed<'_>, p: Policy) -> Result<u8> {
        on_path!(self, c => c.admit_signed(s, f, w, p))
    }
}
