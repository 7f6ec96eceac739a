//! Per-connection state: what the connection presents for rows that do not
//! carry it, and the plugin it decides with.
//!
//! The state is created when the extension is loaded into a connection and
//! shared only by that connection's functions; SQLite runs a connection's
//! statements one at a time, so the mutex is never contended.

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
}

/// A connection's state, cloned into each of its functions.
#[derive(Clone, Default)]
pub struct Session(Arc<Mutex<State>>);

impl Session {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic cannot leave the state half-written (every write is one assignment).
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
