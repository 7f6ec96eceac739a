//! The compact batch and stream forms (verdict codes, evidence rebuilt from
//! the inputs) decide exactly as `admit` called once per write, natively and
//! through the component, for both policies, with and without a fence, under
//! the right and the wrong lock.

use fencing_runtime::{
    Admission, BatchWrite, Fence, Guard, NativeGuard, Plugin, Policy, Sequencer, Verdict, WasmGuard, WasmLimits,
};
use rand::{Rng, SeedableRng, rngs::StdRng};

const LOCK: &str = "storage:customer-orders-bucket";

/// `admit` once per write, persisting every admission: the reference answer.
fn one_by_one(
    g: &dyn Guard,
    current: Option<&Fence>,
    lock: &str,
    writes: &[BatchWrite],
    policy: Policy,
) -> Vec<Result<Admission, fencing_runtime::Rejection>> {
    let mut fence = current.cloned();
    writes
        .iter()
        .map(|w| {
            let s = Sequencer { lock: lock.into(), token: w.token, sequence: w.sequence };
            let d = g.admit(fence.as_ref(), &s, policy).unwrap();
            if let Ok(a) = &d {
                let bound = fence.as_ref().map_or(lock.to_owned(), |f| f.lock.clone());
                fence = Some(Fence { lock: bound, high_water: a.high_water, sequence: a.sequence });
            }
            d
        })
        .collect()
}

fn random_case(rng: &mut StdRng) -> (Option<Fence>, &'static str, Vec<BatchWrite>, Policy) {
    let current = rng.random_bool(0.8).then(|| Fence {
        lock: if rng.random_bool(0.9) { LOCK.into() } else { "other".into() },
        high_water: rng.random_range(0..20),
        sequence: rng.random_bool(0.5).then(|| rng.random_range(0..5)),
    });
    let len = rng.random_range(0..40);
    let writes = (0..len)
        .map(|_| BatchWrite {
            token: if rng.random_bool(0.02) { u64::MAX } else { rng.random_range(0..25) },
            sequence: rng.random_bool(0.6).then(|| rng.random_range(0..8)),
        })
        .collect();
    let policy = if rng.random_bool(0.5) { Policy::NonDecreasing } else { Policy::StrictlyIncreasing };
    (current, LOCK, writes, policy)
}

#[test]
fn batch_codes_match_admit_one_by_one_native_and_wasm() {
    let wasm = WasmGuard::embedded(None).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut rejected = 0;
    for _ in 0..2_000 {
        let (current, lock, writes, policy) = random_case(&mut rng);
        let expected = one_by_one(&NativeGuard, current.as_ref(), lock, &writes, policy);
        let native = NativeGuard.admit_batch(current.as_ref(), lock, &writes, policy).unwrap();
        let component = wasm.admit_batch(current.as_ref(), lock, &writes, policy).unwrap();
        assert_eq!(native.verdicts, expected, "{current:?} {writes:?} {policy:?}");
        assert_eq!(component, native, "{current:?} {writes:?} {policy:?}");
        rejected += expected.iter().filter(|d| d.is_err()).count();
    }
    assert!(rejected > 1_000, "the cases exercise rejections ({rejected})");
}

#[test]
fn stream_codes_match_admit_one_by_one_native_and_wasm() {
    let wasm = WasmGuard::embedded(None).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for _ in 0..2_000 {
        let high_water = rng.random_range(0..20);
        let tokens: Vec<u64> = (0..rng.random_range(0..64)).map(|_| rng.random_range(0..30)).collect();
        let policy = if rng.random_bool(0.5) { Policy::NonDecreasing } else { Policy::StrictlyIncreasing };
        let fence = (high_water > 0).then(|| Fence { lock: LOCK.into(), high_water, sequence: None });
        let writes: Vec<BatchWrite> = tokens.iter().map(|&token| BatchWrite { token, sequence: None }).collect();
        let expected: Vec<Verdict> = one_by_one(&NativeGuard, fence.as_ref(), LOCK, &writes, policy)
            .iter()
            .map(|d| match d {
                Ok(_) => Verdict::Admitted,
                Err(r) => match r.reason() {
                    "invalid_token" => Verdict::InvalidToken,
                    "stale_token" => Verdict::StaleToken,
                    "token_reused" => Verdict::TokenReused,
                    other => panic!("a stream cannot be rejected as {other}"),
                },
            })
            .collect();
        let native = NativeGuard.admit_stream(high_water, &tokens, policy).unwrap();
        let component = wasm.admit_stream(high_water, &tokens, policy).unwrap();
        assert_eq!(native.verdicts, expected, "{high_water} {tokens:?} {policy:?}");
        assert_eq!(component, native, "{high_water} {tokens:?} {policy:?}");
    }
}

#[test]
fn many_distinct_lock_names_retire_workers_and_stay_correct() {
    // A generous deadline: a retired worker's replacement is instantiated
    // inside a call, which a loaded machine may stretch.
    let limits = WasmLimits { deadline: std::time::Duration::from_secs(5), ..WasmLimits::default() };
    let engine = WasmGuard::engine(&limits).unwrap();
    let wasm = WasmGuard::new(engine.clone(), Plugin::embedded(&engine, None).unwrap(), limits).unwrap();
    let before = wasm.instances_created();
    for i in 0..10_000u64 {
        let lock = format!("lock-{i}");
        let fence = Fence { lock: lock.clone(), high_water: 5, sequence: None };
        let ok = wasm.admit(Some(&fence), &Sequencer { lock, token: 6, sequence: None }, Policy::NonDecreasing);
        assert!(ok.unwrap().is_ok());
        let wrong =
            wasm.admit(Some(&fence), &Sequencer { lock: "x".into(), token: 6, sequence: None }, Policy::NonDecreasing);
        assert_eq!(wrong.unwrap().unwrap_err().reason(), "wrong_lock");
    }
    // One worker interns at most 4096 names before it is retired.
    assert!(wasm.instances_created() - before >= 2, "interned names are bounded per worker");
    assert_eq!(wasm.failures(), 0);
}
