//! Cost of one admission decision: native rules vs the component.
//!
//! `cargo bench -p fencing-runtime --bench check`. Group `check`:
//! `native|wasm` x `single|batch-1024|stream-1024`, and `wasm-host/single`:
//! the guard an engine's process builds (`accept::host_guard`: no signal
//! handlers, so explicit bounds checks), the one the engines and the C API
//! run; group `plugin`: load
//! (compile, cache) and instantiation from the `InstancePre`; group `probe`:
//! where the time of a call goes (the component path beside the default
//! direct path, the floor of a core and a component call to a no-op, and a
//! gauge of how fast the machine runs JIT code at the moment); group
//! `signed`: a signed write beside an unsigned one, with the proof already
//! verified for its token (`steady`) and a new token's proof every call
//! (`new-token`), for Ed25519 and HMAC-SHA256 keys.
//! Inputs use a realistic 30-byte lock name.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fencing_runtime::proof::{Algorithm, Signer};
use fencing_runtime::{
    BatchWrite, CallPath, Fence, Guard, NativeGuard, Plugin, Policy, Sequencer, Verifier, WasmGuard, WasmLimits,
};
use std::hint::black_box;

const LOCK: &str = "storage:customer-orders-bucket"; // 30 bytes

fn inputs() -> (Fence, Sequencer, Vec<BatchWrite>, Vec<u64>) {
    assert_eq!(LOCK.len(), 30);
    let fence = Fence { lock: LOCK.into(), high_water: 1_000, sequence: Some(7) };
    let seq = Sequencer { lock: LOCK.into(), token: 1_000, sequence: Some(8) };
    // A realistic mix: mostly advancing writes, some stale, some replays.
    let writes: Vec<BatchWrite> = (0..1024u64)
        .map(|i| BatchWrite { token: 1_000 + i / 4 - if i % 16 == 5 { 3 } else { 0 }, sequence: Some(i) })
        .collect();
    let tokens: Vec<u64> = (0..1024u64).map(|i| 1_000 + i / 2 - if i % 16 == 5 { 3 } else { 0 }).collect();
    (fence, seq, writes, tokens)
}

fn check(c: &mut Criterion) {
    let wasm = WasmGuard::embedded(None).expect("load embedded guard");
    let guards: [(&str, &dyn Guard); 2] = [("native", &NativeGuard), ("wasm", &wasm)];
    let (fence, seq, writes, tokens) = inputs();
    let mut g = c.benchmark_group("check");
    for (name, guard) in guards {
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new(name, "single"), |b| {
            b.iter(|| guard.admit(black_box(Some(&fence)), black_box(&seq), Policy::NonDecreasing).unwrap())
        });
        g.throughput(Throughput::Elements(writes.len() as u64));
        g.bench_function(BenchmarkId::new(name, "batch-1024"), |b| {
            b.iter(|| {
                guard.admit_batch(black_box(Some(&fence)), LOCK, black_box(&writes), Policy::NonDecreasing).unwrap()
            })
        });
        g.throughput(Throughput::Elements(tokens.len() as u64));
        g.bench_function(BenchmarkId::new(name, "stream-1024"), |b| {
            b.iter(|| guard.admit_stream(black_box(999), black_box(&tokens), Policy::NonDecreasing).unwrap())
        });
    }
    let host = fencing_runtime::accept::host_guard(None, None).expect("load the host process's guard");
    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("wasm-host", "single"), |b| {
        b.iter(|| host.admit(black_box(Some(&fence)), black_box(&seq), Policy::NonDecreasing).unwrap())
    });
    g.finish();
}

