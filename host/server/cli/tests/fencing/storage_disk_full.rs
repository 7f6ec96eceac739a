//! A full disk, end to end: `fencing serve` on a 64 MiB tmpfs is filled
//! until writes get 507, everything acknowledged reads back intact and the
//! refused write left nothing, reads keep working, and writes are accepted
//! again without a restart, both when space is freed outside the store and
//! when clients delete objects; a lock service asked to start on the full
//! disk says why it cannot.
//!
//! Mounting a tmpfs needs root; as another user the test says so and passes
//! without running (CI runs as root).

use base64::Engine;
use fencing_testkit::server::ServeProcess;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmpfs mounted for the test, unmounted on drop (before its directory goes).
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        Tmpfs(dir)
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

fn object(i: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(vec![i as u8; 1 << 20])
}

async fn put(http: &reqwest::Client, base: &str, path: &str, mutation: &str, bytes: Option<String>) -> (u16, Value) {
    let mut payload = json!({"file_path": path, "mutation_type": mutation});
    if let Some(b) = bytes {
        payload["bytes"] = json!(b);
    }
    let body = json!({"resource_id": "full", "fencing_token": 1, "write_payload": payload});
    let resp = http.post(format!("{base}/v1/storage/write")).json(&body).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

async fn read(http: &reqwest::Client, base: &str, path: &str) -> (u16, Value) {
    let resp = http.get(format!("{base}/v1/storage/read?resource_id=full&file_path={path}")).send().await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap_or(Value::Null))
}

/// Writes 1 MiB objects from `first` until one gets 507; how many were acknowledged.
async fn fill(http: &reqwest::Client, base: &str, first: usize) -> usize {
    for i in first..first + 80 {
        let (status, body) = put(http, base, &format!("/o{i}"), "PUT", Some(object(i))).await;
        match status {
            200 => {}
            507 => {
                assert_eq!(body["error"]["code"], "insufficient_storage", "{body}");
                let (status, _) = read(http, base, &format!("/o{i}")).await;
                assert_eq!(status, 404, "the refused write left nothing");
                return i;
            }
            other => panic!("write {i}: {other} {body}"),
        }
    }
    panic!("64 MiB never filled");
}

/// Polls a small write until it is accepted again (the reserve is retried once a second).
async fn writes_resume(http: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, body) = put(http, base, "/small", "PUT", Some("eA==".into())).await;
        if status == 200 {
            return;
        }
        assert_eq!(status, 507, "{body}");
        assert!(Instant::now() < deadline, "writes never resumed: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn all_intact(http: &reqwest::Client, base: &str, objects: impl Iterator<Item = usize>) {
    for i in objects {
        let (status, body) = read(http, base, &format!("/o{i}")).await;
        assert_eq!(status, 200, "acknowledged object {i}: {body}");
        assert_eq!(body["bytes"].as_str(), Some(object(i).as_str()), "object {i} intact");
    }
}

