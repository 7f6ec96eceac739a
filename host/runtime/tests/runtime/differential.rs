//! Differential tests: the component (on both call paths, direct and through
//! wasmtime's component runtime) and the native rules give identical answers
//! on random inputs, and the batch and stream forms give the answers of
//! repeated single `admit` calls.
//!
//! Generation is biased toward where bugs hide: equal tokens, tokens one
//! apart, equal and nearly-equal lock names, sequences next to each other,
//! 0, 1, 2^32, 2^53, 2^63 and u64::MAX. One `WasmGuard` per path serves every case.

use fencing_runtime::{
    BatchOutcome, BatchWrite, CallPath, Decision, Fence, FenceState, Guard, NativeGuard, Policy, Rejection, Sequencer,
    StreamOutcome, Verdict, WasmGuard,
};
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::sync::LazyLock;

/// The embedded component on the direct path (the default).
static WASM: LazyLock<WasmGuard> = LazyLock::new(|| {
    let g = WasmGuard::embedded(None).expect("embedded guard");
    assert_eq!(g.call_path(), CallPath::Direct, "the embedded component takes the direct path");
    g
});

/// The same component through wasmtime's component runtime.
static COMPONENT: LazyLock<WasmGuard> = LazyLock::new(|| {
    let g = WasmGuard::embedded_on(None, CallPath::Component).expect("component-path guard");
    assert_eq!(g.call_path(), CallPath::Component);
    g
});

/// Values where comparisons and encodings change behaviour.
const BOUNDARIES: &[u64] =
    &[0, 1, 2, u32::MAX as u64, 1 << 32, 1 << 53, (1 << 53) + 1, i64::MAX as u64, 1 << 63, u64::MAX - 1, u64::MAX];

fn boundary() -> impl Strategy<Value = u64> {
    prop::sample::select(BOUNDARIES)
}

/// A token or sequence on its own: small, boundary, or anywhere.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 0u64..8, 3 => boundary(), 2 => any::<u64>()]
}

/// A number related to `base`: equal, one or two apart (wrapping at the ends), or unrelated.
fn near(base: u64) -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => Just(base),
        2 => (-2i64..=2).prop_map(move |d| base.wrapping_add_signed(d)),
        2 => number(),
    ]
}

const LOCKS: &[&str] = &["locks/tenant-42/orders/invoice", "locks/tenant-42/orders/invoicf", "a", "A", "", "caf\u{e9}"];

fn lock() -> impl Strategy<Value = String> {
    prop::sample::select(LOCKS).prop_map(String::from)
}

/// The presented lock: usually the fence's, sometimes any other.
fn lock_near(bound: String) -> impl Strategy<Value = String> {
    prop_oneof![3 => Just(bound), 1 => lock()]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::NonDecreasing), Just(Policy::StrictlyIncreasing)]
}

fn fence() -> impl Strategy<Value = Option<Fence>> {
    let some = (lock(), number(), prop::option::weighted(0.6, number()))
        .prop_map(|(lock, high_water, sequence)| Some(Fence { lock, high_water, sequence }));
    prop_oneof![1 => Just(None), 5 => some]
}

/// Decodes raw proptest entropy into a biased number: `sel` picks small,
/// boundary or unrelated; `raw` supplies the value. Shrinking `sel` and `raw`
/// toward 0 shrinks toward small numbers.
fn number_from(sel: u64, raw: u64) -> u64 {
    match sel % 8 {
        0..=2 => raw % 8,
        3..=5 => BOUNDARIES[(raw % BOUNDARIES.len() as u64) as usize],
        _ => raw,
    }
}

/// Like [`near`], decoded from entropy: equal to `base`, within two of it, or any number.
fn near_from(base: u64, sel: u64, raw: u64) -> u64 {
    match sel % 7 {
        0..=2 => base,
        3 | 4 => base.wrapping_add_signed((raw % 5) as i64 - 2),
        _ => number_from(sel / 7, raw),
    }
}

/// A (fence-or-none, sequencer, policy) triple decoded from entropy, with the
/// sequencer drawn near the fence. Decoding plain integers (instead of nesting
/// strategies) keeps generation cheap enough for 100,000 cases in a debug build.
fn triple_from(e: &[u64; 12]) -> (Option<Fence>, Sequencer, Policy) {
    let fence = (!e[0].is_multiple_of(6)).then(|| Fence {
        lock: LOCKS[(e[1] % LOCKS.len() as u64) as usize].to_string(),
        high_water: number_from(e[2], e[3]),
        sequence: (e[4] % 5 < 3).then(|| number_from(e[4] / 5, e[5])),
    });
    let (bound, hw, last) = match &fence {
        Some(f) => (f.lock.clone(), f.high_water, f.sequence),
        None => (LOCKS[0].to_string(), 1, None),
    };
    let lock = if e[6] % 4 < 3 { bound } else { LOCKS[((e[6] / 4) % LOCKS.len() as u64) as usize].to_string() };
    let token = near_from(hw, e[7], e[8]);
    let sequence = (!e[9].is_multiple_of(4)).then(|| near_from(last.unwrap_or(0), e[9] / 4, e[10]));
    let policy = if e[11].is_multiple_of(2) { Policy::NonDecreasing } else { Policy::StrictlyIncreasing };
    (fence, Sequencer { lock, token, sequence }, policy)
}

/// Writes whose tokens and sequences wander near each other, so a batch mixes
/// new terms, repeats, stale tokens and sequence regressions.
fn writes(base: u64) -> impl Strategy<Value = Vec<BatchWrite>> {
    let write =
        (near(base), prop::option::weighted(0.6, 0u64..6)).prop_map(|(token, sequence)| BatchWrite { token, sequence });
    prop::collection::vec(write, 0..48)
}

