//! What one lock operation costs as the lock table grows: acquire + release
//! of a lock never seen before, and renew of a held lock, with 10 and with
//! 1,000,000 other leases held (the embedded service in memory, no HTTP, no
//! journal).
//!
//! `cargo bench -p fencing-locks --bench lock_table`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fencing_api::wire::locks::{AcquireRequest, Grant, LeaseRef};
use fencing_locks::{Acquired, EmbeddedConfig, EmbeddedLocks, LockMetrics, LockService, ValidAcquire};
use std::hint::black_box;

fn acquire(name: String, lease_ms: u64) -> ValidAcquire {
    ValidAcquire::new(AcquireRequest {
        resource_id: name,
        client_id: "bench".into(),
        lease_duration_ms: lease_ms,
        wait_ms: None,
        lock_token: None,
    })
    .expect("valid")
}

async fn grant(s: &EmbeddedLocks, name: String, lease_ms: u64) -> Grant {
    match s.acquire(acquire(name, lease_ms)).await.expect("no error") {
        Acquired::Granted(g) => g,
        Acquired::Refused(r) => panic!("refused: {r:?}"),
    }
}

fn lease(g: &Grant) -> LeaseRef {
    LeaseRef { resource_id: g.resource_id.clone(), lock_token: g.lock_token.clone() }
}

fn table(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut g = c.benchmark_group("lock_table");
    for held in [10usize, 1_000_000] {
        let cfg = EmbeddedConfig { max_held: 2 * held + 1_000, ..EmbeddedConfig::default() };
        let s = EmbeddedLocks::open(cfg, LockMetrics::default()).expect("open");
        let kept = rt.block_on(async {
            let mut first = None;
            for i in 0..held {
                let g = grant(&s, format!("held-{i:08}"), 3_600_000).await;
                first.get_or_insert(g);
            }
            first.expect("at least one")
        });
        let mut n = 0u64;
        g.bench_function(BenchmarkId::new("acquire-release-new-name", held), |b| {
            b.iter(|| {
                n += 1;
                rt.block_on(async {
                    let g = grant(&s, format!("new-{n:012}"), 10_000).await;
                    s.release(lease(&g)).await.expect("release");
                })
            })
        });
        g.bench_function(BenchmarkId::new("renew", held), |b| {
            b.iter(|| rt.block_on(s.renew(black_box(lease(&kept)))).expect("renew"))
        });
        assert_eq!(s.held(), held);
    }
    g.finish();
}

criterion_group!(benches, table);
criterion_main!(benches);