/// A file of up to `mib` MiB beside the store (as much as fits).
fn filler(dir: &Path, mib: usize) -> PathBuf {
    use std::io::Write;
    let path = dir.join(format!("filler-{mib}"));
    let mut file = std::fs::File::create(&path).unwrap();
    for _ in 0..mib {
        if file.write_all(&[1u8; 1 << 20]).is_err() {
            break;
        }
    }
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_with_507_loses_nothing_and_recovers_without_a_restart() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let fs = Tmpfs::mount("64m");
    let mut server = ServeProcess::start_role("storage", &fs.path().join("data"), &[]);
    server.ready().await;
    let http = reqwest::Client::new();
    let base = server.base.clone();

    // Space taken outside the store, then given back.
    let outside = filler(fs.path(), 16);
    let n = fill(&http, &base, 0).await;
    assert!(n > 0);
    all_intact(&http, &base, 0..n).await;
    std::fs::remove_file(outside).unwrap();
    writes_resume(&http, &base).await;

    // The store's own objects fill it; deleting them gives the space back.
    let m = fill(&http, &base, n).await;
    all_intact(&http, &base, 0..m).await;
    for i in 0..m {
        let (status, body) = put(&http, &base, &format!("/o{i}"), "DELETE", None).await;
        assert_eq!(status, 200, "DELETE is accepted on a full disk: {body}");
    }
    writes_resume(&http, &base).await;
    let (status, body) = put(&http, &base, "/after", "PUT", Some(object(7))).await;
    assert_eq!(status, 200, "{body}");

    // Everything acknowledged survives a restart.
    server.kill9();
    let mut server = ServeProcess::start_role("storage", &fs.path().join("data"), &[]);
    server.ready().await;
    let (status, body) = read(&http, &server.base, "/after").await;
    assert_eq!((status, body["bytes"].as_str()), (200, Some(object(7).as_str())));
    assert_eq!(read(&http, &server.base, "/o0").await.0, 404, "deleted stays deleted");
    drop(server);

    // A lock service cannot start on a full disk, and says exactly why.
    std::fs::create_dir(fs.path().join("locks")).unwrap();
    let full = filler(fs.path(), 64);
    let start_locks = || {
        let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
            .args(["serve", "--role", "locks", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(fs.path().join("locks"))
            .env("FENCING_LOG", "error")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = start_locks();
    assert!(stderr.contains("No space left on device") && stderr.contains("free some space"), "{stderr}");

    // With room for the clock but not for the journal's rewrite, the start says what the journal needs.
    std::fs::remove_file(full).unwrap();
    let _most = filler_bytes(fs.path(), free_bytes(fs.path()) - (1 << 20));
    let stderr = start_locks();
    assert!(stderr.contains("needs about 4 MiB free"), "the start says what it needs: {stderr}");
    assert!(!fs.path().join("locks/locks-leases.tmp").exists(), "the failed rewrite left its temporary file");
}

/// Bytes free on the file system of `path`, as `df` reports them.
fn free_bytes(path: &Path) -> u64 {
    let out = Command::new("df").args(["--output=avail", "-B1"]).arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
}

/// A file of `bytes` bytes (written, so the blocks are taken).
fn filler_bytes(dir: &Path, bytes: u64) -> PathBuf {
    let path = dir.join(format!("filler-{bytes}b"));
    std::fs::write(&path, vec![1u8; bytes as usize]).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_roles_start_on_a_nearly_full_disk_and_clean_what_a_failed_rewrite_left() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting a tmpfs needs root");
        return;
    }
    let fs = Tmpfs::mount("64m");
    let data = fs.path().join("data");
    let mut server = ServeProcess::start_role("all", &data, &[]);
    server.ready().await;
    let http = reqwest::Client::new();
    // 17 MiB held outside, then the store fills the rest: it gives its space reserve back.
    let outside = filler(fs.path(), 17);
    let n = fill(&http, &server.base, 0).await;
    assert!(n > 0);
    server.kill9();
    // What a rewrite that ran out of space leaves behind (zero-byte temporary files).
    for leftover in ["locks-leases.tmp", "locks-clock.tmp"] {
        std::fs::write(data.join(leftover), b"").unwrap();
    }
    // About 17 MiB free: the store takes its 16 MiB reserve back only after the
    // lock service has rewritten its journal, so both start.
    std::fs::remove_file(outside).unwrap();
    let free = free_bytes(fs.path());
    assert!(free > 17 << 20, "{free} bytes free");
    let _rest = filler_bytes(fs.path(), free - (17 << 20));
    let mut server = ServeProcess::start_role("all", &data, &[]);
    server.ready().await;
    for leftover in ["locks-leases.tmp", "locks-clock.tmp"] {
        assert!(!data.join(leftover).exists(), "{leftover} was not cleaned");
    }
    let acquire = json!({"resource_id": "disk", "client_id": "test", "lease_duration_ms": 10_000});
    let resp = http.post(format!("{}/v1/locks/acquire", server.base)).json(&acquire).send().await.unwrap();
    let status = resp.status().as_u16();
    assert_eq!(status, 200, "{}", resp.text().await.unwrap());
    all_intact(&http, &server.base, 0..n).await;
}
