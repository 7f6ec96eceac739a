//! The embedded lock service in process: expiry, FIFO waiting, wrong and
//! expired lease ids, re-entry by lease id only, token modes, leases and
//! tokens across reopen, background grants after a kill and after a new
//! boot (and their bound's fall), the held-lease cap, and a lease journal
//! lost or damaged (refused, then recovered by waiting out every lease).

use fencing_api::wire::locks::{AcquireRequest, Grant, HeldReason, LeaseRef};
use fencing_base::telemetry::Metrics;
use fencing_locks::{
    Acquired, EmbeddedConfig, EmbeddedLocks, LockError, LockMetrics, LockService, TokenMode, ValidAcquire,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn service(cfg: EmbeddedConfig) -> EmbeddedLocks {
    EmbeddedLocks::open(cfg, LockMetrics::register(&Metrics::new())).unwrap()
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

async fn grant(s: &EmbeddedLocks, r: ValidAcquire) -> Grant {
    match s.acquire(r).await.unwrap() {
        Acquired::Granted(g) => g,
        Acquired::Refused(r) => panic!("refused: {r:?}"),
    }
}

fn lease(g: &Grant) -> LeaseRef {
    LeaseRef { resource_id: g.resource_id.clone(), lock_token: g.lock_token.clone() }
}

#[tokio::test]
async fn held_lock_is_refused_with_remaining_time_then_expires() {
    let s = service(EmbeddedConfig::default());
    let g1 = grant(&s, req("a", "c1", 200, None)).await;
    assert_eq!(g1.lock_token.len(), 32);
    match s.acquire(req("a", "c2", 200, None)).await.unwrap() {
        Acquired::Refused(r) => {
            assert_eq!(r.reason, HeldReason::Held);
            assert!(r.remaining_lease_ms > 0 && r.remaining_lease_ms <= 200, "{r:?}");
        }
        other => panic!("expected refusal, got {other:?}"),
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let g2 = grant(&s, req("a", "c2", 200, None)).await;
    assert!(g2.fencing_token > g1.fencing_token);
    assert_ne!(g2.lock_token, g1.lock_token);
    // The first lease expired: renewing or releasing it says so, and does not touch the new holder.
    assert_eq!(s.renew(lease(&g1)).await, Err(LockError::LeaseExpired));
    assert_eq!(s.release(lease(&g1)).await, Err(LockError::LeaseExpired));
    assert_eq!(s.status("a".into()).await.unwrap().client_id.as_deref(), Some("c2"));
}

#[tokio::test]
async fn wrong_lease_ids_are_refused_and_release_frees() {
    let s = service(EmbeddedConfig::default());
    let g = grant(&s, req("b", "c1", 10_000, None)).await;
    let wrong = LeaseRef { resource_id: "b".into(), lock_token: format!("{:032x}", 7u128) };
    assert_eq!(s.renew(wrong.clone()).await, Err(LockError::WrongLease));
    assert_eq!(s.release(wrong).await, Err(LockError::WrongLease));
    let unknown = LeaseRef { resource_id: "nope".into(), lock_token: g.lock_token.clone() };
    assert_eq!(s.renew(unknown).await, Err(LockError::WrongLease));
    let junk = LeaseRef { resource_id: "b".into(), lock_token: "not-hex".into() };
    assert!(matches!(s.renew(junk).await, Err(LockError::Invalid { field: "lock_token", .. })));
    let renewed = s.renew(lease(&g)).await.unwrap();
    assert_eq!(renewed.fencing_token, g.fencing_token);
    s.release(lease(&g)).await.unwrap();
    assert_eq!(s.release(lease(&g)).await, Err(LockError::WrongLease), "double release");
    assert!(!s.status("b".into()).await.unwrap().held);
    let g2 = grant(&s, req("b", "c2", 1000, None)).await;
    assert_eq!(g2.fencing_token, g.fencing_token + 1);
}

#[tokio::test]
async fn renewal_keeps_the_lease_past_its_original_expiry() {
    let s = service(EmbeddedConfig::default());
    let g = grant(&s, req("r", "c1", 150, None)).await;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(75)).await;
        s.renew(lease(&g)).await.unwrap();
    }
    assert!(matches!(s.acquire(req("r", "c2", 150, None)).await.unwrap(), Acquired::Refused(_)));
}

#[tokio::test]
async fn waiters_are_served_in_arrival_order() {
    let s = Arc::new(service(EmbeddedConfig::default()));
    let first = grant(&s, req("f", "holder", 10_000, None)).await;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..5 {
        let (s, order) = (s.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let g = grant(&s, req("f", &format!("w{i}"), 10_000, Some(5_000))).await;
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(5)).await;
            s.release(lease(&g)).await.unwrap();
            g.fencing_token
        }));
        // Arrival order is the spawn order: give each waiter time to queue.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(s.status("f".into()).await.unwrap().waiters, 5);
    // A newcomer without wait does not jump the queue even once the lock is free.
    s.release(lease(&first)).await.unwrap();
    let mut tokens = Vec::new();
    for t in tasks {
        tokens.push(t.await.unwrap());
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test]
async fn a_waiter_that_gives_up_leaves_the_queue() {
    let s = Arc::new(service(EmbeddedConfig::default()));
    let g = grant(&s, req("q", "holder", 300, None)).await;
    let t0 = Instant::now();
    assert!(matches!(s.acquire(req("q", "impatient", 1000, Some(50))).await.unwrap(), Acquired::Refused(_)));
    assert!(t0.elapsed() >= Duration::from_millis(50));
    assert_eq!(s.status("q".into()).await.unwrap().waiters, 0);
    // A patient waiter gets the lock when the lease expires, without a release.
    let g2 = grant(&s, req("q", "patient", 1000, Some(2000))).await;
    assert!(g2.fencing_token > g.fencing_token);
}

