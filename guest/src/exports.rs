//! The bodies of the `fencing:guard` exports in terms of the rules, the
//! `lock-name` resource, and the one place WIT types convert to rule types.
//!
//! Compiled only for `target_family = "wasm"`. This file is the one copy: the
//! guest's `component.rs` includes it as a child module, and the deliberately
//! misbehaving test component (`tests/plugins/misbehaving`) includes it by
//! `#[path]`. The including module must have in scope `rules` and `proof`
//! (the rules and proof modules), `wit` (the generated `fencing::guard::check` export interface),
//! `Component` (the exported type), `before_call(lock: &wit::LockNameBorrow)`,
//! which runs before the rules of `admit` and `admit-batch` (the test
//! component misbehaves there; the shipped one does nothing), and
//! `lies(lock: &wit::LockNameBorrow) -> bool`, whether a single decision
//! under that lock answers `stale-token` whatever the rules say (the test
//! component's broken contract; the shipped one never lies). Both take the
//! handle, not the name, so that the shipped no-ops read nothing; `name`
//! reads it.

#![cfg(target_family = "wasm")]

use super::{Component, before_call, lies, proof, rules, wit};
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use proof::{Keyring, ProofRejection};

/// The keyring `set-keys` installed: the one piece of state an instance keeps.
struct Keys(UnsafeCell<Option<Keyring>>);

// SAFETY: a component instance runs on one thread, and no export calls another.
unsafe impl Sync for Keys {}

static KEYS: Keys = Keys(UnsafeCell::new(None));

/// The installed keyring. Each export takes it once and drops it before returning.
fn keys() -> &'static mut Option<Keyring> {
    // SAFETY: single-threaded instance, no re-entry: only one borrow is live at a time.
    unsafe { &mut *KEYS.0.get() }
}

/// Verifies `proof` for `lock` and `token` under the installed keys.
fn verify(lock: &str, token: u64, proof: &[u8]) -> Result<(), ProofRejection> {
    keys().as_mut().ok_or(ProofRejection::NoKeys)?.verify(lock, token, proof)
}

/// An interned lock name: the `lock-name` resource's representation.
pub struct LockName(String);

impl wit::GuestLockName for LockName {
    fn new(name: String) -> Self {
        LockName(name)
    }
}

/// The name behind a `lock-name` handle.
pub(super) fn name<'a>(lock: &wit::LockNameBorrow<'a>) -> &'a str {
    &lock.get::<LockName>().0
}

