//! The runtime shims a `no_std` component that links no libc and imports
//! nothing needs: the global allocator, the panic handler, `memcmp`/`bcmp`
//! and the canonical-ABI `cabi_realloc`.
//!
//! Compiled only for `target_family = "wasm"`. This file is the one copy:
//! the guest includes it from `lib.rs`, and the deliberately misbehaving test
//! component (`tests/plugins/misbehaving`) includes it by `#[path]`. The
//! including crate must be `#![no_std]`, declare `extern crate alloc` and
//! depend on `dlmalloc` with the `global` feature.

#![cfg(target_family = "wasm")]

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