/// The rules' contract for a batch: one `admit` per write, each admission persisted.
fn batch_by_admits(current: Option<&Fence>, lock: &str, writes: &[BatchWrite], policy: Policy) -> BatchOutcome {
    let mut fence = current.cloned();
    let verdicts = writes
        .iter()
        .map(|w| {
            let presented = Sequencer { lock: lock.to_string(), token: w.token, sequence: w.sequence };
            let d = NativeGuard.admit(fence.as_ref(), &presented, policy).expect("native never fails");
            if let Ok(a) = &d {
                fence = Some(Fence { lock: lock.to_string(), high_water: a.high_water, sequence: a.sequence });
            }
            d
        })
        .collect();
    BatchOutcome { verdicts, fence: fence.map(|f| FenceState { high_water: f.high_water, sequence: f.sequence }) }
}

/// The rules' contract for a stream: `admit` of unsequenced writes on a resource
/// with no fence (high-water 0) or a sequence-less fence under the same lock.
fn stream_by_admits(high_water: u64, tokens: &[u64], policy: Policy) -> StreamOutcome {
    let lock = "locks/stream";
    let mut fence = (high_water != 0).then(|| Fence { lock: lock.into(), high_water, sequence: None });
    let verdicts = tokens
        .iter()
        .map(|&token| {
            let presented = Sequencer { lock: lock.into(), token, sequence: None };
            let d: Decision = NativeGuard.admit(fence.as_ref(), &presented, policy).expect("native never fails");
            match d {
                Ok(a) => {
                    fence = Some(Fence { lock: lock.into(), high_water: a.high_water, sequence: None });
                    Verdict::Admitted
                }
                Err(Rejection::InvalidToken) => Verdict::InvalidToken,
                Err(Rejection::StaleToken { .. }) => Verdict::StaleToken,
                Err(Rejection::TokenReused { .. }) => Verdict::TokenReused,
                Err(other) => panic!("a stream cannot be rejected as {other:?}"),
            }
        })
        .collect();
    StreamOutcome { verdicts, high_water: fence.map_or(0, |f| f.high_water) }
}

proptest! {
    #![proptest_config(Config { cases: 100_000, ..Config::default() })]

    #[test]
    fn admit_native_and_wasm_agree(entropy in any::<[u64; 12]>()) {
        let (fence, presented, policy) = triple_from(&entropy);
        let native = NativeGuard.admit(fence.as_ref(), &presented, policy).expect("native never fails");
        let wasm = WASM.admit(fence.as_ref(), &presented, policy).expect("wasm call");
        let component = COMPONENT.admit(fence.as_ref(), &presented, policy).expect("component call");
        prop_assert_eq!(&native, &wasm);
        prop_assert_eq!(&native, &component);
    }
}

proptest! {
    #![proptest_config(Config { cases: 2_000, ..Config::default() })]

    #[test]
    fn batch_native_wasm_and_admits_agree(
        (fence, lock, writes, policy) in fence().prop_flat_map(|fence| {
            let base = fence.as_ref().map_or(1, |f| f.high_water);
            let bound = fence.as_ref().map_or_else(|| LOCKS[0].to_string(), |f| f.lock.clone());
            (Just(fence), lock_near(bound), writes(base), policy())
        })
    ) {
        let native = NativeGuard.admit_batch(fence.as_ref(), &lock, &writes, policy).expect("native never fails");
        let wasm = WASM.admit_batch(fence.as_ref(), &lock, &writes, policy).expect("wasm call");
        let component = COMPONENT.admit_batch(fence.as_ref(), &lock, &writes, policy).expect("component call");
        prop_assert_eq!(&native, &wasm);
        prop_assert_eq!(&native, &component);
        prop_assert_eq!(&native, &batch_by_admits(fence.as_ref(), &lock, &writes, policy));
    }

    #[test]
    fn stream_native_wasm_and_admits_agree(
        (high_water, tokens, policy) in number().prop_flat_map(|hw| {
            (Just(hw), prop::collection::vec(near(hw), 0..64), policy())
        })
    ) {
        let native = NativeGuard.admit_stream(high_water, &tokens, policy).expect("native never fails");
        let wasm = WASM.admit_stream(high_water, &tokens, policy).expect("wasm call");
        let component = COMPONENT.admit_stream(high_water, &tokens, policy).expect("component call");
        prop_assert_eq!(&native, &wasm);
        prop_assert_eq!(&native, &component);
        prop_assert_eq!(&native, &stream_by_admits(high_water, &tokens, policy));
    }
}

/// The admit generator reaches every verdict often enough to matter: over a
/// fixed pseudo-random sample, each rejection reason and both kinds of
/// admission make up at least 1% of the triples.
#[test]
fn triple_generator_reaches_every_verdict() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        // splitmix64: a fixed, dependency-free sample.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let n = 20_000;
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for _ in 0..n {
        let entropy: [u64; 12] = std::array::from_fn(|_| next());
        let (fence, presented, policy) = triple_from(&entropy);
        let key = match NativeGuard.admit(fence.as_ref(), &presented, policy).expect("native never fails") {
            Ok(a) if a.new_term => "admitted_new_term",
            Ok(_) => "admitted_same_term",
            Err(r) => r.reason(),
        };
        *counts.entry(key).or_default() += 1;
    }
    for key in [
        "admitted_new_term",
        "admitted_same_term",
        "invalid_token",
        "wrong_lock",
        "stale_token",
        "token_reused",
        "sequence_regressed",
    ] {
        let c = counts.get(key).copied().unwrap_or(0);
        assert!(c * 100 >= n, "{key}: {c} of {n} ({counts:?})");
    }
}