fn reenter(lock: &str, client: &str, lease: u64, lock_token: &str) -> ValidAcquire {
    ValidAcquire::new(AcquireRequest { lock_token: Some(lock_token.into()), ..raw(lock, client, lease, None) })
        .expect("a valid re-entry")
}

#[tokio::test]
async fn reentry_needs_the_lease_id_not_the_client_id() {
    let s = service(EmbeddedConfig::default());
    let g = grant(&s, req("re", "c1", 1000, None)).await;
    assert!(matches!(s.acquire(req("re", "c1", 1000, None)).await.unwrap(), Acquired::Refused(_)));
    // Without --reentrant, presenting a lease id is bad input.
    let e = s.acquire(reenter("re", "c1", 1000, &g.lock_token)).await.unwrap_err();
    assert!(matches!(e, LockError::Invalid { field: "lock_token", .. }), "{e:?}");

    let s = service(EmbeddedConfig { reentrant: true, ..EmbeddedConfig::default() });
    let g1 = grant(&s, req("re", "c1", 1000, None)).await;
    // The holder's client id alone (public in the status answer) is refused.
    assert_eq!(s.status("re".into()).await.unwrap().client_id.as_deref(), Some("c1"));
    match s.acquire(req("re", "c1", 60_000, None)).await.unwrap() {
        Acquired::Refused(r) => assert_eq!(r.reason, HeldReason::Held),
        other => panic!("re-entered by client id alone: {other:?}"),
    }
    // So is someone else's lease id, even with the holder's client id.
    let other = format!("{:032x}", 7u128);
    assert!(matches!(s.acquire(reenter("re", "c1", 60_000, &other)).await.unwrap(), Acquired::Refused(_)));
    // The lease's own id re-enters: same lease and token, the new duration.
    let g2 = grant(&s, reenter("re", "anyone", 60_000, &g1.lock_token)).await;
    assert_eq!((g1.fencing_token, &g1.lock_token), (g2.fencing_token, &g2.lock_token));
    assert!(s.status("re".into()).await.unwrap().remaining_ms.unwrap() > 30_000);
    assert!(matches!(s.acquire(req("re", "c2", 1000, None)).await.unwrap(), Acquired::Refused(_)));
}

