//! A deliberately misbehaving `fencing:guard@0.1.0` component for the host's
//! fault-handling tests. `admit` misbehaves by the presented lock name:
//! `loop` spins forever, `trap` executes `unreachable`, `hog` allocates until
//! its memory runs out; every other name gets the real rules (the same
//! `rules.rs` the guest ships), so a test can see the next call succeed.

#![no_std]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;

#[path = "../../../../guest/src/rules.rs"]
#[allow(dead_code)]
mod rules;

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

#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// `memcmp` for string comparison; no libc is linked.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller guarantees both ranges hold `n` readable bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return x as i32 - y as i32;
        }
    }
    0
}

/// `bcmp`, emitted by LLVM for equality comparisons.
///
/// # Safety
/// Same as `memcmp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract as `memcmp`.
    unsafe { memcmp(a, b, n) }
}

/// The canonical-ABI allocator.
///
/// # Safety
/// `old` must be null or a block from this function with `old_size` and `align`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(old: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    use alloc::alloc::{Layout, alloc, handle_alloc_error, realloc};
    if new_size == 0 {
        return align as *mut u8;
    }
    // SAFETY: the canonical ABI passes a power-of-two alignment.
    let layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
    let ptr = if old_size == 0 {
        // SAFETY: non-zero size.
        unsafe { alloc(layout) }
    } else {
        // SAFETY: the caller guarantees `old` came from this allocator with this layout.
        unsafe { realloc(old, Layout::from_size_align_unchecked(old_size, align), new_size) }
    };
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    ptr
}
