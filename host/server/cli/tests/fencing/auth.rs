//! Bearer-token authentication (`fencing serve --auth-token-file`), tested both
//! ways: with the flag, every mutating request without the right token gets 401
//! (JSON naming `authorization`, a `WWW-Authenticate: Bearer` challenge) and
//! changes nothing, while the right token, reads and `/metrics` work; without
//! the flag, requests with or without any header work as before. The CLI
//! clients send the token from `--auth-token-file` or `FENCING_AUTH_TOKEN_FILE`.
//!
//! Each test runs its own `fencing serve` on a free loopback port with a
//! temporary data directory and stops it at the end.

use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const TOKEN: &str = "s3cret-Token_42-x";
const RESOURCE: &str = "storage:auth-bucket";
const FILE: &str = "/reports/q2.csv";

fn fencing() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fencing"));
    cmd.env_remove("FENCING_AUTH_TOKEN_FILE").env_remove("FENCING_SERVER");
    cmd
}

fn token_file(dir: &Path, text: &str) -> PathBuf {
    fencing_testkit::secret_file(&dir.join(format!("token-{}", text.len())), text)
}

/// `fencing serve` (storage and locks) in a fresh temporary directory, with
/// the token file when `with_auth`; the directory also holds the CLI's token file.
async fn start(with_auth: bool) -> (ServeProcess, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), &format!("{TOKEN}\n"));
    let auth = ["--auth-token-file", token.to_str().unwrap()];
    let mut server = ServeProcess::start_role("all", &dir.path().join("data"), if with_auth { &auth } else { &[] });
    server.ready().await;
    (server, dir)
}

/// POSTs `body` with an optional `Authorization` header value; returns status, challenge header, JSON.
async fn post(base: &str, path: &str, auth: Option<&str>, body: &Value) -> (u16, Option<String>, Value) {
    let mut req = reqwest::Client::new().post(format!("{base}{path}")).json(body);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let challenge = resp.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    (status, challenge, resp.json().await.unwrap_or(Value::Null))
}

fn write_body(token: u64, data: &str) -> Value {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.encode(data);
    json!({"resource_id": RESOURCE, "fencing_token": token,
           "write_payload": {"file_path": FILE, "mutation_type": "PUT", "bytes": bytes}})
}

