//! Requests that hold their connection for long cannot take the server
//! from everyone else, end to end against `fencing serve`: slow bodies and
//! waiting acquisitions leave a quarter of the connection cap to quick
//! requests, a body that trickles is cut by its total time, and spooled
//! bodies under a low open-file limit get 503, never 500, while ordinary
//! writes go through.

use super::http_connections::addr;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn write_head(length: usize) -> String {
    format!(
        "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// A quick request's status, or the error that kept it from an answer.
async fn quick(http: &reqwest::Client, server: &ServeProcess) -> Result<u16, String> {
    let url = format!("{}/v1/storage/fence?resource_id=quick", server.base);
    http.get(url).send().await.map(|r| r.status().as_u16()).map_err(|e| e.to_string())
}

fn client(from: Option<IpAddr>) -> reqwest::Client {
    let builder = reqwest::Client::builder().timeout(Duration::from_secs(10)).pool_max_idle_per_host(0);
    builder.local_address(from).build().unwrap()
}

/// What arrived on `conn` within `within` (the server's answer, if any).
async fn answer_within(conn: &mut TcpStream, within: Duration) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_leave_room_for_quick_requests() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--max-connections", "20", "--body-timeout", "60s"];
    let mut server = ServeProcess::start_role("storage", dir.path(), &flags);
    server.ready().await;
    // 24 clients start a body and send no more of it: more than the cap.
    let mut slow = Vec::new();
    for _ in 0..24 {
        let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
        let _ = conn.write_all(format!("{}{{", write_head(1000)).as_bytes()).await;
        slow.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let http = client(None);
    for i in 0..10 {
        assert_eq!(quick(&http, &server).await, Ok(200), "quick request {i} beside 24 slow bodies");
    }
    let mut busy = 0;
    for conn in &mut slow {
        let answer = answer_within(conn, Duration::from_millis(100)).await;
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 503"), "{answer}");
        busy += usize::from(answer.contains("server_busy"));
    }
    // 15 of the 20 connections may hold slow bodies; the others were told why not.
    assert!(busy >= 5, "{busy} slow bodies refused with server_busy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_cut_by_its_total_time() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--body-timeout", "1s", "--body-min-rate", "100"];
    let mut server = ServeProcess::start_role("storage", dir.path(), &flags);
    server.ready().await;
    let conn = TcpStream::connect(addr(&server)).await.unwrap();
    let (mut read, mut write) = conn.into_split();
    let started = Instant::now();
    // One byte every 300 ms never stalls past the 1 s body timeout.
    let trickle = tokio::spawn(async move {
        write.write_all(write_head(1000).as_bytes()).await?;
        for _ in 0..100 {
            write.write_all(b" ").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        std::io::Result::Ok(())
    });
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(8), read.read_to_end(&mut answer))
        .await
        .expect("the trickled body was not cut off")
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("body-min-rate"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(5), "cut after {:?}", started.elapsed());
    trickle.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_acquisitions_are_bounded_per_client_and_in_total() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--max-connections", "20", "--max-waiting-per-client", "4"];
    let mut server = ServeProcess::start_role("all", dir.path(), &flags);
    server.ready().await;
    let acquire = |from: IpAddr, wait_ms: u64| {
        let url = format!("{}/v1/locks/acquire", server.base);
        let body = json!({"resource_id": "held", "client_id": "c", "lease_duration_ms": 60_000, "wait_ms": wait_ms});
        let http = reqwest::Client::builder().local_address(from).build().unwrap();
        async move {
            let resp = http.post(url).json(&body).send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let first: IpAddr = [127, 0, 0, 1].into();
    assert_eq!(acquire(first, 0).await.0, 200, "the lock is held");
    // Five addresses ask for 6 waits each: 30 waiters for 15 long-hold slots,
    // 4 per address (one after another, so the refused ones close before the
    // cap counts them).
    let mut waiters = Vec::new();
    for last in 1..=5u8 {
        for _ in 0..6 {
            waiters.push(tokio::spawn(acquire([127, 0, 0, last].into(), 300_000)));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (mut refused, mut waiting) = (0, 0);
    for w in &waiters {
        if !w.is_finished() {
            waiting += 1;
        }
    }
    for w in waiters {
        if w.is_finished() {
            let (status, body) = w.await.unwrap();
            assert_eq!(status, 503, "{body}");
            assert_eq!(
                (body["error"]["code"].as_str(), body["error"]["field"].as_str()),
                (Some("too_many_waiting"), Some("wait_ms"))
            );
            refused += 1;
        } else {
            w.abort();
        }
    }
    assert_eq!((waiting, refused), (15, 15), "at most 4 per address and 15 in all wait");
    let http = client(None);
    for i in 0..10 {
        assert_eq!(quick(&http, &server).await, Ok(200), "quick request {i} beside 15 waiters");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spooled_bodies_under_a_low_fd_limit_get_503_and_writes_go_through() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_with_fd_limit("storage", dir.path(), &["--body-timeout", "60s"], 1024);
    server.ready().await;
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard.min(65_536), hard).unwrap();
    }
    // 530 clients each send 70 KB of a declared 8 MB body (past the in-memory
    // part, so each would hold a temporary file) and stop.
    let mut spoolers = Vec::new();
    let piece = vec![b' '; 70_000];
    for _ in 0..530 {
        let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
        let _ = conn.write_all(write_head(8_000_000).as_bytes()).await;
        let _ = conn.write_all(&piece).await;
        spoolers.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let http = client(None);
    for i in 0..10 {
        let body = json!({"resource_id": "real", "fencing_token": 1, "write_payload":
            {"file_path": format!("/w{i}"), "mutation_type": "PUT", "bytes": "aGk="}});
        let resp = http.post(format!("{}/v1/storage/write", server.base)).json(&body).send().await;
        let status = resp.map(|r| r.status().as_u16()).map_err(|e| e.to_string());
        assert_eq!(status, Ok(200), "write {i} beside 530 spooling clients");
    }
    let mut busy = 0;
    for conn in &mut spoolers {
        let answer = answer_within(conn, Duration::from_millis(20)).await;
        assert!(!answer.starts_with("HTTP/1.1 500"), "{answer}");
        busy += usize::from(answer.starts_with("HTTP/1.1 503"));
    }
    assert!(busy > 0, "some spooling clients were told the server is busy");
    drop(spoolers);
}

/// Starts `count` connections from `from`, each sending the head of a
/// declared 8 MB write and 70 KB of it at once, then 1,400 bytes a second
/// (above the default `--body-min-rate`) until the test ends.
async fn trickle(server: &ServeProcess, from: IpAddr, count: usize) -> Vec<tokio::task::JoinHandle<()>> {
    let mut trickles = Vec::new();
    for _ in 0..count {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(from, 0)).unwrap();
        let Ok(mut conn) = socket.connect(addr(server).parse().unwrap()).await else { continue };
        trickles.push(tokio::spawn(async move {
            let _ = conn.write_all(write_head(8_000_000).as_bytes()).await;
            let _ = conn.write_all(&vec![b' '; 70_000]).await;
            for _ in 0..120 {
                tokio::time::sleep(Duration::from_millis(250)).await;
                if conn.write_all(&[b' '; 350]).await.is_err() {
                    return;
                }
            }
        }));
    }
    trickles
}

/// 1 MB writes from another address, each admitted or not.
async fn large_writes(server: &ServeProcess, from: IpAddr, n: usize) -> Vec<Result<u16, String>> {
    use base64::Engine as _;
    let http = client(Some(from));
    let bytes = base64::engine::general_purpose::STANDARD.encode(vec![9u8; 1 << 20]);
    let mut statuses = Vec::new();
    for i in 0..n {
        let body = json!({"resource_id": "large", "fencing_token": 1, "write_payload":
            {"file_path": format!("/l{i}"), "mutation_type": "PUT", "bytes": bytes}});
        let resp = http.post(format!("{}/v1/storage/write", server.base)).json(&body).send().await;
        statuses.push(resp.map(|r| r.status().as_u16()).map_err(|e| e.to_string()));
    }
    statuses
}

/// Under a 1,024-descriptor limit (85 spool slots), 90 connections trickling
/// 8 MB bodies from one address hold at most `--max-spooling-per-client` (16)
/// slots, and from ten addresses (9 each) at most three quarters of them:
/// either way 1 MB writes from another address are admitted while they trickle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_large_bodies_leave_room_for_other_clients_large_writes() {
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard.min(65_536), hard).unwrap();
    }
    for spread in [1u8, 10] {
        let dir = tempfile::tempdir().unwrap();
        let mut server = ServeProcess::start_with_fd_limit("storage", dir.path(), &["--body-timeout", "60s"], 1024);
        server.ready().await;
        let mut trickles = Vec::new();
        for a in 0..spread {
            trickles.extend(trickle(&server, [127, 0, 1, 10 + a].into(), 90 / spread as usize).await);
        }
        assert_eq!(trickles.len(), 90);
        // Past a second: every trickling body that got a spool slot is slow now.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let statuses = large_writes(&server, [127, 0, 2, 1].into(), 6).await;
        assert!(statuses.iter().all(|s| *s == Ok(200)), "from {spread} address(es): {statuses:?}");
        for t in trickles {
            t.abort();
        }
    }
}