#[tokio::test]
async fn the_held_lease_cap_refuses_one_more_and_frees_with_expiry() {
    let metrics = Metrics::new();
    let cfg = EmbeddedConfig { max_held: 3, ..EmbeddedConfig::default() };
    let s = EmbeddedLocks::open(cfg, LockMetrics::register(&metrics)).unwrap();
    let a = grant(&s, req("a", "c", 60_000, None)).await;
    grant(&s, req("b", "c", 60_000, None)).await;
    grant(&s, req("c", "c", 100, None)).await;
    let e = s.acquire(req("d", "c", 60_000, None)).await.unwrap_err();
    assert!(matches!(e, LockError::AtCapacity { limit: 3 }), "{e:?}");
    assert!(metrics.encode().contains("fencing_locks_capacity_refusals_total 1"));
    assert!(metrics.encode().contains("fencing_locks_held 3"));
    // A release makes room; so does an expiry nobody looked at.
    s.release(lease(&a)).await.unwrap();
    grant(&s, req("d", "c", 60_000, None)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    grant(&s, req("e", "c", 60_000, None)).await;
    assert_eq!(s.held(), 3);
    assert!(matches!(s.acquire(req("f", "c", 60_000, None)).await, Err(LockError::AtCapacity { .. })));
}

#[tokio::test]
async fn many_idle_names_are_forgotten_but_their_tokens_are_not() {
    let s = service(EmbeddedConfig::default());
    let first = grant(&s, req("name-0", "c", 1000, None)).await;
    s.release(lease(&first)).await.unwrap();
    for i in 1..200_000 {
        let g = grant(&s, req(&format!("name-{i}"), "c", 1000, None)).await;
        s.release(lease(&g)).await.unwrap();
    }
    assert_eq!(s.held(), 0);
    // name-0 was dropped from memory long ago; its next token is still above its last.
    let again = grant(&s, req("name-0", "c", 1000, None)).await;
    assert!(again.fencing_token > first.fencing_token);
}

#[tokio::test]
async fn per_lock_and_global_token_modes() {
    let s = service(EmbeddedConfig::default());
    let a = grant(&s, req("x", "c", 1000, None)).await.fencing_token;
    let b = grant(&s, req("y", "c", 1000, None)).await.fencing_token;
    assert_eq!((a, b), (1, 1), "per-lock sequences start independently");
    let s = service(EmbeddedConfig { token_mode: TokenMode::Global, ..EmbeddedConfig::default() });
    let a = grant(&s, req("x", "c", 1000, None)).await.fencing_token;
    let b = grant(&s, req("y", "c", 1000, None)).await.fencing_token;
    assert_eq!((a, b), (1, 2), "one counter across locks");
}

/// Opens the service again on `cfg`'s directory once the previous one let go of it.
async fn reopen(cfg: &EmbeddedConfig) -> EmbeddedLocks {
    for _ in 0..100 {
        match EmbeddedLocks::open(cfg.clone(), LockMetrics::register(&Metrics::new())) {
            Ok(s) => return s,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    panic!("the data directory stayed locked");
}

#[tokio::test]
async fn reopen_restores_held_leases_frees_released_ones_and_keeps_tokens_rising() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EmbeddedConfig { data_dir: Some(dir.path().into()), reserve_chunk: 8, ..EmbeddedConfig::default() };
    let s = service(cfg.clone());
    let mut last = 0;
    for _ in 0..20 {
        let g = grant(&s, req("k", "c", 3_600_000, None)).await;
        assert!(g.fencing_token > last);
        last = g.fencing_token;
        s.release(lease(&g)).await.unwrap();
    }
    let held = grant(&s, req("held", "holder", 60_000, None)).await;
    drop(s);
    let s = reopen(&cfg).await;
    // A released one-hour lease left nothing behind: granted at once.
    let g = grant(&s, req("k", "c", 300, None)).await;
    assert!(g.fencing_token > last, "{} after {last}", g.fencing_token);
    // The held lease is still held, refused to others, renewable and releasable by its holder.
    let status = s.status("held".into()).await.unwrap();
    assert_eq!((status.held, status.fencing_token), (true, Some(held.fencing_token)));
    assert!(matches!(s.acquire(req("held", "other", 1000, None)).await.unwrap(), Acquired::Refused(_)));
    assert_eq!(s.renew(lease(&held)).await.unwrap().fencing_token, held.fencing_token);
    s.release(lease(&held)).await.unwrap();
    let next = grant(&s, req("held", "other", 60_000, None)).await;
    assert!(next.fencing_token > held.fencing_token);
    s.release(lease(&g)).await.unwrap();
    drop(s);
    // Releases and grants after the restart are durable too.
    let s = reopen(&cfg).await;
    assert_eq!(s.held(), 1);
    assert!(!s.status("k".into()).await.unwrap().held);
    assert_eq!(s.status("held".into()).await.unwrap().fencing_token, Some(next.fencing_token));
}

/// What a start on `dir` says when it refuses: the message, or `None` if it opened.
fn refusal(cfg: &EmbeddedConfig) -> Option<String> {
    EmbeddedLocks::open(cfg.clone(), LockMetrics::register(&Metrics::new())).err().map(|e| e.to_string())
}

/// A lease journal emptied, filled with random bytes, cut short or removed
/// while a lease is held: the service refuses to start and names the
/// recovery; once recovered it grants nothing until the longest lease ever
/// granted has run out (a restart during the wait waits again), and its
/// tokens stay above every one handed out.
#[tokio::test]
async fn a_journal_that_cannot_be_read_back_whole_is_never_taken_for_no_leases() {
    use fencing_locks::{JOURNAL_FILE, recover_leases};
    type Damage = fn(&std::path::Path);
    let damages: [(&str, Damage); 4] = [
        ("emptied", |p| std::fs::write(p, b"").unwrap()),
        ("random bytes", |p| {
            let len = std::fs::metadata(p).unwrap().len();
            std::fs::write(p, (0..len).map(|_| rand::random::<u8>()).collect::<Vec<_>>()).unwrap()
        }),
        ("truncated", |p| {
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(40).unwrap();
        }),
        ("missing", |p| std::fs::remove_file(p).unwrap()),
    ];
    for (what, damage) in damages {
        let dir = tempfile::tempdir().unwrap();
        let cfg = EmbeddedConfig { data_dir: Some(dir.path().into()), ..EmbeddedConfig::default() };
        let s = service(cfg.clone());
        // A lease held for 600 ms (10 minutes in the story; short here), and a longer one granted earlier.
        let long = grant(&s, req("long", "c", 900, None)).await;
        s.release(lease(&long)).await.unwrap();
        let held = grant(&s, req("k", "holder", 600, None)).await;
        drop(s);
        damage(&dir.path().join(JOURNAL_FILE));
        let message = refusal(&cfg).unwrap_or_else(|| panic!("{what}: started on a journal it cannot read"));
        let command = format!("fencing admin recover-leases --data-dir {}", dir.path().display());
        assert!(message.contains(&command), "{what}: {message}");
        assert!(message.contains("leases of up to 900 ms"), "{what}: {message}");
        // Still refused on a second try: nothing was rewritten meanwhile.
        assert!(refusal(&cfg).is_some(), "{what}: the second start");

        let recovered = recover_leases(dir.path()).unwrap();
        assert_eq!(recovered.first_grant_waits_ms, 900, "{what}");
        assert_eq!(recovered.journal_kept_as.is_some(), what != "missing", "{what}");
        let t0 = Instant::now();
        let s = service(cfg.clone());
        match s.acquire(req("k", "second", 600, None)).await.unwrap() {
            Acquired::Refused(r) => assert_eq!(r.reason, HeldReason::GracePeriod, "{what}"),
            other => panic!("{what}: granted while the old lease may be held: {other:?}"),
        }
        // A restart during the wait waits again (the wait is in the new journal).
        drop(s);
        let s = service(cfg.clone());
        assert!(matches!(s.acquire(req("other", "c", 600, None)).await.unwrap(), Acquired::Refused(_)), "{what}");
        let g = grant(&s, req("k", "second", 600, Some(5_000))).await;
        assert!(t0.elapsed() >= Duration::from_millis(900), "{what}: granted after {:?}", t0.elapsed());
        assert!(
            g.fencing_token > held.fencing_token && g.fencing_token > long.fencing_token,
            "{what}: tokens went back"
        );
        // Once the wait has run out, the file says so: a restart grants at once.
        drop(s);
        let s = service(cfg.clone());
        assert!(matches!(s.acquire(req("fresh", "c", 100, None)).await.unwrap(), Acquired::Granted(_)), "{what}");
    }
}

/// Recovery refuses a journal that reads back whole (its leases would be
/// thrown away), and a directory whose clock is gone is refused at start:
/// its tokens would begin again from 1.
#[tokio::test]
async fn recovery_needs_a_reason_and_a_lost_clock_stops_the_service() {
    use fencing_locks::{CLOCK_FILE, recover_leases, recreate_clock};
    let dir = tempfile::tempdir().unwrap();
    let cfg = EmbeddedConfig { data_dir: Some(dir.path().into()), ..EmbeddedConfig::default() };
    let s = service(cfg.clone());
    let held = grant(&s, req("k", "c", 60_000, None)).await;
    drop(s);
    assert!(recover_leases(dir.path()).unwrap_err().to_string().contains("reads back whole"));
    std::fs::remove_file(dir.path().join(CLOCK_FILE)).unwrap();
    let message = refusal(&cfg).expect("started without its clock");
    assert!(message.contains("bump-tokens") && message.contains("--to <TOKEN> --keep-leases"), "{message}");
    recreate_clock(dir.path(), held.fencing_token + 1_000).unwrap();
    let s = service(cfg);
    assert_eq!(s.status("k".into()).await.unwrap().fencing_token, Some(held.fencing_token), "the lease kept");
    let g = grant(&s, req("new", "c", 1_000, None)).await;
    assert!(g.fencing_token > held.fencing_token + 1_000);
}

/// Copies the data directory as the kernel has it now: what a process
/// killed at this moment, or a machine that stops once it is synced, leaves.
fn snapshot(dir: &std::path::Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(dir).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.path().join(f.file_name())).unwrap();
    }
    copy
}

