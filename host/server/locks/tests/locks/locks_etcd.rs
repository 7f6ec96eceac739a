//! The etcd backend against a real etcd (`/usr/bin/etcd`) on loopback: the
//! API's semantics on one member, and tokens that stay monotonic while the
//! leader of a 3-member cluster is killed mid-run.

use fencing_api::wire::locks::{AcquireRequest, LeaseRef};
use fencing_base::telemetry::Metrics;
use fencing_locks::{Acquired, EtcdLocks, LockError, LockMetrics, LockService, ValidAcquire};
use fencing_runtime::{Fence, Guard, NativeGuard, Policy, Sequencer};
use fencing_testkit::etcd::{Member, cluster};
use std::time::{Duration, Instant};

async fn connect(endpoints: &[String]) -> EtcdLocks {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match EtcdLocks::connect(endpoints, LockMetrics::register(&Metrics::new())).await {
            Ok(l) => {
                // Wait for a leader: a write must succeed.
                if l.status("probe".into()).await.is_ok() {
                    return l;
                }
            }
            Err(e) => assert!(Instant::now() < deadline, "etcd did not come up: {e}"),
        }
        assert!(Instant::now() < deadline, "etcd did not come up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn raw(lock: &str, client: &str, lease: u64, wait: Option<u64>) -> AcquireRequest {
    AcquireRequest {
        resource_id: lock.into(),
        client_id: client.into(),
        lease_duration_ms: lease,
        wait_ms: wait,
        lock_token: None,
    }
}

fn req(lock: &str, client: &str, lease: u64, wait: Option<u64>) -> ValidAcquire {
    ValidAcquire::new(raw(lock, client, lease, wait)).expect("a valid test acquisition")
}

#[tokio::test]
async fn single_member_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let members = cluster(dir.path(), 1);
    let locks = connect(&[members[0].client.clone()]).await;
    let Acquired::Granted(g1) = locks.acquire(req("e", "c1", 2000, None)).await.unwrap() else { panic!("refused") };
    assert_eq!(g1.lock_token.len(), 32);
    match locks.acquire(req("e", "c2", 2000, None)).await.unwrap() {
        Acquired::Refused(r) => assert!(r.remaining_lease_ms > 0, "{r:?}"),
        other => panic!("granted twice: {other:?}"),
    }
    let st = locks.status("e".into()).await.unwrap();
    assert_eq!((st.held, st.client_id.as_deref(), st.fencing_token), (true, Some("c1"), Some(g1.fencing_token)));
    let l1 = LeaseRef { resource_id: "e".into(), lock_token: g1.lock_token.clone() };
    let wrong = LeaseRef { resource_id: "e".into(), lock_token: format!("{:032x}", 1u128) };
    assert_eq!(locks.renew(wrong.clone()).await, Err(LockError::WrongLease));
    assert_eq!(locks.release(wrong).await, Err(LockError::WrongLease));
    assert_eq!(locks.renew(l1.clone()).await.unwrap().fencing_token, g1.fencing_token);
    locks.release(l1.clone()).await.unwrap();
    let Acquired::Granted(g2) = locks.acquire(req("e", "c2", 1000, None)).await.unwrap() else { panic!("refused") };
    assert!(g2.fencing_token > g1.fencing_token);
    // Expiry: without renewal, etcd expires the lease and a waiter gets the lock.
    let Acquired::Granted(g3) = locks.acquire(req("e", "c3", 1000, Some(10_000))).await.unwrap() else {
        panic!("waiter never got the expired lock")
    };
    assert!(g3.fencing_token > g2.fencing_token);
    let l2 = LeaseRef { resource_id: "e".into(), lock_token: g2.lock_token.clone() };
    assert_eq!(locks.renew(l2).await, Err(LockError::LeaseExpired));
}

#[tokio::test]
async fn tokens_stay_monotonic_when_the_leader_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let mut members = cluster(dir.path(), 3);
    let endpoints: Vec<String> = members.iter().map(|m| m.client.clone()).collect();
    let locks = connect(&endpoints).await;
    let mut last = 0u64;
    let mut granted = 0;
    let mut killed = false;
    let t0 = Instant::now();
    // The storage side: a fence admitting every grant's token, and a holder "paused" before the kill.
    let guard = NativeGuard;
    let mut fence: Option<Fence> = None;
    let mut paused_token = None;
    while granted < 30 {
        assert!(t0.elapsed() < Duration::from_secs(180), "only {granted} grants");
        if granted == 10 && !killed {
            let leader = leader(&members).await;
            let mut m = members.remove(leader);
            eprintln!("killing leader {}", m.name);
            m.child.kill().unwrap();
            m.child.wait().unwrap();
            killed = true;
        }
        match locks.acquire(req("ha", "c", 2000, Some(2000))).await {
            Ok(Acquired::Granted(g)) => {
                assert!(g.fencing_token > last, "token {} after {last}", g.fencing_token);
                last = g.fencing_token;
                granted += 1;
                eprintln!("{:?} grant {granted} token {last}", t0.elapsed());
                let write = Sequencer { lock: "ha".into(), token: g.fencing_token, sequence: None };
                let admitted =
                    guard.admit(fence.as_ref(), &write, Policy::default()).unwrap().expect("fresh token admitted");
                fence = Some(Fence { lock: "ha".into(), high_water: admitted.high_water, sequence: admitted.sequence });
                if granted == 5 {
                    paused_token = Some(g.fencing_token);
                }
                let lease = LeaseRef { resource_id: "ha".into(), lock_token: g.lock_token };
                // A release lost to the election leaves the lease to expire; the next acquire waits.
                let _ = locks.release(lease).await;
            }
            Ok(Acquired::Refused(_)) | Err(LockError::Unavailable(_)) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(killed);
    // The holder paused before the leader change resumes: the storage's fence rejects its token.
    let stale = Sequencer { lock: "ha".into(), token: paused_token.unwrap(), sequence: None };
    let rejection = guard.admit(fence.as_ref(), &stale, Policy::default()).unwrap().unwrap_err();
    assert_eq!(rejection.reason(), "stale_token");
}

/// Index of the current leader among `members`.
async fn leader(members: &[Member]) -> usize {
    for _ in 0..100 {
        for (i, m) in members.iter().enumerate() {
            if let Ok(mut c) = etcd_client::Client::connect([m.client.as_str()], None).await
                && let Ok(s) = c.status().await
                && s.header().map(|h| h.member_id()) == Some(s.leader())
            {
                return i;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no leader");
}
