//! The campaign driver end to end with real processes: servers started,
//! SIGKILLed and restarted, client processes paused with SIGSTOP, the fault
//! proxies, read-back after restarts, the merged history and the checker.
//!
//! The servers here are the stand-ins of `fencing_testkit::fake` (run as processes of
//! this test binary, through a small wrapper script that plays `fencing serve`
//! and passes every other command to the real `fencing` binary), so the
//! driver is tested independently of the real servers' code. With the stand-in
//! fence the run checks clean; without it, the checker reports violations.

use fencing_chaos::campaign::{self, CampaignConfig};
use fencing_chaos::history::read_history;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Entry point of the stand-in server processes: does nothing unless the
/// wrapper script started this binary as `fencing serve ...`.
#[test]
fn fake_server_entry() {
    let Ok(args) = std::env::var("FENCING_FAKE_SERVE") else { return };
    let args: Vec<&str> = args.split_whitespace().collect();
    let value = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1].to_string()).unwrap();
    let fencing = !args.contains(&"--no-fencing");
    let dir = std::path::PathBuf::from(value("--data-dir"));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(value("--listen")).await.unwrap();
        axum::serve(listener, fencing_testkit::fake::router(fencing, Some(dir))).await.unwrap();
    });
}

fn wrapper(dir: &Path) -> std::path::PathBuf {
    let script = dir.join("fencing-wrapper.sh");
    let test_bin = std::env::current_exe().unwrap();
    let body = format!(
        "#!/bin/sh\nif [ \"$1\" = serve ]; then\n  FENCING_FAKE_SERVE=\"$*\" exec '{}' --exact chaos_campaign::fake_server_entry --nocapture --test-threads=1 >/dev/null\nfi\nexec '{}' \"$@\"\n",
        test_bin.display(),
        env!("CARGO_BIN_EXE_fencing")
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

async fn run(fencing: bool, seed: u64, background_grants: bool) -> fencing_chaos::check::Report {
    let dir = tempfile::tempdir().unwrap();
    let cfg = CampaignConfig {
        seconds: 6,
        seed,
        fencing,
        clients: 4,
        resources: 1,
        lease_ms: (50, 200),
        work_dir: dir.path().join("work"),
        history: dir.path().join("history.jsonl"),
        exe: wrapper(dir.path()),
        // The fenced run also exercises authentication: servers demand the token, clients send it.
        auth: fencing,
        background_grants,
        signed: false,
        forger: false,
    };
    let report = campaign::run(&cfg).await.unwrap().report;
    // The merged history on disk checks the same as the report.
    let again = fencing_chaos::check::check(&read_history(&cfg.history).unwrap());
    assert_eq!(again.summary, report.summary);
    eprintln!(
        "fencing={fencing} background_grants={background_grants}: {}",
        serde_json::to_string(&report.summary).unwrap()
    );
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_campaign_injects_faults_and_its_checker_sees_what_fencing_prevents() {
    // Grants answered once synced (the default), then ahead of their sync.
    for background_grants in [false, true] {
        let fenced = run(true, 11, background_grants).await;
        assert!(fenced.is_valid(), "{:?}", fenced.violations);
        let s = &fenced.summary;
        assert!(s.pauses + s.kills + s.proxy_faults > 0, "{s:?}");
        assert_eq!(s.kills, s.restarts, "every killed server came back: {s:?}");
        assert!(s.admitted > 0 && s.reads_checked >= 2, "{s:?}");
    }

    let unfenced = run(false, 11, false).await;
    assert!(!unfenced.is_valid(), "no violation without fencing: {:?}", unfenced.summary);
}