#[tokio::test]
async fn background_grants_are_restored_and_only_a_new_boot_waits_out_their_bound() {
    let dir = tempfile::tempdir().unwrap();
    let on = |dir: &std::path::Path, boot: &str| EmbeddedConfig {
        data_dir: Some(dir.into()),
        background_grants: true,
        boot_id: Some(boot.into()),
        // The bound stays as the grants raised it (its fall is the next test's).
        bound_decay: Duration::from_secs(3600),
        ..EmbeddedConfig::default()
    };
    let s = service(on(dir.path(), "boot-1"));
    // The first grant raises the journal's bound (and waits for its sync); the second is answered once written.
    let first = grant(&s, req("first", "c1", 1_000, None)).await;
    let second = grant(&s, req("second", "c2", 800, None)).await;
    let copy = snapshot(dir.path());
    let rebooted = snapshot(dir.path());

    // The process was killed: the same boot; everything answered is restored, free locks at once.
    let s2 = service(on(copy.path(), "boot-1"));
    assert_eq!(s2.status("second".into()).await.unwrap().fencing_token, Some(second.fencing_token));
    grant(&s2, req("fresh", "c3", 1_000, None)).await;

    // The machine restarted: every acquisition waits out the longest lease granted ahead of its sync.
    let t0 = Instant::now();
    let s3 = service(on(rebooted.path(), "boot-2"));
    match s3.acquire(req("fresh", "c3", 1_000, None)).await.unwrap() {
        Acquired::Refused(r) => assert_eq!(r.reason, HeldReason::GracePeriod),
        other => panic!("granted before the bound ran out: {other:?}"),
    }
    // Holders keep their leases meanwhile.
    assert_eq!(s3.renew(lease(&second)).await.unwrap().fencing_token, second.fencing_token);
    let g = grant(&s3, req("fresh", "c3", 1_000, Some(5_000))).await;
    assert!(t0.elapsed() >= Duration::from_millis(1_000), "granted after {:?}", t0.elapsed());
    assert!(g.fencing_token > first.fencing_token.max(second.fencing_token));

    // A clean stop marks the journal: a new boot then waits for nothing.
    drop(s);
    let s4 = reopen(&on(dir.path(), "boot-3")).await;
    grant(&s4, req("fresh", "c3", 1_000, None)).await;
}

