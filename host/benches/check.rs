//! Cost of one admission decision: native rules vs the component.
//!
//! `cargo bench -p fencing-host --bench check`. Group `check`:
//! `native|wasm` x `single|batch-1024|stream-1024`; group `plugin`: load and
//! instantiation. Inputs use a realistic 30-byte lock name.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fencing_host::guard::{BatchWrite, Fence, Guard, NativeGuard, Plugin, Policy, Sequencer, WasmGuard, WasmLimits};
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
    g.finish();
}

criterion_group!(benches, check, plugin, probe);
criterion_main!(benches);

#[allow(dead_code)]
fn probe(c: &mut Criterion) {
    let wasm = WasmGuard::embedded(None).expect("load embedded guard");
    let mut g = c.benchmark_group("probe");
    let empty_seq = Sequencer { lock: String::new(), token: 5, sequence: None };
    g.bench_function("nofence-emptylock", |b| {
        b.iter(|| wasm.admit(None, black_box(&empty_seq), Policy::NonDecreasing).unwrap())
    });
    let seq = Sequencer { lock: LOCK.into(), token: 5, sequence: None };
    g.bench_function("nofence-lock30", |b| {
        b.iter(|| wasm.admit(None, black_box(&seq), Policy::NonDecreasing).unwrap())
    });
    g.bench_function("stream-0", |b| b.iter(|| wasm.admit_stream(5, black_box(&[]), Policy::NonDecreasing).unwrap()));
    g.finish();
}
