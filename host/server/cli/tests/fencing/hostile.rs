//! Hostile clients against a `fencing serve` with its defaults: a runaway
//! first token is refused (the default `--max-token-advance` bounds first
//! writes from 0), and a resource name built to look like log fields stays
//! one quoted value in the refusal's log line.

use base64::Engine as _;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};

async fn write(base: &str, resource: &str, token: u64) -> (u16, Value) {
    let body = json!({"resource_id": resource, "lock_id": "l", "fencing_token": token,
        "write_payload": {"file_path": "/f", "mutation_type": "PUT",
            "bytes": base64::engine::general_purpose::STANDARD.encode("x")}});
    let resp = reqwest::Client::new().post(format!("{base}/v1/storage/write")).json(&body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn defaults_bound_first_tokens_and_log_client_names_as_quoted_values() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let mut server = ServeProcess::start_logging(&dir.path().join("data"), &[], &log);
    server.ready().await;
    let base = server.base.clone();

    // The default bound is 2^40: 2^64-1 as a first token would brick the resource; 2^40 itself is fine.
    let (st, body) = write(&base, "runaway", u64::MAX).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("token_too_far_ahead")), "{body}");
    assert_eq!(body["max_token_advance"], json!(1u64 << 40));
    assert_eq!(write(&base, "runaway", 1 << 40).await.0, 200);
    assert_eq!(write(&base, "runaway", (1 << 41) + 1).await.0, 409, "2^40 above the mark is the limit");

    // A name that looks like more fields: the refusal's log line holds it as one escaped string.
    let forged = r#"acct presented=99 reason="forged""#;
    assert_eq!(write(&base, forged, 34).await.0, 200);
    assert_eq!(write(&base, forged, 33).await.0, 409);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if let Some(line) = text.lines().find(|l| l.contains("write rejected by the fence")) {
            break line.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "no refusal logged: {text}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(line.contains(r#"resource="acct presented=99 reason=\"forged\"""#), "{line}");
    let outside_the_name = line.replacen(r#""acct presented=99 reason=\"forged\"""#, "NAME", 1);
    assert_eq!(outside_the_name.matches("presented=").count(), 1, "one real presented field: {line}");
    assert!(outside_the_name.contains("presented=33"), "{line}");
    assert!(!outside_the_name.contains("forged"), "{line}");
    server.kill9();
}