/// The rep a `lock-name` borrow carries: the address of the value this
/// instance's constructor boxed, the same for every borrow of one handle.
/// Read without `LockNameBorrow::get`, which checks on every call that one
/// Rust type backs the resource (true of this file's single `LockName` by
/// construction) and unwraps the boxed value: a single decision only needs
/// to know whether two handles are one.
#[inline(always)]
fn rep(lock: &wit::LockNameBorrow<'_>) -> *const u8 {
    // The generated borrow is `#[repr(transparent)]` over its `rep: *const u8`.
    const { assert!(size_of::<wit::LockNameBorrow<'static>>() == size_of::<*const u8>()) };
    // SAFETY: same size and, by the generated type's `repr(transparent)`,
    // the same layout as the pointer it wraps; the copy is only compared.
    unsafe { core::mem::transmute_copy::<wit::LockNameBorrow<'_>, *const u8>(lock) }
}

/// Whether two handles name the same lock: equal bytes. The address check
/// is the common case (a host passes one handle for one name).
#[inline]
fn same_lock(a: &wit::LockNameBorrow<'_>, b: &wit::LockNameBorrow<'_>) -> bool {
    let (a, b) = (rep(a), rep(b));
    core::ptr::eq(a, b) || same_bytes(a, b)
}

/// The byte comparison of two distinct handles, given by rep and kept out of
/// the exports: a host passes one handle for one name, so this is the rare
/// path, and inlined (or given the borrows, which would then have to live in
/// memory) it would take registers and stack the common path then pays for.
#[inline(never)]
fn same_bytes(a: *const u8, b: *const u8) -> bool {
    // SAFETY: both reps were just read from borrows live for this call.
    let (a, b) = unsafe { (wit::LockNameBorrow::lift(a), wit::LockNameBorrow::lift(b)) };
    name(&a) == name(&b)
}

impl wit::Guest for Component {
    type LockName = LockName;

    fn admit(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        policy: wit::Policy,
    ) -> Result<wit::Admission, wit::Rejection> {
        let lock = &presented.lock;
        before_call(lock);
        if lies(lock) {
            let high_water = current.as_ref().map_or(0, |f| f.high_water);
            return Err(wit::Rejection::StaleToken(wit::TokenConflict { presented: presented.token, high_water }));
        }
        let same = || current.as_ref().is_some_and(|f| same_lock(&f.lock, lock));
        let state = current.as_ref().map(state);
        rules::decide(state, same, presented.token, presented.sequence, policy.into())
            .map(Into::into)
            .map_err(Into::into)
    }

    // Inlined into the export's wrapper, so the lifted arguments stay in
    // locals instead of crossing a call through the guest's stack.
    #[inline(always)]
    fn admit_code(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        policy: wit::Policy,
    ) -> wit::VerdictCode {
        let lock = &presented.lock;
        before_call(lock);
        if lies(lock) {
            return wit::VerdictCode::StaleToken;
        }
        let same = || current.as_ref().is_some_and(|f| same_lock(&f.lock, lock));
        let state = current.as_ref().map(state);
        verdict_code(rules::decide_code(state, same, presented.token, presented.sequence, policy.into()))
    }

    fn admit_batch(
        current: Option<wit::Fence<'_>>,
        lock: wit::LockNameBorrow<'_>,
        writes: Vec<wit::BatchWrite>,
        policy: wit::Policy,
    ) -> wit::BatchOutcome {
        before_call(&lock);
        let wrong_lock = current.as_ref().is_some_and(|f| !same_lock(&f.lock, &lock));
        // `wit::BatchWrite` and `rules::BatchWrite` have the same fields: the rules read the lifted list as it is.
        let writes = writes.iter().map(|w| rules::BatchWrite { token: w.token, sequence: w.sequence });
        let mut verdicts = Vec::new();
        let fence =
            rules::admit_batch_codes(current.as_ref().map(state), wrong_lock, writes, policy.into(), &mut verdicts);
        wit::BatchOutcome {
            verdicts,
            fence: fence.map(|f| wit::FenceState { high_water: f.high_water, sequence: f.sequence }),
        }
    }

    fn set_keys(keys: Vec<wit::VerifierKey>) -> Result<(), wit::KeyError> {
        let keys: Vec<proof::VerifierKey> = keys.into_iter().map(Into::into).collect();
        let ring = Keyring::new(&keys).map_err(|e| match e {
            proof::KeyError::NoKeys => wit::KeyError::NoKeys,
            proof::KeyError::TooMany => wit::KeyError::TooMany,
            proof::KeyError::DuplicateId(id) => wit::KeyError::DuplicateId(id),
            proof::KeyError::BadKey(id) => wit::KeyError::BadKey(id),
        })?;
        *self::keys() = Some(ring);
        Ok(())
    }

    fn verify_proof(lock: wit::LockNameBorrow<'_>, token: u64, proof: Vec<u8>) -> Result<(), wit::ProofRejection> {
        verify(name(&lock), token, &proof).map_err(|r| match r {
            ProofRejection::NoKeys => wit::ProofRejection::NoKeys,
            ProofRejection::Missing => wit::ProofRejection::Missing,
            ProofRejection::Malformed => wit::ProofRejection::Malformed,
            ProofRejection::UnknownKey { key_id } => wit::ProofRejection::UnknownKey(key_id),
            ProofRejection::BadProof => wit::ProofRejection::BadProof,
        })
    }

    fn admit_signed(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        proof: Vec<u8>,
        policy: wit::Policy,
    ) -> wit::VerdictCode {
        let lock = &presented.lock;
        before_call(lock);
        if let Err(r) = verify(name(lock), presented.token, &proof) {
            return verdict_code(r.code());
        }
        let same = || current.as_ref().is_some_and(|f| same_lock(&f.lock, lock));
        let state = current.as_ref().map(state);
        verdict_code(rules::decide_code(state, same, presented.token, presented.sequence, policy.into()))
    }

    fn admit_stream(high_water: u64, tokens: Vec<u64>, policy: wit::Policy) -> wit::StreamOutcome {
        let mut verdicts = Vec::new();
        let high_water = rules::admit_stream_codes(high_water, &tokens, policy.into(), &mut verdicts);
        wit::StreamOutcome { verdicts, high_water }
    }
}

fn state(f: &wit::Fence<'_>) -> rules::FenceState {
    rules::FenceState { high_water: f.high_water, sequence: f.sequence }
}

/// The WIT case of a rule code (`rules::code`; case N is byte N).
#[inline]
fn verdict_code(c: u8) -> wit::VerdictCode {
    use wit::VerdictCode as V;
    match c {
        rules::code::ADMITTED => V::Admitted,
        rules::code::ADMITTED_NEW_TERM => V::AdmittedNewTerm,
        rules::code::INVALID_TOKEN => V::InvalidToken,
        rules::code::WRONG_LOCK => V::WrongLock,
        rules::code::STALE_TOKEN => V::StaleToken,
        rules::code::TOKEN_REUSED => V::TokenReused,
        rules::code::SEQUENCE_REGRESSED => V::SequenceRegressed,
        rules::code::PROOF_NO_KEYS => V::ProofNoKeys,
        rules::code::PROOF_MISSING => V::ProofMissing,
        rules::code::PROOF_MALFORMED => V::ProofMalformed,
        rules::code::PROOF_UNKNOWN_KEY => V::ProofUnknownKey,
        _ => V::ProofBad,
    }
}

impl From<wit::VerifierKey> for proof::VerifierKey {
    fn from(k: wit::VerifierKey) -> Self {
        let algorithm = match k.algorithm {
            wit::KeyAlgorithm::Ed25519 => proof::Algorithm::Ed25519,
            wit::KeyAlgorithm::HmacSha256 => proof::Algorithm::HmacSha256,
        };
        proof::VerifierKey { id: k.id, algorithm, material: k.material }
    }
}

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