/// The journal's bound after a power loss now: the wait a start under
/// another boot would impose, read from a copy of the data directory.
async fn grace_after_a_power_loss(dir: &std::path::Path, cfg: &EmbeddedConfig) -> Option<u64> {
    let copy = snapshot(dir);
    let s =
        service(EmbeddedConfig { data_dir: Some(copy.path().into()), boot_id: Some("boot-2".into()), ..cfg.clone() });
    match s.acquire(req("probe", "p", 1_000, None)).await.unwrap() {
        Acquired::Granted(_) => None,
        Acquired::Refused(r) if r.reason == HeldReason::GracePeriod => Some(r.remaining_lease_ms),
        Acquired::Refused(r) => panic!("refused otherwise: {r:?}"),
    }
}

#[tokio::test]
async fn one_long_background_lease_does_not_hold_up_every_lock_after_a_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = EmbeddedConfig {
        data_dir: Some(dir.path().into()),
        background_grants: true,
        boot_id: Some("boot-1".into()),
        bound_decay: Duration::from_millis(20),
        ..EmbeddedConfig::default()
    };
    let s = service(cfg.clone());
    // A one-hour lease, released at once, raises the bound to an hour (the journal's own test reads it there).
    let long = grant(&s, req("long", "c1", 3_600_000, None)).await;
    s.release(lease(&long)).await.unwrap();
    // The bound falls once nothing long is answered ahead (polled, not timed): a power loss then costs nothing.
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Some(ms) = grace_after_a_power_loss(dir.path(), &cfg).await {
        assert!(Instant::now() < deadline, "still {ms} ms to wait after a power loss");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Short leases answered ahead keep a short bound, and a held lease is restored as before.
    let short = grant(&s, req("short", "c2", 10_000, None)).await;
    let other = grant(&s, req("other", "c3", 10_000, None)).await;
    let bound = grace_after_a_power_loss(dir.path(), &cfg).await;
    assert!(bound.is_none_or(|ms| ms <= 10_000), "{bound:?}");
    let copy = snapshot(dir.path());
    let after = service(EmbeddedConfig { data_dir: Some(copy.path().into()), boot_id: Some("boot-2".into()), ..cfg });
    assert_eq!(after.status("short".into()).await.unwrap().fencing_token, Some(short.fencing_token));
    assert_eq!(after.status("other".into()).await.unwrap().fencing_token, Some(other.fencing_token));
}

#[tokio::test]
async fn invalid_requests_name_the_field() {
    let s = service(EmbeddedConfig::default());
    let e = ValidAcquire::new(raw("a", "c", 0, None)).unwrap_err();
    assert!(matches!(e, LockError::Invalid { field: "lease_duration_ms", .. }));
    let e = ValidAcquire::new(raw(&"n".repeat(300), "c", 100, None)).unwrap_err();
    assert!(matches!(e, LockError::Invalid { field: "resource_id", .. }));
    // The service never saw them: the lock is free.
    assert!(matches!(s.acquire(req("a", "c", 100, None)).await.unwrap(), Acquired::Granted(_)));
}
