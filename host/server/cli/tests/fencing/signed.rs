//! Signed tokens through `fencing serve`: keys from `fencing admin keygen`,
//! grants carrying the lock service's proof, and the storage refusing a
//! write whose proof does not hold, with its own reason, before its fence.

use base64::Engine as _;
use fencing_testkit::fencing_bin;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

fn keygen(out: &Path, id: u32, algorithm: &str) -> Value {
    let o = Command::new(fencing_bin())
        .args(["admin", "keygen", "--id", &id.to_string(), "--algorithm", algorithm, "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

async fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let resp = reqwest::Client::new().post(format!("{base}{path}")).json(&body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

async fn write(base: &str, token: u64, proof: Option<&str>) -> (u16, Value) {
    let mut body = json!({"resource_id": "orders", "fencing_token": token,
        "write_payload": {"file_path": "/invoice", "mutation_type": "PUT",
            "bytes": base64::engine::general_purpose::STANDARD.encode(format!("by {token}"))}});
    if let Some(proof) = proof {
        body["fencing_proof"] = proof.into();
    }
    post(base, "/v1/storage/write", body).await
}

async fn acquire(base: &str, lease_ms: u64) -> Value {
    let body = json!({"resource_id": "orders", "client_id": "c", "lease_duration_ms": lease_ms, "wait_ms": 5000});
    let (status, grant) = post(base, "/v1/locks/acquire", body).await;
    assert_eq!(status, 200, "{grant}");
    grant
}

#[tokio::test]
async fn forged_tokens_are_refused_and_the_paused_holder_still_loses() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signing.key");
    let made = keygen(&key, 1, "ed25519");
    assert_eq!(made["algorithm"], "ed25519");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the signing key is readable by its owner only");
    let public = dir.path().join("signing.key.pub");
    let flags = ["--signing-key", key.to_str().unwrap(), "--verify-keys", public.to_str().unwrap()];
    let mut server = ServeProcess::start_role("all", &dir.path().join("data"), &flags);
    server.ready().await;
    let base = server.base.clone();

    // A holder's grant carries a proof; its write with it is admitted.
    let a = acquire(&base, 300).await;
    let (token_a, proof_a) = (a["fencing_token"].as_u64().unwrap(), a["fencing_proof"].as_str().unwrap().to_owned());
    assert_eq!(proof_a.len(), 2 * 69, "version, key id, Ed25519 signature");
    assert_eq!(write(&base, token_a, Some(&proof_a)).await.0, 200);

    // A forger presents the mark + 1: without a proof, with A's proof, with made-up bytes.
    let forged = token_a + 1;
    let (st, body) = write(&base, forged, None).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("proof_missing")), "{body}");
    assert_eq!(write(&base, forged, Some(&proof_a)).await.1["reason"], "proof_bad", "a proof is for one token");
    let mut flipped = proof_a.clone().into_bytes();
    flipped[40] = if flipped[40] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    assert_eq!(write(&base, token_a, Some(&flipped)).await.1["reason"], "proof_bad");
    assert_eq!(write(&base, forged, Some(&proof_a[..20])).await.1["reason"], "proof_malformed");
    let (st, body) = write(&base, u64::MAX, None).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("proof_missing")), "named as forged, not as too far: {body}");
    let (st, body) = write(&base, forged, Some("xyz")).await;
    assert_eq!((st, body["error"]["field"].as_str()), (400, Some("fencing_proof")), "{body}");
    let fence: Value =
        reqwest::get(format!("{base}/v1/storage/fence?resource_id=orders")).await.unwrap().json().await.unwrap();
    assert_eq!(fence["high_water"], token_a, "no forged write moved the mark");

    // The GC-pause story, signed: A pauses past its lease, B writes, A's real proof does not help it.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let b = acquire(&base, 10_000).await;
    let token_b = b["fencing_token"].as_u64().unwrap();
    assert!(token_b > token_a);
    assert_eq!(write(&base, token_b, b["fencing_proof"].as_str()).await.0, 200);
    let (st, body) = write(&base, token_a, Some(&proof_a)).await;
    assert_eq!((st, body["reason"].as_str(), body["high_water"].as_u64()), (409, Some("stale_token"), Some(token_b)));

    // A renewal repeats the grant's proof.
    let lease = json!({"resource_id": "orders", "lock_token": b["lock_token"]});
    let (st, renewed) = post(&base, "/v1/locks/renew", lease).await;
    assert_eq!((st, renewed["fencing_proof"].as_str()), (200, b["fencing_proof"].as_str()));
    server.kill9();
}

#[tokio::test]
async fn a_rotation_takes_the_new_key_beside_the_old_then_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (dir.path().join("old.key"), dir.path().join("new.key"));
    keygen(&old, 1, "ed25519");
    let made = keygen(&new, 2, "hmac-sha256");
    // An HMAC secret has nothing public: no .pub; the verify file is the secret itself.
    assert!(!Path::new(&format!("{}.pub", new.display())).exists(), "an HMAC secret in a .pub");
    assert_eq!(made["verify_keys"], json!(new));
    let text = |p: &Path| std::fs::read_to_string(p).unwrap();
    // The verify file now holds a secret: only its owner may read it.
    let both = fencing_testkit::secret_file(
        &dir.path().join("both.keys"),
        &(text(Path::new(&format!("{}.pub", old.display()))) + &text(&new)),
    );
    let data = dir.path().join("data");
    let serve = |signing: &Path, verify: &Path| {
        ServeProcess::start_role(
            "all",
            &data,
            &["--signing-key", signing.to_str().unwrap(), "--verify-keys", verify.to_str().unwrap()],
        )
    };

    let mut server = serve(&old, &both);
    server.ready().await;
    let by_old = acquire(&server.base, 60_000).await;
    let old_proof = by_old["fencing_proof"].as_str().unwrap().to_owned();
    assert_eq!(write(&server.base, by_old["fencing_token"].as_u64().unwrap(), Some(&old_proof)).await.0, 200);
    server.kill9();

    // The lock service signs with the new key; the storage trusts the new key alone.
    let mut server = serve(&new, &new);
    server.ready().await;
    let token = by_old["fencing_token"].as_u64().unwrap();
    let (st, body) = write(&server.base, token, Some(&old_proof)).await;
    assert_eq!((st, body["reason"].as_str()), (409, Some("proof_unknown_key")), "{body}");
    server.kill9();
}

