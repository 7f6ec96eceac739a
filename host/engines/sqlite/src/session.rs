//! Per-connection state: what the connection presents when a row does not
//! carry it, the plugin it decides with, its verifier keys, the admission a
//! trigger's body is about to write, an operator's reset in progress, and
//! whether the connection is sealed.
//!
//! The state is created when the extension is loaded into a connection and
//! shared only by that connection's functions (and its authorizer, once
//! sealed); SQLite runs a connection's statements one at a time, so the
//! mutex is never contended.

use crate::guard::Decider;
use std::sync::{Arc, Mutex, MutexGuard};

/// What `fencing_present(token, lock, sequence)` set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Presented {
    pub token: Option<u64>,
    pub lock: Option<String>,
    pub sequence: Option<u64>,
}

/// What an admission leaves for the fence row; the trigger's `WHEN` sees it
/// as a number (`fencing_check_row`), its body as `fencing_pending(.., 'carrier')`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceRowWrite {
    /// The written row carries the new mark (fence in row) and the fence row
    /// already names its table: the body does not run.
    Kept = 0,
    /// The body writes the fence row, naming no carrier.
    Plain = 1,
    /// The body writes the fence row, naming the written table as its carrier.
    NamingCarrier = 2,
}

impl FenceRowWrite {
    /// The number the trigger's SQL compares.
    pub fn sql(self) -> i64 {
        self as i64
    }
}

/// An admission whose fence row the trigger's body writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub resource: String,
    pub lock: String,
    pub high_water: u64,
    pub sequence: Option<u64>,
    /// [`FenceRowWrite::Plain`] or [`FenceRowWrite::NamingCarrier`].
    pub write: FenceRowWrite,
}

/// An operator's change of fences in progress on this connection, which the
/// fence table's guards let through: `fencing_reset` of one resource, or
/// `fencing_unprotect` acknowledging the marks a dropped table carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resetting {
    /// `fencing_reset(resource, ..)`: its fence row may be deleted or re-bound.
    Resource(String),
    /// The fence rows naming this carrier may drop it (their carried tokens are gone).
    CarrierLost(String),
}

#[derive(Default)]
pub struct State {
    pub presented: Presented,
    /// The fence a trigger's check admitted and its body writes.
    pub pending: Option<Pending>,
    /// A plugin chosen with `fencing_use_plugin`; `None`: the embedded component.
    pub plugin: Option<Arc<Decider>>,
    /// The verifier keys given with `fencing_set_keys`: `fencing_admit_signed`
    /// and every protected row of this connection check proofs under them.
    pub verifier: Option<Arc<fencing_runtime::Verifier>>,
    /// The proof `fencing_present_proof` set, for protected rows.
    pub proof: Option<Vec<u8>>,
    /// Set only while `fencing_reset` or `fencing_unprotect` runs its statements.
    pub resetting: Option<Resetting>,
    /// `fencing_seal()` was called: the names of the tables whose triggers
    /// this connection's authorizer keeps (`seal.rs`).
    pub sealed: Option<Vec<String>>,
    /// The handle on this state leaked to SQLite as the authorizer's data (a pointer), once sealed.
    pub authorizer_data: Option<usize>,
}

/// A connection's state, cloned into each of its functions.
#[derive(Clone, Default)]
pub struct Session(Arc<Mutex<State>>);

impl Session {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic cannot leave the state half-written (every write is one assignment).
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with `resetting` set, and clears it afterwards whatever `f` returns.
    pub fn resetting<T>(&self, what: Resetting, f: impl FnOnce() -> T) -> T {
        /// Clears the flag when dropped, so an early return or a panic cannot leave it set.
        struct Clear<'a>(&'a Session);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.lock().resetting = None;
            }
        }
        self.lock().resetting = Some(what);
        let _clear = Clear(self);
        f()
    }

    /// A new handle on the same state, for a pointer leaked to SQLite.
    pub fn leak(&self) -> *const Mutex<State> {
        Arc::into_raw(Arc::clone(&self.0))
    }
}
