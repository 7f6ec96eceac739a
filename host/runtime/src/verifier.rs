//! [`Verifier`]: the keys an engine trusts to have made proofs, checked once
//! and handed to [`Guard::admit_signed`](crate::Guard::admit_signed) with
//! every signed write.
//!
//! Every guard decides with the same keyring code (`fencing_rules::proof`):
//! the native guard runs the verifier's own keyring; a Wasm instance installs
//! the verifier's keys the first time it sees that verifier (`set-keys`) and
//! keeps them, with the proofs it has verified, until another verifier comes.
//! Rotating keys is making a new verifier.

use crate::proof::{KeyError, Keyring, VerifierKey};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A set of verifier keys, checked when made.
pub struct Verifier {
    id: u64,
    keys: Arc<[VerifierKey]>,
    native: Mutex<Keyring>,
}

impl Verifier {
    /// Checks `keys` (at least one, at most 64, ids distinct, each a key of
    /// its algorithm) exactly as the component's `set-keys` does.
    pub fn new(keys: Vec<VerifierKey>) -> Result<Verifier, KeyError> {
        let native = Keyring::new(&keys)?;
        Ok(Verifier { id: NEXT_ID.fetch_add(1, Ordering::Relaxed), keys: keys.into(), native: Mutex::new(native) })
    }

    /// The keys.
    pub fn keys(&self) -> &[VerifierKey] {
        &self.keys
    }

    /// A number no other verifier of this process has: what a Wasm worker
    /// remembers to know whether its installed keys are this verifier's.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Runs `f` with the native keyring (the native guard's decisions).
    pub(crate) fn with_keyring<R>(&self, f: impl FnOnce(&mut Keyring) -> R) -> R {
        f(&mut self.native.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<u32> = self.keys.iter().map(|k| k.id).collect();
        f.debug_struct("Verifier").field("key_ids", &ids).finish()
    }
}