/// Key files and flags that would start a server that protects nothing, or
/// refuses every honest writer: each exits 2 naming the file and the problem.
#[test]
fn bad_keys_and_contradictory_flags_exit_2_naming_why() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    keygen(&key, 7, "ed25519");
    let again = Command::new(fencing_bin()).args(["admin", "keygen", "--id", "8", "--out"]).arg(&key).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwritten"));
    let other = dir.path().join("other");
    keygen(&other, 7, "ed25519");
    let hmac = dir.path().join("hm.key");
    keygen(&hmac, 9, "hmac-sha256");
    let bad = dir.path().join("bad.pub");
    std::fs::write(&bad, "7 ed25519 00ff\n").unwrap();
    let short = fencing_testkit::secret_file(&dir.path().join("short.key"), "7 ed25519 00ff\n");
    let degenerate = dir.path().join("ff.pub");
    std::fs::write(&degenerate, format!("7 ed25519 {}\n", "ff".repeat(32))).unwrap();
    let loose = dir.path().join("loose.key");
    std::fs::copy(&key, &loose).unwrap();
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
    let shared = dir.path().join("shared-hmac.keys");
    std::fs::copy(&hmac, &shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
    let data = dir.path().join("data");
    let serve = |extra: &[&str]| {
        let o = Command::new(fencing_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (key_pub, other_pub) = (format!("{}.pub", key.display()), format!("{}.pub", other.display()));
    let p = |p: &Path| p.display().to_string();
    let key = p(&key);
    let cases: Vec<(Vec<String>, String)> = vec![
        (vec!["--verify-keys".into(), p(&bad)], "verifier key 7 is not a key of its algorithm".into()),
        (vec!["--verify-keys".into(), "/nonexistent/keys".into()], "/nonexistent/keys".into()),
        (vec!["--signing-key".into(), p(&short)], "32 bytes, not 2".into()),
        (vec!["--signing-key".into(), key_pub.clone()], format!("{key_pub}: a .pub file holds verify keys")),
        (
            vec!["--signing-key".into(), key.clone(), "--verify-keys".into(), other_pub.clone()],
            format!("{key}: {other_pub} holds another key under this signing key's id 7"),
        ),
        (vec!["--verify-keys".into(), p(&degenerate)], format!("{}: key 7:", p(&degenerate))),
        (vec!["--signing-key".into(), p(&loose)], format!("{}: holds a signing key", p(&loose))),
        (vec!["--verify-keys".into(), p(&shared)], format!("{}: holds an HMAC secret", p(&shared))),
        (
            vec!["--role".into(), "storage".into(), "--signing-key".into(), key.clone()],
            "needs a role with the lock service".into(),
        ),
        (
            vec!["--role".into(), "locks".into(), "--verify-keys".into(), key.clone()],
            "needs a role with the storage".into(),
        ),
        (vec!["--no-fencing".into(), "--verify-keys".into(), key.clone()], "contradict".into()),
    ];
    for (extra, says) in cases {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (code, stderr) = serve(&extra);
        assert_eq!(code, Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(&says), "{extra:?}: {stderr}");
    }
}

#[tokio::test]
async fn with_etcd_granting_the_server_signs_what_etcd_grants() {
    let dir = tempfile::tempdir().unwrap();
    let members = fencing_testkit::etcd::cluster(&dir.path().join("etcd"), 1);
    let etcd = members[0].client.clone();
    let started = std::time::Instant::now();
    while !reqwest::get(format!("{etcd}/health")).await.is_ok_and(|r| r.status().is_success()) {
        assert!(started.elapsed().as_secs() < 20, "etcd did not come up");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let key = dir.path().join("signing.key");
    keygen(&key, 2, "hmac-sha256");
    // HMAC: the secret signs and checks; there is no .pub.
    let flags = ["--locks", "etcd", "--etcd-endpoints", &etcd, "--signing-key", key.to_str().unwrap()];
    let flags = [&flags[..], &["--verify-keys", key.to_str().unwrap()]].concat();
    let mut server = ServeProcess::start_role("all", &dir.path().join("data"), &flags);
    server.ready().await;
    let base = server.base.clone();

    // etcd grants the token (its revision); the server proves it.
    let a = acquire(&base, 2000).await;
    let (token, proof) = (a["fencing_token"].as_u64().unwrap(), a["fencing_proof"].as_str().unwrap().to_owned());
    assert_eq!(proof.len(), 2 * 37, "version, key id, HMAC-SHA256 tag");
    assert_eq!(write(&base, token, Some(&proof)).await.0, 200);
    assert_eq!(write(&base, token + 1, None).await.1["reason"], "proof_missing");
    assert_eq!(write(&base, token + 1, Some(&proof)).await.1["reason"], "proof_bad");
    let (st, renewed) =
        post(&base, "/v1/locks/renew", json!({"resource_id": "orders", "lock_token": a["lock_token"]})).await;
    assert_eq!((st, renewed["fencing_proof"].as_str()), (200, Some(proof.as_str())));
    server.kill9();
}
