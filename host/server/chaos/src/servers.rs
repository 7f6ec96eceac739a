//! The servers under test as child processes of the campaign: the lock service
//! and the storage server, each `fencing serve --role ...` of this same binary,
//! on a fixed loopback address and data directory so a restart after SIGKILL
//! finds its durable state where it left it.

use anyhow::{Context, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a (re)started server may take before it answers HTTP.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One server process and how to start it again.
pub struct Server {
    /// `storage` or `locks`.
    pub role: &'static str,
    pub addr: SocketAddr,
    exe: PathBuf,
    data_dir: PathBuf,
    log: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Server {
    /// Describes a server; [`Server::start`] launches it.
    pub fn new(exe: &Path, role: &'static str, addr: SocketAddr, work: &Path, extra: Vec<String>) -> Server {
        Server {
            role,
            addr,
            exe: exe.to_path_buf(),
            data_dir: work.join(format!("{role}-data")),
            log: work.join(format!("{role}.log")),
            extra,
            child: None,
        }
    }

    /// The path a GET answers on once the server is serving.
    fn probe_path(&self) -> &'static str {
        if self.role == "storage" {
            "/v1/storage/fence?resource_id=probe"
        } else {
            "/v1/locks/status?resource_id=probe"
        }
    }

    /// Starts the process and waits until it answers HTTP.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.data_dir)?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = Command::new(&self.exe)
            .args(["serve", "--listen", &self.addr.to_string(), "--data-dir"])
            .arg(&self.data_dir)
            .args(["--role", self.role])
            .args(&self.extra)
            // Authentication is only what `extra` asks for (`fencing chaos --auth`), never
            // inherited from the campaign's environment, which the clients do not read.
            .env_remove("FENCING_AUTH_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawn the {} server", self.role))?;
        self.child = Some(child);
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> anyhow::Result<()> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(1)).build()?;
        let url = format!("http://{}{}", self.addr, self.probe_path());
        let begin = Instant::now();
        loop {
            if http.get(&url).send().await.is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("the {} server exited with {status}; see {}", self.role, self.log.display());
            }
            if begin.elapsed() > READY_TIMEOUT {
                bail!("the {} server did not answer within {READY_TIMEOUT:?}; see {}", self.role, self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// SIGKILLs the process and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (graceful), then SIGKILL if it does not exit within 5 s.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            let begin = Instant::now();
            while begin.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A free loopback address (bound, then released for the server to take).
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?)
}
