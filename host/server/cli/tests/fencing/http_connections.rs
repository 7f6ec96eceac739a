//! What bounds a connection, end to end against `fencing serve`: idle
//! connections beyond the open-file limit leave room for real clients, idle
//! and slow-head connections are closed, a stalled body gets 408, a client
//! that never reads its answer is dropped, slow readers and stalled writers
//! of large bodies hold no copy each, and SIGTERM with a stuck client
//! exits within its bound and frees the data directory.

use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) fn addr(server: &ServeProcess) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// The value of one series in `GET /metrics` (0 when absent).
async fn metric(server: &ServeProcess, series: &str) -> f64 {
    let text = reqwest::get(format!("{}/metrics", server.base)).await.unwrap().text().await.unwrap();
    text.lines().find_map(|line| line.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
}

fn closed(reason: &str) -> String {
    format!("fencing_http_connections_closed_by_server_total{{reason=\"{reason}\"}}")
}

/// Reads until the server closes the connection (EOF or reset); what it sent.
async fn until_closed(conn: &mut TcpStream, within: Duration) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(within, read).await.expect("the server did not close the connection");
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_fd_limit_leave_room_for_real_clients() {
    let dir = tempfile::tempdir().unwrap();
    // 512 descriptors leave room for 256 connections.
    let mut server = ServeProcess::start_with_fd_limit("all", dir.path(), &[], 512);
    server.ready().await;
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    if soft < 4096 {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard.min(65_536), hard).unwrap();
    }
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(TcpStream::connect(addr(&server)).await.unwrap());
    }
    let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).pool_max_idle_per_host(0).build().unwrap();
    for i in 0..20 {
        let body = json!({"resource_id": format!("busy-{i}"), "client_id": "c", "lease_duration_ms": 60_000});
        let resp = http.post(format!("{}/v1/locks/acquire", server.base)).json(&body).send().await;
        let resp = resp.unwrap_or_else(|e| panic!("request {i} not served past 1,100 idle connections: {e}"));
        assert_eq!(resp.status(), 200, "request {i}");
    }
    assert!(metric(&server, &closed("evicted")).await >= 800.0, "idle connections were evicted to make room");
    assert!(metric(&server, "fencing_http_connections_open").await <= 257.0, "never more than the cap");
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_and_slow_heads_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut server =
        ServeProcess::start_role("storage", dir.path(), &["--idle-timeout", "1s", "--header-timeout", "1s"]);
    server.ready().await;
    let mut silent = TcpStream::connect(addr(&server)).await.unwrap();
    let mut slow = TcpStream::connect(addr(&server)).await.unwrap();
    // A head trickled one line every 300 ms never completes within its timeout.
    let trickle = async {
        for line in ["GET /metrics HTTP/1.1\r\n", "Host: 127.0.0.1\r\n", "X-A: 1\r\n", "X-B: 2\r\n", "X-C: 3\r\n"] {
            if slow.write_all(line.as_bytes()).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    };
    trickle.await;
    assert_eq!(until_closed(&mut slow, Duration::from_secs(5)).await, "", "no answer to an unfinished head");
    assert_eq!(until_closed(&mut silent, Duration::from_secs(5)).await, "");
    // A kept-alive connection is closed once it idles past the timeout after its answer.
    let mut kept = TcpStream::connect(addr(&server)).await.unwrap();
    kept.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
    let answer = until_closed(&mut kept, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(metric(&server, &closed("idle_timeout")).await >= 2.0);
    assert!(metric(&server, &closed("header_timeout")).await >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_body_gets_408_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("storage", dir.path(), &["--body-timeout", "1s"]);
    server.ready().await;
    let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
    let head = "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n";
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(br#"{"resource_id":"stalled","fencing_token":5,"#).await.unwrap();
    let answer = until_closed(&mut conn, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout") && answer.contains("connection: close"), "{answer}");
    let fence: Value = reqwest::get(format!("{}/v1/storage/fence?resource_id=stalled", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(fence["fence"], Value::Null, "nothing was written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_its_answer_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("storage", dir.path(), &["--write-timeout", "1s"]);
    server.ready().await;
    // A 10 MiB object answers with 13 MiB of base64: more than both sockets buffer.
    let bytes = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![7u8; 5 << 20]);
    let http = reqwest::Client::new();
    for mutation in ["PUT", "APPEND"] {
        let write = json!({"resource_id": "big", "fencing_token": 1, "write_payload":
            {"file_path": "/big", "mutation_type": mutation, "bytes": bytes}});
        let resp = http.post(format!("{}/v1/storage/write", server.base)).json(&write).send().await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut conn = socket.connect(addr(&server).parse().unwrap()).await.unwrap();
    conn.write_all(b"GET /v1/storage/read?resource_id=big&file_path=/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&server, &closed("write_timeout")).await < 1.0 {
        assert!(Instant::now() < deadline, "the stuck reader was never dropped");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // What the server wrote before giving up is in the socket; then it ends.
    let mut sink = Vec::new();
    let rest = tokio::time::timeout(Duration::from_secs(20), conn.read_to_end(&mut sink)).await;
    assert!(rest.is_ok(), "the server closed the stuck reader's connection");
    assert!(sink.len() < 13 << 20, "the answer was cut short: {} bytes", sink.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_stuck_clients_exits_within_its_bound_and_frees_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--shutdown-timeout", "2s"];
    let mut server = ServeProcess::start_role("all", dir.path(), &extra);
    server.ready().await;
    let http = reqwest::Client::new();
    let acquire = format!("{}/v1/locks/acquire", server.base);
    let body = json!({"resource_id": "held", "client_id": "a", "lease_duration_ms": 600_000});
    let grant: Value = http.post(&acquire).json(&body).send().await.unwrap().json().await.unwrap();
    let token = grant["fencing_token"].as_u64().unwrap();
    // One acquisition waits for the held lock; one write stops halfway through its body.
    let waiting = json!({"resource_id": "held", "client_id": "b", "lease_duration_ms": 1000, "wait_ms": 300_000});
    let waiter = tokio::spawn(http.post(&acquire).json(&waiting).send());
    let mut half = TcpStream::connect(addr(&server)).await.unwrap();
    let head = "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{";
    half.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let t0 = Instant::now();
    let pid = nix::unistd::Pid::from_raw(server.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        // The bound (2 s) plus one second for the runtime, plus slack for a loaded machine.
        assert!(t0.elapsed() < Duration::from_secs(10), "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status}");
    if let Ok(answer) = waiter.await.unwrap() {
        assert_ne!(answer.status(), 200, "the waiter was never granted the held lock");
    }

    // A replacement on the same data directory starts, and the lease survived.
    let mut next = ServeProcess::start_role("all", dir.path(), &[]);
    next.ready().await;
    let status: Value =
        http.get(format!("{}/v1/locks/status?resource_id=held", next.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(status["held"], true, "{status}");
    assert_eq!(status["fencing_token"].as_u64(), Some(token));
}

/// The server's resident memory, in MiB.
fn rss_mib(server: &ServeProcess) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_of_a_large_object_share_one_copy() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("storage", dir.path(), &["--write-timeout", "60s"]);
    server.ready().await;
    let http = reqwest::Client::new();
    let piece = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![5u8; 5 << 20]);
    for (i, mutation) in std::iter::once("PUT").chain(std::iter::repeat_n("APPEND", 11)).enumerate() {
        let write = json!({"resource_id": "large", "fencing_token": 1, "write_payload":
            {"file_path": "/large", "mutation_type": mutation, "bytes": piece}});
        let resp = http.post(format!("{}/v1/storage/write", server.base)).json(&write).send().await.unwrap();
        assert_eq!(resp.status(), 200, "piece {i}");
    }
    // One full read first, so what the store caches of its own is in the baseline.
    let full: Value = http
        .get(format!("{}/v1/storage/read?resource_id=large&file_path=/large", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(full["size"], 60 << 20);
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, full["bytes"].as_str().unwrap());
    assert_eq!(decoded.unwrap(), vec![5u8; 60 << 20], "the streamed answer is the object");
    drop(full);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = rss_mib(&server);
    let mut readers = Vec::new();
    for _ in 0..16 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut conn = socket.connect(addr(&server).parse().unwrap()).await.unwrap();
        conn.write_all(b"GET /v1/storage/read?resource_id=large&file_path=/large HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        readers.push(conn);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = rss_mib(&server).saturating_sub(baseline);
    println!("16 slow readers of a 60 MiB object: server RSS {baseline} MiB -> +{held} MiB");
    // One copy is 60 MiB; a copy per reader would be 16 times that, and its base64 more.
    assert!(held < 200, "16 slow readers added {held} MiB");
    drop(readers);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_writers_of_large_bodies_hold_no_copy_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("storage", dir.path(), &["--body-timeout", "60s"]);
    server.ready().await;
    let object = |i: usize| vec![(i % 256) as u8; 11 << 19];
    let body = |i: usize| {
        let bytes = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, object(i));
        serde_json::to_vec(&json!({"resource_id": format!("slow-{i}"), "fencing_token": 1, "write_payload":
            {"file_path": "/o", "mutation_type": "PUT", "bytes": bytes}}))
        .unwrap()
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let baseline = rss_mib(&server);
    // 16 writers send all of a 7.3 MiB body but its last bytes, and stall.
    let mut writers = Vec::new();
    for i in 0..16 {
        let body = body(i);
        let mut conn = TcpStream::connect(addr(&server)).await.unwrap();
        let head = format!(
            "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        conn.write_all(&body[..body.len() - 8]).await.unwrap();
        writers.push((conn, body));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = rss_mib(&server).saturating_sub(baseline);
    println!("16 stalled writers of 7.3 MiB bodies: server RSS {baseline} MiB -> +{held} MiB");
    // Held in memory, the bodies alone would be 117 MiB (and their decoding more).
    assert!(held < 48, "16 stalled writers added {held} MiB");
    // Each finishes: admitted whole, as if nothing had been spooled.
    for (conn, body) in &mut writers {
        conn.write_all(&body[body.len() - 8..]).await.unwrap();
    }
    for (i, (conn, _)) in writers.iter_mut().enumerate() {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") || !answer.ends_with(b"}") {
            let n = tokio::time::timeout(Duration::from_secs(30), conn.read(&mut buf)).await.unwrap().unwrap();
            assert!(n > 0, "writer {i}: closed before its answer");
            answer.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "writer {i}: {text}");
    }
    for i in [0, 15] {
        let read: Value = reqwest::get(format!("{}/v1/storage/read?resource_id=slow-{i}&file_path=/o", server.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, read["bytes"].as_str().unwrap());
        assert_eq!(bytes.unwrap(), object(i), "writer {i}'s object");
    }
}
