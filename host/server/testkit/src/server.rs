//! Spawning `fencing serve` as a child process for end-to-end tests.

use crate::{fencing_bin, free_port};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `fencing serve`; killed (SIGKILL) on drop.
pub struct ServeProcess {
    pub child: Child,
    pub base: String,
}

impl ServeProcess {
    /// Starts `fencing serve --role storage` on a free port with `data_dir`, plus `extra` flags.
    pub fn start(data_dir: &Path, extra: &[&str]) -> ServeProcess {
        Self::start_role("storage", data_dir, extra)
    }

    /// Starts `fencing serve --role ROLE` (`storage`, `locks` or `all`) likewise.
    /// Authentication is only what `extra` asks for, never the test's environment.
    pub fn start_role(role: &str, data_dir: &Path, extra: &[&str]) -> ServeProcess {
        Self::start_command(role, data_dir, extra, Command::new(fencing_bin()))
    }

    /// Starts it likewise with at most `nofile` open files (soft and hard), as `ulimit -n` would.
    pub fn start_with_fd_limit(role: &str, data_dir: &Path, extra: &[&str], nofile: u64) -> ServeProcess {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(fencing_bin());
        // SAFETY: setrlimit is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(move || {
                nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, nofile, nofile)
                    .map_err(std::io::Error::from)
            });
        }
        Self::start_command(role, data_dir, extra, command)
    }

    /// Starts `fencing serve --role storage` likewise, logging at `warn` into the file `log`.
    pub fn start_logging(data_dir: &Path, extra: &[&str], log: &Path) -> ServeProcess {
        Self::start_logging_role("storage", data_dir, extra, log)
    }

    /// Starts `fencing serve --role ROLE` likewise, logging at `warn` into the file `log`.
    pub fn start_logging_role(role: &str, data_dir: &Path, extra: &[&str], log: &Path) -> ServeProcess {
        let mut command = Command::new(fencing_bin());
        command.env("FENCING_LOG", "warn").stderr(std::fs::File::create(log).expect("create the log file"));
        Self::start_command(role, data_dir, extra, command)
    }

    fn start_command(role: &str, data_dir: &Path, extra: &[&str], mut command: Command) -> ServeProcess {
        let port = free_port();
        let logs_elsewhere = command.get_envs().any(|(k, _)| k == "FENCING_LOG");
        if !logs_elsewhere {
            command.env("FENCING_LOG", "error").stderr(Stdio::inherit());
        }
        let child = command
            .args(["serve", "--role", role, "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .env_remove("FENCING_AUTH_TOKEN_FILE")
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn fencing serve");
        ServeProcess { child, base: format!("http://127.0.0.1:{port}") }
    }

    /// Waits until `GET /metrics` answers (panics after 60 s or if the process exits).
    pub async fn ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = format!("{}/metrics", self.base);
        loop {
            if let Ok(r) = reqwest::get(&url).await
                && r.status().is_success()
            {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("fencing serve exited early: {status}");
            }
            assert!(Instant::now() < deadline, "fencing serve did not become ready");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGKILL, then reap.
    pub fn kill9(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        self.kill9();
    }
}
