//! The component export: WIT bindings, the one place WIT types convert to the
//! rule types, and the runtime shims a zero-import `no_std` component needs.
//!
//! Compiled only for `target_family = "wasm"`.

use crate::rules;
use alloc::vec::Vec;

mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "guard",
        generate_all,
    });
}

use bindings::exports::fencing::guard::check as wit;

struct Component;

bindings::export!(Component with_types_in bindings);

impl From<wit::Policy> for rules::Policy {
    fn from(p: wit::Policy) -> Self {
        match p {
            wit::Policy::NonDecreasing => rules::Policy::NonDecreasing,
            wit::Policy::StrictlyIncreasing => rules::Policy::StrictlyIncreasing,
        }
    }
}

impl From<wit::Fence> for rules::Fence {
    fn from(f: wit::Fence) -> Self {
        rules::Fence { lock: f.lock, high_water: f.high_water, sequence: f.sequence }
    }
}

impl From<rules::Admission> for wit::Admission {
    fn from(a: rules::Admission) -> Self {
        wit::Admission { high_water: a.high_water, sequence: a.sequence, new_term: a.new_term }
    }
}

impl From<rules::Rejection> for wit::Rejection {
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

impl From<rules::Verdict> for wit::Verdict {
    fn from(v: rules::Verdict) -> Self {
        match v {
            rules::Verdict::Admitted => wit::Verdict::Admitted,
            rules::Verdict::InvalidToken => wit::Verdict::InvalidToken,
            rules::Verdict::StaleToken => wit::Verdict::StaleToken,
            rules::Verdict::TokenReused => wit::Verdict::TokenReused,
        }
    }
}

fn verdict(v: Result<rules::Admission, rules::Rejection>) -> Result<wit::Admission, wit::Rejection> {
    v.map(Into::into).map_err(Into::into)
}

impl wit::Guest for Component {
    fn admit(
        current: Option<wit::Fence>,
        presented: wit::Sequencer,
        policy: wit::Policy,
    ) -> Result<wit::Admission, wit::Rejection> {
        let current = current.map(rules::Fence::from);
        let presented = rules::Sequencer { lock: presented.lock, token: presented.token, sequence: presented.sequence };
        verdict(rules::admit(current.as_ref(), &presented, policy.into()))
    }

    fn admit_batch(
        current: Option<wit::Fence>,
        lock: alloc::string::String,
        writes: Vec<wit::BatchWrite>,
        policy: wit::Policy,
    ) -> wit::BatchOutcome {
        let current = current.map(rules::Fence::from);
        let writes: Vec<rules::BatchWrite> =
            writes.into_iter().map(|w| rules::BatchWrite { token: w.token, sequence: w.sequence }).collect();
        let out = rules::admit_batch(current.as_ref(), &lock, &writes, policy.into());
        wit::BatchOutcome {
            verdicts: out.verdicts.into_iter().map(verdict).collect(),
            fence: out.fence.map(|f| wit::FenceState { high_water: f.high_water, sequence: f.sequence }),
        }
    }

    fn admit_stream(high_water: u64, tokens: Vec<u64>, policy: wit::Policy) -> wit::StreamOutcome {
        let out = rules::admit_stream(high_water, &tokens, policy.into());
        wit::StreamOutcome { verdicts: out.verdicts.into_iter().map(Into::into).collect(), high_water: out.high_water }
    }
}

// ---- Runtime shims for a component that links no libc and imports nothing ----

#[global_allocator]
static ALLOC: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

/// A panic is a bug in the rules; trapping makes the host fail the call closed.
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    core::arch::wasm32::unreachable()
}

/// `memcmp` for string comparison; no libc is linked into the component.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: the caller guarantees both ranges hold `n` readable bytes.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return x as i32 - y as i32;
        }
        i += 1;
    }
    0
}

/// `bcmp` is what LLVM emits for equality-only comparisons.
///
/// # Safety
/// `a` and `b` must be valid for reads of `n` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: same contract as `memcmp`.
    unsafe { memcmp(a, b, n) }
}

/// The canonical-ABI allocator the host calls to place arguments in guest
/// memory. Follows the `realloc(old, old_size, align, new_size)` contract.
///
/// # Safety
/// `old` must be null or a block returned by this function with `old_size`
/// and `align`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(old: *mut u8, old_size: usize, align: usize, new_size: usize) -> *mut u8 {
    use alloc::alloc::{Layout, alloc, handle_alloc_error, realloc};
    if new_size == 0 {
        return align as *mut u8;
    }
    // SAFETY: the canonical ABI passes a power-of-two alignment.
    let layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
    let ptr = if old_size == 0 {
        // SAFETY: `layout` has a non-zero size.
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