async fn get(base: &str, path: &str) -> (u16, String) {
    let resp = reqwest::get(format!("{base}{path}")).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The stored object and fence, as the open read endpoints report them.
async fn snapshot(base: &str) -> (String, String) {
    let read = get(base, &format!("/v1/storage/read?resource_id={RESOURCE}&file_path={FILE}")).await;
    let fence = get(base, &format!("/v1/storage/fence?resource_id={RESOURCE}")).await;
    (read.1, fence.1)
}

fn assert_unauthorized(case: &str, (status, challenge, body): &(u16, Option<String>, Value)) {
    assert_eq!(*status, 401, "{case}: {body}");
    assert!(challenge.as_deref().is_some_and(|c| c.starts_with("Bearer")), "{case}: challenge {challenge:?}");
    assert_eq!(body["error"]["code"], "unauthorized", "{case}: {body}");
    assert_eq!(body["error"]["field"], "authorization", "{case}: {body}");
    assert!(body["error"]["message"].is_string(), "{case}: {body}");
}

const WRONG: [(&str, Option<&str>); 5] = [
    ("no header", None),
    ("wrong token", Some("Bearer s3cret-Token_43")),
    ("token prefix", Some("Bearer s3cret-Token_4")),
    ("other scheme", Some("Basic czNjcmV0LVRva2VuXzQy")),
    ("token without scheme", Some(TOKEN)),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_file_mutations_need_the_token_and_refusals_change_nothing() {
    let (server, dir) = start(true).await;
    let base = server.base.as_str();
    let right = format!("Bearer {TOKEN}");

    for (case, auth) in WRONG {
        let acquire = json!({"resource_id": RESOURCE, "client_id": "w1", "lease_duration_ms": 10_000});
        assert_unauthorized(&format!("acquire, {case}"), &post(base, "/v1/locks/acquire", auth, &acquire).await);
    }
    let acquire = json!({"resource_id": RESOURCE, "client_id": "w1", "lease_duration_ms": 10_000});
    let (status, _, grant) = post(base, "/v1/locks/acquire", Some(&right), &acquire).await;
    assert_eq!(status, 200, "{grant}");
    let token = grant["fencing_token"].as_u64().unwrap();
    let lease = json!({"resource_id": RESOURCE, "lock_token": grant["lock_token"]});

    let (status, _, answer) = post(base, "/v1/storage/write", Some(&right), &write_body(token, "first")).await;
    assert_eq!(status, 200, "{answer}");
    let before = snapshot(base).await;
    assert!(before.0.contains("\"size\":5"), "{before:?}");

    for (case, auth) in WRONG {
        // A higher token would move the fence if it got through.
        let refused = post(base, "/v1/storage/write", auth, &write_body(token + 1, "intruder")).await;
        assert_unauthorized(&format!("write, {case}"), &refused);
        for endpoint in ["renew", "release"] {
            let refused = post(base, &format!("/v1/locks/{endpoint}"), auth, &lease).await;
            assert_unauthorized(&format!("{endpoint}, {case}"), &refused);
        }
    }
    assert_eq!(snapshot(base).await, before, "refused writes changed stored data or the fence");
    let (status, status_body) = get(base, &format!("/v1/locks/status?resource_id={RESOURCE}")).await;
    assert_eq!(status, 200, "status stays open");
    assert!(
        status_body.contains(&format!("\"fencing_token\":{token}")),
        "lease survived refused release: {status_body}"
    );
    assert_eq!(get(base, "/metrics").await.0, 200, "metrics stay open");

    let (status, _, renewed) = post(base, "/v1/locks/renew", Some(&right), &lease).await;
    assert_eq!(status, 200, "{renewed}");
    let (status, _, answer) = post(base, "/v1/storage/write", Some(&right), &write_body(token, "second")).await;
    assert_eq!(status, 200, "{answer}");
    let (status, _, released) = post(base, "/v1/locks/release", Some(&right), &lease).await;
    assert_eq!(status, 200, "{released}");

    // The CLI clients: refused without the token (exit 1), served with it (flag or environment).
    let file = token_file(dir.path(), &format!("{TOKEN}\n"));
    let write = |extra: &[&str]| {
        let mut cmd = fencing();
        cmd.args(["write", "--server", base, "--resource", RESOURCE, "--path", FILE, "--token"])
            .arg((token + 1).to_string())
            .args(extra);
        cmd
    };
    let out = write(&["--data", "cli-refused"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unauthorized"));
    let out = write(&["--data", "cli", "--auth-token-file", file.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let out = fencing()
        .args(["lock", "acquire", RESOURCE, "--client-id", "cli", "--server", base])
        .env("FENCING_AUTH_TOKEN_FILE", &file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let out =
        fencing().args(["lock", "acquire", "storage:other", "--client-id", "cli", "--server", base]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "acquire without the token is refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"), "{}", String::from_utf8_lossy(&out.stderr));
    let (_, read) = get(base, &format!("/v1/storage/read?resource_id={RESOURCE}&file_path={FILE}")).await;
    assert!(read.contains("\"size\":3"), "the CLI's authenticated write is stored: {read}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_file_nothing_needs_a_token() {
    let (server, _dir) = start(false).await;
    let base = server.base.as_str();
    for (case, auth) in WRONG {
        let acquire =
            json!({"resource_id": RESOURCE, "client_id": case, "lease_duration_ms": 10_000, "wait_ms": 5_000});
        let (status, _, grant) = post(base, "/v1/locks/acquire", auth, &acquire).await;
        assert_eq!(status, 200, "{case}: {grant}");
        let token = grant["fencing_token"].as_u64().unwrap();
        let (status, _, answer) = post(base, "/v1/storage/write", auth, &write_body(token, case)).await;
        assert_eq!(status, 200, "{case}: {answer}");
        let lease = json!({"resource_id": RESOURCE, "lock_token": grant["lock_token"]});
        let (status, _, released) = post(base, "/v1/locks/release", auth, &lease).await;
        assert_eq!(status, 200, "{case}: {released}");
    }
}

/// Token files a server must not start with: each exits 2 naming the file
/// and what is wrong with it (and how to fix a loose one).
#[test]
fn unusable_token_files_are_bad_input() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let readable = token_file(dir.path(), &format!("{TOKEN}-readable\n"));
    std::fs::set_permissions(&readable, std::fs::Permissions::from_mode(0o644)).unwrap();
    let group = token_file(dir.path(), &format!("{TOKEN}-group\n"));
    std::fs::set_permissions(&group, std::fs::Permissions::from_mode(0o640)).unwrap();
    for (case, path, problem) in [
        ("empty", token_file(dir.path(), ""), "empty"),
        ("only a newline", token_file(dir.path(), "\n"), "empty"),
        ("missing", dir.path().join("absent"), "cannot read"),
        (
            "one character",
            token_file(dir.path(), "x\n"),
            "the token is 1 characters; a bearer token must be at least 16",
        ),
        ("readable by others", readable, "chmod 600"),
        ("readable by the group", group, "chmod 600"),
    ] {
        let out = fencing()
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.path().join("data"))
            .arg("--auth-token-file")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{case}: {stderr}");
        assert!(stderr.contains(&path.display().to_string()) && stderr.contains(problem), "{case}: {stderr}");
    }
}

/// A server listening beyond loopback without a writers' token says so.
#[test]
fn listening_beyond_loopback_without_a_token_is_warned_about() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = fencing()
        .args(["serve", "--role", "locks", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env("FENCING_LOG", "warn")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let line =
            BufReader::new(stderr).lines().map_while(Result::ok).find(|l| l.contains("listening beyond loopback"));
        let _ = tx.send(line);
    });
    let warned = rx.recv_timeout(std::time::Duration::from_secs(60));
    child.kill().unwrap();
    child.wait().unwrap();
    let warned = warned.ok().flatten().expect("no warning");
    assert!(warned.contains("--auth-token-file") && warned.contains("0.0.0.0:0"), "{warned}");
}