fn plugin(c: &mut Criterion) {
    let limits = WasmLimits::default();
    let engine = WasmGuard::engine(&limits).unwrap();
    let cache = tempfile::tempdir().unwrap();
    Plugin::embedded(&engine, Some(cache.path())).unwrap();
    let mut g = c.benchmark_group("plugin");
    g.sample_size(10);
    g.bench_function("load/compile", |b| b.iter(|| Plugin::embedded(&engine, None).unwrap()));
    g.bench_function("load/cache", |b| {
        b.iter(|| {
            let p = Plugin::embedded(&engine, Some(cache.path())).unwrap();
            assert!(p.info.from_cache);
            p
        })
    });
    let guard = WasmGuard::new(engine.clone(), Plugin::embedded(&engine, None).unwrap(), limits).unwrap();
    g.bench_function("instantiate", |b| b.iter(|| guard.instantiate().unwrap()));
    g.finish();
}

/// Distinct proofs cycled by the `new-token` cases: more than a keyring
/// remembers, so every call verifies.
const FRESH_PROOFS: u64 = 8192;

fn signed(c: &mut Criterion) {
    let wasm = WasmGuard::embedded(None).expect("load embedded guard");
    let guards: [(&str, &dyn Guard); 2] = [("native", &NativeGuard), ("wasm", &wasm)];
    let (fence, seq, _, _) = inputs();
    let mut g = c.benchmark_group("signed");
    g.throughput(Throughput::Elements(1));
    for (name, guard) in guards {
        g.bench_function(BenchmarkId::new(name, "unsigned"), |b| {
            b.iter(|| guard.admit(black_box(Some(&fence)), black_box(&seq), Policy::NonDecreasing).unwrap())
        });
        for (alg, signer) in [
            ("ed25519", Signer::new(1, Algorithm::Ed25519, &[1; 32]).unwrap()),
            ("hmac", Signer::new(2, Algorithm::HmacSha256, &[2; 32]).unwrap()),
        ] {
            let verifier = Verifier::new(vec![signer.verifier_key()]).unwrap();
            let proof = signer.prove(LOCK, seq.token);
            g.bench_function(BenchmarkId::new(name, format!("{alg}-steady")), |b| {
                b.iter(|| {
                    let d = guard.admit_signed(
                        &verifier,
                        black_box(Some(&fence)),
                        black_box(&seq),
                        &proof,
                        Policy::NonDecreasing,
                    );
                    d.unwrap().unwrap()
                })
            });
            let fresh: Vec<(Sequencer, Vec<u8>)> = (1..=FRESH_PROOFS)
                .map(|t| (Sequencer { lock: LOCK.into(), token: t, sequence: None }, signer.prove(LOCK, t)))
                .collect();
            let mut next = fresh.iter().cycle();
            g.bench_function(BenchmarkId::new(name, format!("{alg}-new-token")), |b| {
                b.iter(|| {
                    let (s, p) = next.next().unwrap();
                    guard.admit_signed(&verifier, None, black_box(s), p, Policy::NonDecreasing).unwrap().unwrap()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, check, plugin, probe, signed);
criterion_main!(benches);

/// Where the time of one call goes: the component path beside the direct
/// path; the bare entry (an empty stream); a wrong-lock decision, whose two
/// distinct lock names cost two handle lookups; and the floor of any call on
/// this engine, a no-op taking and returning a `u64`, as a core function and
/// as a lifted component function; and a JIT speed gauge ([`SPIN_CORE`]).
fn probe(c: &mut Criterion) {
    let wasm = WasmGuard::embedded(None).expect("load embedded guard");
    assert_eq!(wasm.call_path(), CallPath::Direct);
    let component = WasmGuard::embedded_on(None, CallPath::Component).unwrap();
    let engine = component.engine_ref().clone();
    let (fence, seq, writes, tokens) = inputs();
    let mut g = c.benchmark_group("probe");
    g.bench_function("component/single", |b| {
        b.iter(|| component.admit(black_box(Some(&fence)), black_box(&seq), Policy::NonDecreasing).unwrap())
    });
    g.throughput(Throughput::Elements(writes.len() as u64));
    g.bench_function("component/batch-1024", |b| {
        b.iter(|| component.admit_batch(black_box(Some(&fence)), LOCK, black_box(&writes), Policy::NonDecreasing))
    });
    g.throughput(Throughput::Elements(tokens.len() as u64));
    g.bench_function("component/stream-1024", |b| {
        b.iter(|| component.admit_stream(black_box(999), black_box(&tokens), Policy::NonDecreasing).unwrap())
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("wasm/empty-stream", |b| {
        b.iter(|| wasm.admit_stream(5, black_box(&[]), Policy::NonDecreasing).unwrap())
    });
    let other = Fence { lock: "storage:customer-invoice-bucket".into(), high_water: 1_000, sequence: None };
    let seq = Sequencer { lock: LOCK.into(), token: 1_001, sequence: None };
    g.bench_function("wasm/wrong-lock", |b| {
        b.iter(|| wasm.admit(black_box(Some(&other)), black_box(&seq), Policy::NonDecreasing).unwrap().unwrap_err())
    });

    let mut store = wasmtime::Store::new(&engine, ());
    store.set_epoch_deadline(u64::MAX / 2);
    let module = wasmtime::Module::new(&engine, NOOP_CORE).unwrap();
    let core = wasmtime::Instance::new(&mut store, &module, &[]).unwrap();
    let core = core.get_typed_func::<u64, u64>(&mut store, "noop").unwrap();
    g.bench_function("floor/core-noop", |b| b.iter(|| core.call(&mut store, black_box(7)).unwrap()));
    let spin = wasmtime::Module::new(&engine, SPIN_CORE).unwrap();
    let spin = wasmtime::Instance::new(&mut store, &spin, &[]).unwrap();
    let spin = spin.get_typed_func::<(u64, u32), u64>(&mut store, "spin").unwrap();
    g.throughput(Throughput::Elements(1024));
    g.bench_function("floor/core-spin-1024", |b| b.iter(|| spin.call(&mut store, (black_box(7), 1024)).unwrap()));
    g.throughput(Throughput::Elements(1));
    let lifted = wasmtime::component::Component::new(&engine, NOOP_COMPONENT).unwrap();
    let linker = wasmtime::component::Linker::new(&engine);
    let instance = linker.instantiate(&mut store, &lifted).unwrap();
    let lifted = instance.get_typed_func::<(u64,), (u64,)>(&mut store, "noop").unwrap();
    g.bench_function("floor/component-noop", |b| b.iter(|| lifted.call(&mut store, (black_box(7),)).unwrap()));
    g.finish();
}

const NOOP_CORE: &str = r#"(module (func (export "noop") (param i64) (result i64) local.get 0))"#;

/// A gauge of how fast this machine runs JIT-compiled wasm at the moment,
/// independent of fencing: a loop of four independent multiply-adds with no
/// memory access. On this VM such loops run at one speed in some stretches
/// and up to about twice as slow in others, while native code in the same
/// process barely changes; comparing `check/wasm/*` with this gauge tells a
/// change in the guard from a change in the machine.
const SPIN_CORE: &str = r#"(module
  (func (export "spin") (param $x i64) (param $n i32) (result i64)
    (local $a i64) (local $b i64) (local $c i64) (local $d i64)
    (block $done (loop $next
      (br_if $done (i32.eqz (local.get $n)))
      (local.set $a (i64.add (i64.mul (local.get $a) (i64.const 0x9E3779B97F4A7C15)) (local.get $x)))
      (local.set $b (i64.add (i64.mul (local.get $b) (i64.const 0x9E3779B97F4A7C15)) (local.get $x)))
      (local.set $c (i64.add (i64.mul (local.get $c) (i64.const 0x9E3779B97F4A7C15)) (local.get $x)))
      (local.set $d (i64.add (i64.mul (local.get $d) (i64.const 0x9E3779B97F4A7C15)) (local.get $x)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $next)))
    (i64.xor (i64.xor (local.get $a) (local.get $b)) (i64.xor (local.get $c) (local.get $d)))))"#;

const NOOP_COMPONENT: &str = r#"(component
  (core module $m (func (export "noop") (param i64) (result i64) local.get 0))
  (core instance $i (instantiate $m))
  (func (export "noop") (param "x" u64) (result u64) (canon lift (core func $i "noop"))))"#;
