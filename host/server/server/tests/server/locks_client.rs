//! `HeldLock`: background renewal keeps the token; a refused renewal or an
//! unreachable service drops it, so writers cannot use a token they lost.

use fencing_api::client::locks::{HeldLock, KeepOptions, LockClient};
use fencing_api::wire::locks::AcquireRequest;
use fencing_server::locks::{EmbeddedConfig, EmbeddedLocks, LockMetrics, LockService};
use fencing_server::telemetry::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A lock server on its own runtime thread; dropping the sender stops it and closes every connection.
fn server() -> (String, std::sync::mpsc::Sender<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let svc: Arc<dyn LockService> = Arc::new(
                EmbeddedLocks::open(EmbeddedConfig::default(), LockMetrics::register(&Metrics::new())).unwrap(),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            tokio::spawn(async move { axum::serve(listener, fencing_server::http::locks::router(svc)).await });
        });
        let _ = rx.recv();
        rt.shutdown_timeout(Duration::from_millis(100));
    });
    (format!("http://{}", addr_rx.recv().unwrap()), tx)
}

fn req(lock: &str, client: &str, lease: u64) -> AcquireRequest {
    AcquireRequest {
        resource_id: lock.into(),
        client_id: client.into(),
        lease_duration_ms: lease,
        wait_ms: None,
        lock_token: None,
    }
}

#[tokio::test]
async fn renews_in_the_background_and_releases() {
    let (base, _stop) = server();
    let client = LockClient::new(base);
    let held = HeldLock::acquire(client.clone(), req("a", "w1", 300), KeepOptions::default()).await.unwrap().unwrap();
    let token = held.token().expect("token right after acquiring");
    // Well past the lease: still held thanks to renewals, and nobody else gets it.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(held.token(), Some(token));
    let other = HeldLock::acquire(client.clone(), req("a", "w2", 300), KeepOptions::default()).await.unwrap();
    assert!(other.is_err(), "lock granted to a second client while renewed");
    held.release().await.unwrap();
    let next = HeldLock::acquire(client, req("a", "w2", 300), KeepOptions::default()).await.unwrap().unwrap();
    assert!(next.token().unwrap() > token);
}

#[tokio::test]
async fn refused_renewal_drops_the_token_at_once() {
    let (base, _stop) = server();
    let client = LockClient::new(base);
    let held = HeldLock::acquire(client.clone(), req("b", "w1", 600), KeepOptions::default()).await.unwrap().unwrap();
    assert!(held.token().is_some());
    // Someone releases the lease behind the holder's back (as an operator or a bug would).
    client.release("b", &held.grant().lock_token).await.unwrap();
    // The next renewal (at 1/3 of the lease) is refused, well before the lease would end.
    let t0 = Instant::now();
    while held.token().is_some() {
        assert!(t0.elapsed() < Duration::from_millis(450), "token still exposed after a refused renewal");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(held.lost_reason().unwrap().contains("wrong_lease"), "{:?}", held.lost_reason());
}

#[tokio::test]
async fn unreachable_service_drops_the_token_before_the_lease_ends() {
    let (base, stop) = server();
    let client = LockClient::new(base);
    let sent = Instant::now();
    let held = HeldLock::acquire(client, req("c", "w1", 400), KeepOptions::default()).await.unwrap().unwrap();
    drop(stop);
    let mut last_seen = Instant::now();
    while held.token().is_some() {
        last_seen = Instant::now();
        assert!(sent.elapsed() < Duration::from_secs(2), "token kept with the service gone");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Never exposed past the lease as measured from when the acquire request was sent.
    assert!(last_seen.duration_since(sent) < Duration::from_millis(400), "{:?}", last_seen.duration_since(sent));
    assert!(held.lost_reason().is_some());
}
