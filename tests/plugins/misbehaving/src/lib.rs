//! A deliberately misbehaving `fencing:guard@0.1.0` component for the host's
//! fault-handling tests. `admit` misbehaves by the presented lock name:
//! `loop` spins forever, `trap` executes `unreachable`, `hog` allocates until
//! its memory runs out; every other name gets the real rules (the same
//! `rules.rs` the guest ships), so a test can see the next call succeed.
//! The runtime shims are the guest's own `runtime.rs`.

#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

#[path = "../../../../guest/src/rules.rs"]
#[allow(dead_code)]
mod rules;

/// The guest's allocator, panic handler, `memcmp`/`bcmp` and `cabi_realloc`.
#[path = "../../../../guest/src/runtime.rs"]
mod runtime;

mod bindings {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "guard",
        generate_all,
    });
}

use bindings::exports::fencing::guard::check as wit;

struct Component;

bindings::export!(Component with_types_in bindings);

/// An interned lock name.
pub struct LockName(String);

impl wit::GuestLockName for LockName {
    fn new(name: String) -> Self {
        LockName(name)
    }
}

fn policy(p: wit::Policy) -> rules::Policy {
    match p {
        wit::Policy::NonDecreasing => rules::Policy::NonDecreasing,
        wit::Policy::StrictlyIncreasing => rules::Policy::StrictlyIncreasing,
    }
}

fn state(f: &wit::Fence<'_>) -> rules::FenceState {
    rules::FenceState { high_water: f.high_water, sequence: f.sequence }
}

/// Misbehaves as the lock name asks; returns for any other name.
fn misbehave(name: &str) {
    match name {
        "loop" => loop {
            core::hint::black_box(());
        },
        "trap" => core::arch::wasm32::unreachable(),
        "hog" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut block = Vec::with_capacity(1 << 20);
                block.resize(1 << 20, 1u8);
                hoard.push(core::hint::black_box(block));
            }
        }
        _ => {}
    }
}

impl wit::Guest for Component {
    type LockName = LockName;

    fn admit(
        current: Option<wit::Fence<'_>>,
        presented: wit::Sequencer<'_>,
        policy_: wit::Policy,
    ) -> Result<wit::Admission, wit::Rejection> {
        let name = &presented.lock.get::<LockName>().0;
        misbehave(name);
        let same = || current.as_ref().is_some_and(|f| f.lock.get::<LockName>().0 == *name);
        match rules::decide(current.as_ref().map(state), same, presented.token, presented.sequence, policy(policy_)) {
            Ok(a) => Ok(wit::Admission { high_water: a.high_water, sequence: a.sequence, new_term: a.new_term }),
            Err(r) => Err(match r {
                rules::Rejection::InvalidToken => wit::Rejection::InvalidToken,
                rules::Rejection::WrongLock => wit::Rejection::WrongLock,
                rules::Rejection::StaleToken { presented, high_water } => {
                    wit::Rejection::StaleToken(wit::TokenConflict { presented, high_water })
                }
                rules::Rejection::TokenReused { presented, high_water } => {
                    wit::Rejection::TokenReused(wit::TokenConflict { presented, high_water })
                }
                rules::Rejection::SequenceRegressed { token, presented, last } => {
                    wit::Rejection::SequenceRegressed(wit::SequenceConflict { token, presented, last })
                }
            }),
        }
    }

    fn admit_batch(
        current: Option<wit::Fence<'_>>,
        lock: wit::LockNameBorrow<'_>,
        writes: Vec<wit::BatchWrite>,
        policy_: wit::Policy,
    ) -> wit::BatchOutcome {
        let name = &lock.get::<LockName>().0;
        misbehave(name);
        let wrong_lock = current.as_ref().is_some_and(|f| f.lock.get::<LockName>().0 != *name);
        let writes: Vec<rules::BatchWrite> =
            writes.into_iter().map(|w| rules::BatchWrite { token: w.token, sequence: w.sequence }).collect();
        let mut verdicts = Vec::new();
        let fence =
            rules::admit_batch_codes(current.as_ref().map(state), wrong_lock, &writes, policy(policy_), &mut verdicts);
        wit::BatchOutcome {
            verdicts,
            fence: fence.map(|f| wit::FenceState { high_water: f.high_water, sequence: f.sequence }),
        }
    }

    fn admit_stream(high_water: u64, tokens: Vec<u64>, policy_: wit::Policy) -> wit::StreamOutcome {
        let mut verdicts = Vec::new();
        let high_water = rules::admit_stream_codes(high_water, &tokens, policy(policy_), &mut verdicts);
        wit::StreamOutcome { verdicts, high_water }
    }
}
