//! The distributed campaign (`fencing chaos --topology cluster`) end to end:
//! etcd, PostgreSQL, fencing servers and clients in network namespaces of
//! their own. Without fencing, the partitions, kills and pauses make stale
//! writes land and the checker reports them; a campaign interrupted halfway
//! leaves no namespace and no process behind. (The fenced run, 0 violations,
//! is `scripts/test`'s.) Needs root, iproute2, nftables, etcd and PostgreSQL 15
//! (scripts/setup --all).

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One cluster at a time: each is a dozen processes on a 2-core machine.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn fencing() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fencing"))
}

fn summary(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    serde_json::from_str(text.lines().last().expect("a summary line")).expect("the last line is the JSON summary")
}

/// The namespaces a campaign with process id `pid` made that still exist.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap().stdout;
    let prefix = format!("fencing-{pid}-");
    String::from_utf8_lossy(&out).lines().filter(|l| l.starts_with(&prefix)).map(str::to_string).collect()
}

/// Processes but the campaign `pid` itself whose command line names a path
/// under `dir` (the etcd members, PostgreSQL, servers and clients of a run).
fn processes_under(pid: u32, dir: &Path) -> Vec<String> {
    let needle = dir.display().to_string();
    let mut found = vec![];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if entry.file_name().to_string_lossy() == pid.to_string() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&needle) {
            found.push(format!("{}: {cmdline}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Waits a few seconds for stragglers to be reaped, then returns what is left.
fn leftovers(pid: u32, dir: &Path) -> (Vec<String>, Vec<String>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = (namespaces_of(pid), processes_under(pid, dir));
        if (left.0.is_empty() && left.1.is_empty()) || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A fresh campaign work directory (inside a temporary one, removed on drop).
fn work_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    // PostgreSQL runs as its own user and must reach its directory inside.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    (dir, work)
}

#[test]
fn without_fencing_the_cluster_admits_stale_writes_and_cleans_up() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, work) = work_dir();
    let child = fencing()
        // Stale writes come from holders that stall past their granted lease
        // (about one acquisition in eight) and from pauses that catch a holder;
        // 3 resources let a lock be taken over while its holder is away.
        .args(["chaos", "--topology", "cluster", "--seconds", "90", "--seed", "2", "--no-fencing"])
        .args(["--clients", "6", "--resources", "3", "--dir"])
        .arg(&work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Exit 0 with --no-fencing means: violations were found, as expected.
    assert!(out.status.success(), "{stderr}\n{}", String::from_utf8_lossy(&out.stdout));
    let s = summary(&out.stdout);
    assert!(s["violations"].as_u64().unwrap() > 0, "{s}");
    assert!(s["violation_kinds"]["stale_admitted"].as_u64().unwrap_or(0) > 0, "{s}");
    assert!(s["partitions"].as_u64().unwrap() > 0 && s["heals"] == s["partitions"], "{s}");
    // Every kill and every failover ends in a restart; the first fault is a failover.
    let (kills, failovers) = (s["kills"].as_u64().unwrap(), s["failovers"].as_u64().unwrap());
    assert!(kills > 0 && failovers > 0 && s["restarts"].as_u64() == Some(kills + failovers), "{s}");
    assert_eq!(s["replication"], "synchronous", "{s}");
    assert!(stderr.contains("decided by nobody"), "{stderr}");
    let (namespaces, processes) = leftovers(pid, &work);
    assert!(namespaces.is_empty() && processes.is_empty(), "left behind: {namespaces:?} {processes:?}");
}

#[test]
fn replication_and_the_decider_are_cluster_options_checked_before_anything_starts() {
    let refused = |args: &[&str], says: &str| {
        let out = fencing().arg("chaos").args(args).args(["--seconds", "1"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(&["--replication", "async"], "for the cluster topology");
    refused(&["--pg-guard", "host"], "for the cluster topology");
    refused(&["--topology", "cluster", "--replication", "semi"], "sync");
    refused(&["--topology", "cluster", "--pg-guard", "host", "--no-fencing"], "--no-fencing");
    refused(&["--signed", "--no-fencing"], "contradict");
    refused(&["--topology", "cluster", "--signed", "--no-fencing"], "contradict");
}

#[test]
fn an_interrupted_cluster_campaign_leaves_nothing_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (_dir, work) = work_dir();
    let mut child = fencing()
        .args(["chaos", "--topology", "cluster", "--seconds", "300", "--seed", "5", "--dir"])
        .arg(&work)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.contains("clients running") {
            break;
        }
    }
    assert!(!namespaces_of(pid).is_empty(), "a running campaign has its namespaces");
    assert!(!processes_under(pid, &work).is_empty(), "and its processes");
    std::thread::sleep(Duration::from_secs(5));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert!(!status.success(), "an interrupted campaign does not claim success");
    assert!(rest.iter().any(|l| l.contains("terminated")), "{rest:?}");
    let (namespaces, processes) = leftovers(pid, &work);
    assert!(namespaces.is_empty() && processes.is_empty(), "left behind: {namespaces:?} {processes:?}");
}
