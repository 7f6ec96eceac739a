//! Browsers and loose edges, end to end against `fencing serve`: a page on
//! another origin cannot write, a rebound name cannot read, framing the
//! server would misread is refused, query strings and names follow one
//! strict rule, and `--auth-reads` closes reads. Every refusal is a 4xx JSON
//! error naming the field, and stored data is unchanged afterwards.

use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RESOURCE: &str = "storage:edges";

async fn start(extra: &[&str]) -> (ServeProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut server = ServeProcess::start_role("all", dir.path(), extra);
    server.ready().await;
    (server, dir)
}

/// Sends raw bytes on a new connection; the status and the JSON body.
async fn raw(server: &ServeProcess, request: &str) -> (u16, Value) {
    let mut conn = tokio::net::TcpStream::connect(server.base.trim_start_matches("http://")).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer);
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn assert_error(case: &str, (status, body): (u16, Value), want: u16, code: &str, field: &str) {
    assert_eq!(status, want, "{case}: {body}");
    assert_eq!(body["error"]["code"], code, "{case}: {body}");
    assert_eq!(body["error"]["field"], field, "{case}: {body}");
}

async fn answer(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn write(token: u64, bytes: &str) -> Value {
    json!({"resource_id": RESOURCE, "fencing_token": token,
        "write_payload": {"file_path": "/f", "mutation_type": "PUT", "bytes": bytes}})
}

async fn stored(http: &reqwest::Client, base: &str) -> Value {
    let url = format!("{base}/v1/storage/read?resource_id={RESOURCE}&file_path=/f");
    http.get(url).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browsers_cannot_write_across_origins_or_read_through_a_rebound_name() {
    let (server, _dir) = start(&["--allowed-origins", "https://app.example"]).await;
    let base = server.base.as_str();
    let http = reqwest::Client::new();
    let url = format!("{base}/v1/storage/write");
    assert_eq!(http.post(&url).json(&write(5, "Z29vZA==")).send().await.unwrap().status(), 200);
    let before = stored(&http, base).await;

    // What a cross-origin <form> or a no-preflight fetch can send.
    let plain = http.post(&url).header("content-type", "text/plain").body(write(6, "YmFk").to_string());
    assert_error(
        "text/plain",
        answer(plain.send().await.unwrap()).await,
        415,
        "unsupported_media_type",
        "content-type",
    );
    let form = http.post(&url).header("content-type", "application/x-www-form-urlencoded").body("a=b");
    assert_error("form", answer(form.send().await.unwrap()).await, 415, "unsupported_media_type", "content-type");
    let foreign = http.post(&url).header("origin", "http://evil.example").json(&write(7, "YmFk"));
    assert_error("foreign origin", answer(foreign.send().await.unwrap()).await, 403, "cross_origin", "origin");
    let allowed = http.post(&url).header("origin", "https://app.example").json(&write(8, "b2s="));
    assert_eq!(allowed.send().await.unwrap().status(), 200, "an allowed origin writes");
    let after_allowed = stored(&http, base).await;
    assert_eq!(after_allowed["bytes"], "b2s=");

    // DNS rebinding: the page's own name arrives as Host, for reads and metrics alike.
    for path in [format!("/v1/storage/read?resource_id={RESOURCE}&file_path=/f"), "/metrics".into()] {
        let request = format!("GET {path} HTTP/1.1\r\nHost: rebind.example:7070\r\nConnection: close\r\n\r\n");
        assert_error(&path, raw(&server, &request).await, 421, "host_not_allowed", "host");
    }
    let request = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(&server, request).await.0, 200, "localhost is served");

    // Hosts two readers could disagree about: two Host headers, an empty one, an absolute target elsewhere.
    let port = base.rsplit_once(':').unwrap().1;
    let ambiguous = [
        format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.example\r\nConnection: close\r\n\r\n"),
        "GET /metrics HTTP/1.1\r\nHost: \r\nConnection: close\r\n\r\n".into(),
        format!("GET http://evil.example/metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
    ];
    for request in &ambiguous {
        assert_error(request, raw(&server, request).await, 400, "invalid_field", "host");
    }
    assert_eq!(stored(&http, base).await, after_allowed, "refused requests changed nothing");
    // The listen address is the same origin whether or not the Host carries the port.
    let body = write(9, "c2FtZQ==").to_string();
    let same = format!(
        "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw(&server, &same).await.0, 200, "a page at the listen address writes");
    assert_eq!(stored(&http, base).await["bytes"], "c2FtZQ==");
    assert_ne!(before, after_allowed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_hosts_are_served_only_when_allowed() {
    let (server, _dir) = start(&["--allowed-hosts", "fencing.internal"]).await;
    let ok = "GET /metrics HTTP/1.1\r\nHost: fencing.internal:7070\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(&server, ok).await.0, 200);
    let other = "GET /metrics HTTP/1.1\r\nHost: other.internal\r\nConnection: close\r\n\r\n";
    assert_error("other name", raw(&server, other).await, 421, "host_not_allowed", "host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_edges_get_a_clear_4xx() {
    let (server, _dir) = start(&[]).await;
    let base = server.base.as_str();
    let http = reqwest::Client::new();
    assert_eq!(
        http.post(format!("{base}/v1/storage/write")).json(&write(5, "Z29vZA==")).send().await.unwrap().status(),
        200
    );
    let before = stored(&http, base).await;

    let no_host = "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n";
    assert_error("no Host", raw(&server, no_host).await, 400, "missing_host", "host");
    let body = write(9, "YmFk").to_string();
    let gzip = format!(
        "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: gzip, chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    assert_error("gzip, chunked", raw(&server, &gzip).await, 400, "invalid_field", "transfer-encoding");
    let encoded = format!(
        "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    assert_error("content-encoding", raw(&server, &encoded).await, 415, "unsupported_encoding", "content-encoding");

    for (case, query, field) in [
        ("repeated key", format!("resource_id={RESOURCE}&resource_id=other&file_path=/f"), "resource_id"),
        ("bad escape", format!("resource_id={RESOURCE}&file_path=%2"), "file_path"),
        ("not UTF-8", format!("resource_id={RESOURCE}&file_path=%C0%AF"), "file_path"),
        ("unknown key", format!("resource_id={RESOURCE}&file_path=/f&fle_path=/g"), "fle_path"),
    ] {
        let resp = http.get(format!("{base}/v1/storage/read?{query}")).send().await.unwrap();
        assert_error(case, answer(resp).await, 400, "invalid_field", field);
    }
    let resp = http.get(format!("{base}/v1/locks/status?resource_id=a&resource_id=b")).send().await.unwrap();
    assert_error("status repeated key", answer(resp).await, 400, "invalid_field", "resource_id");
    // Routes that read no query refuse one, as the GET routes do.
    let resp = http.post(format!("{base}/v1/storage/write?dry_run=1")).json(&write(12, "YmFk")).send().await.unwrap();
    assert_error("query on a POST", answer(resp).await, 400, "invalid_field", "dry_run");
    for path in ["/metrics?x=1", "/openapi.json?format=yaml"] {
        let resp = http.get(format!("{base}{path}")).send().await.unwrap();
        let field = if path.starts_with("/metrics") { "x" } else { "format" };
        assert_error(path, answer(resp).await, 400, "invalid_field", field);
    }
    // A body is an object: an array of the fields in order is refused, at the top or inside.
    let positional = json!([RESOURCE, 13, {"file_path": "/f", "mutation_type": "PUT", "bytes": "YmFk"}]);
    let resp = http.post(format!("{base}/v1/storage/write")).json(&positional).send().await.unwrap();
    assert_error("array body", answer(resp).await, 400, "invalid_field", "body");
    let mut nested = write(13, "YmFk");
    nested["write_payload"] = json!(["/f", "PUT", "YmFk"]);
    let resp = http.post(format!("{base}/v1/storage/write")).json(&nested).send().await.unwrap();
    assert_error("array payload", answer(resp).await, 400, "invalid_field", "body");

    // A misspelt field is refused, not ignored (an ignored `sequnce` would write unsequenced).
    let mut misspelt = write(10, "YmFk");
    misspelt["sequnce"] = json!(3);
    let resp = http.post(format!("{base}/v1/storage/write")).json(&misspelt).send().await.unwrap();
    let (status, body) = answer(resp).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("sequnce"), "{body}");

    // Names follow one rule in both APIs: no surrounding whitespace.
    let padded = json!({"resource_id": " storage:edges", "client_id": "c", "lease_duration_ms": 1000});
    let resp = http.post(format!("{base}/v1/locks/acquire")).json(&padded).send().await.unwrap();
    assert_error("padded lock name", answer(resp).await, 400, "invalid_field", "resource_id");
    let resp = http.get(format!("{base}/v1/locks/status?resource_id=a%20")).send().await.unwrap();
    assert_error("padded status name", answer(resp).await, 400, "invalid_field", "resource_id");
    let mut padded_write = write(11, "YmFk");
    padded_write["resource_id"] = json!("storage:edges ");
    let resp = http.post(format!("{base}/v1/storage/write")).json(&padded_write).send().await.unwrap();
    assert_error("padded storage name", answer(resp).await, 400, "invalid_field", "resource_id");

    assert_eq!(stored(&http, base).await, before, "refused requests changed nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_reads_puts_reads_and_metrics_behind_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = fencing_testkit::secret_file(&dir.path().join("token"), "s3cret-0123456789\n");
    let data = dir.path().join("data");
    let token_arg = token_file.to_str().unwrap();
    let mut server = ServeProcess::start_role("all", &data, &["--auth-token-file", token_arg, "--auth-reads"]);
    // Readiness is probed through /metrics, which now needs the token: wait for the 401.
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while http.get(format!("{}/metrics", server.base)).send().await.is_err() {
        assert!(std::time::Instant::now() < deadline, "server did not start");
        assert!(server.child.try_wait().unwrap().is_none(), "server exited");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let base = server.base.as_str();
    for path in ["/metrics".to_owned(), format!("/v1/storage/fence?resource_id={RESOURCE}")] {
        let resp = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_error(&path, answer(resp).await, 401, "unauthorized", "authorization");
        let resp = http.get(format!("{base}{path}")).bearer_auth("s3cret-0123456789").send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path} with the token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heads_refused_below_the_router_get_the_json_error_too() {
    let (server, _dir) = start(&[]).await;
    let te = "POST /v1/storage/write HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Transfer-Encoding: identity\r\n\r\n{}";
    assert_error("Transfer-Encoding: identity", raw(&server, te).await, 400, "malformed_request", "head");
    let long_uri =
        format!("GET /v1/storage/fence?resource_id={} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "u".repeat(70_000));
    assert_error("a 70,000-byte URI", raw(&server, &long_uri).await, 414, "uri_too_long", "uri");
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let headers = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{many}\r\n");
    assert_error("200 headers", raw(&server, &headers).await, 431, "headers_too_large", "headers");
    // A routed 400 on the same server keeps its own body.
    let routed = "GET /v1/storage/fence HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(&server, routed).await.1["error"]["field"], "resource_id");
}
