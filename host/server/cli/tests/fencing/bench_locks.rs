//! The lock load generator (`fencing bench locks`) against an embedded
//! server in process: every acquisition it counts was granted by the server
//! and released again, with and without pipelining; a shared lock refuses
//! pipelining; bad flags exit 2.

use fencing_cli::bench::locks::{self, Scenario};
use fencing_server::locks::{EmbeddedConfig, EmbeddedLocks, LockMetrics};
use fencing_server::telemetry::Metrics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

async fn server() -> (SocketAddr, LockMetrics) {
    let metrics = LockMetrics::register(&Metrics::new());
    let svc = Arc::new(EmbeddedLocks::open(EmbeddedConfig::default(), metrics.clone()).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = fencing_server::http::locks::router(svc);
    tokio::spawn(fencing_server::http::serve_until(listener, app, std::future::pending()));
    (addr, metrics)
}

fn scenario(clients: usize, shared: bool, pipeline: usize) -> Scenario {
    Scenario { clients, shared, pipeline, lease_ms: 10_000, duration: Duration::from_millis(300) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_cycles_match_the_servers_grants_and_releases() {
    for (clients, shared, pipeline) in [(4, false, 1), (8, false, 4), (6, false, 4), (4, true, 1)] {
        let (addr, metrics) = server().await;
        let r = locks::run(addr, "embedded", scenario(clients, shared, pipeline)).await.unwrap();
        let case = format!("clients {clients}, shared {shared}, pipeline {pipeline}: {r:?}");
        assert!(r.acquisitions > 0, "{case}");
        assert_eq!(r.refused, 0, "{case}");
        assert_eq!((r.clients, r.pipeline), (clients, pipeline), "{case}");
        assert_eq!(metrics.acquisitions.get(), r.acquisitions, "{case}");
        assert_eq!(metrics.releases.get(), r.acquisitions, "every grant released: {case}");
        assert!(r.p50_us <= r.p99_us && r.p99_us <= r.p999_us, "{case}");
    }
}

#[tokio::test]
async fn a_shared_lock_is_not_pipelined() {
    let (addr, metrics) = server().await;
    let err = locks::run(addr, "embedded", scenario(4, true, 2)).await.unwrap_err();
    assert!(err.to_string().contains("cannot be pipelined"), "{err}");
    assert_eq!(metrics.acquisitions.get(), 0);
}

#[test]
fn bad_pipeline_flags_exit_2() {
    for args in [["--pipeline", "0"], ["--pipeline", "9"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["bench", "locks", "--clients", "8", "--seconds", "1"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--pipeline"), "{args:?}");
    }
}
