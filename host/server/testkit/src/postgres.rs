//! A throwaway PostgreSQL 15 on 127.0.0.1 for tests.
//!
//! Binaries come from `$FENCING_PG_BIN` or `/usr/lib/postgresql/15/bin`.
//! PostgreSQL refuses to run as root, so when the test runs as root the
//! cluster directory is handed to the `postgres` user (or `$FENCING_PG_USER`)
//! and `initdb`/`postgres` run through `runuser`. The server listens only on
//! 127.0.0.1 on a free port, with its socket in the temp dir, and is stopped
//! (SIGTERM, then SIGKILL) on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Postgres {
    child: Child,
    dir: tempfile::TempDir,
    run_as: Option<String>,
    port: u16,
    /// Server settings given at start (`name=value`, passed as `-c`).
    settings: Vec<String>,
    pub url: String,
}

/// A PostgreSQL program (`pg_dump`, `psql`...) of the version the tests run.
pub fn bin(name: &str) -> PathBuf {
    let dir = std::env::var("FENCING_PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
    let path = PathBuf::from(dir).join(name);
    assert!(path.exists(), "{} not found: install postgresql-15 or set FENCING_PG_BIN", path.display());
    path
}

fn command(run_as: &Option<String>, program: PathBuf) -> Command {
    match run_as {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(program);
            c
        }
        None => Command::new(program),
    }
}

impl Postgres {
    pub async fn start() -> Postgres {
        Postgres::start_with(&[]).await
    }

    /// A server started with these settings (`name=value`, each passed as
    /// `-c`), for example `wal_level=logical` or `max_prepared_transactions=2`.
    pub async fn start_with(settings: &[&str]) -> Postgres {
        let uid = Command::new("id").arg("-u").output().expect("run id -u");
        let root = String::from_utf8_lossy(&uid.stdout).trim() == "0";
        let run_as = root.then(|| std::env::var("FENCING_PG_USER").unwrap_or_else(|_| "postgres".into()));
        let dir = tempfile::Builder::new().prefix("fencing-pg-").tempdir().unwrap();
        let data = dir.path().join("data");
        if let Some(user) = &run_as {
            let status = Command::new("chown").args([user.as_str()]).arg(dir.path()).status().unwrap();
            assert!(status.success(), "chown {user} {}", dir.path().display());
        }
        let out = command(&run_as, bin("initdb"))
            .args(["-A", "trust", "-U", "fencing", "-E", "UTF8", "--no-locale", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        let port = crate::free_port();
        let url = format!("host=127.0.0.1 port={port} user=fencing dbname=postgres");
        let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        let child = spawn(&run_as, dir.path(), port, &settings);
        let pg = Postgres { child, dir, run_as, port, settings, url };
        pg.wait_ready().await;
        pg
    }

    /// The port it listens on, on 127.0.0.1 (user `fencing`, no password).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A second server, started from a `pg_basebackup` of this one taken
    /// while it runs (with the WAL that makes the copy consistent).
    pub async fn from_base_backup(&self) -> Postgres {
        let dir = tempfile::Builder::new().prefix("fencing-pg-copy-").tempdir().unwrap();
        if let Some(user) = &self.run_as {
            let status = Command::new("chown").args([user.as_str()]).arg(dir.path()).status().unwrap();
            assert!(status.success(), "chown {user} {}", dir.path().display());
        }
        let out = command(&self.run_as, bin("pg_basebackup"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", "fencing"])
            .args(["-X", "stream", "-c", "fast", "-D"])
            .arg(dir.path().join("data"))
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_basebackup failed: {}", String::from_utf8_lossy(&out.stderr));
        let port = crate::free_port();
        let url = format!("host=127.0.0.1 port={port} user=fencing dbname=postgres");
        let child = spawn(&self.run_as, dir.path(), port, &self.settings);
        let pg = Postgres { child, dir, run_as: self.run_as.clone(), port, settings: self.settings.clone(), url };
        pg.wait_ready().await;
        pg
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await.is_ok() {
                break;
            }
            assert!(Instant::now() < deadline, "postgres did not start on port {}", self.port);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Crashes the server (SIGQUIT to the postmaster: every backend is killed,
    /// nothing is checkpointed) and starts it again on the same data and port,
    /// so it runs crash recovery.
    pub async fn crash_and_restart(&mut self) {
        let pidfile = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).unwrap();
        let pid: i32 = pidfile.lines().next().unwrap().trim().parse().unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGQUIT).unwrap();
        self.child.wait().unwrap();
        self.child = spawn(&self.run_as, self.dir.path(), self.port, &self.settings);
        self.wait_ready().await;
    }
}

fn spawn(run_as: &Option<String>, dir: &std::path::Path, port: u16, settings: &[String]) -> Child {
    let mut c = command(run_as, bin("postgres"));
    for setting in settings {
        c.args(["-c", setting]);
    }
    c.arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-k"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // `runuser` forwards SIGTERM to postgres (smart shutdown); SIGKILL if it lingers.
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
