//! The distributed campaign's servers, each the only program in its node's
//! namespace: an etcd member, PostgreSQL, a `fencing serve`. A kill is a
//! SIGKILL of everything in the namespace (the machine it stands for crashes);
//! a start runs the same command on the same data directory and waits until
//! the server answers.
//!
//! The campaign's controller runs in the hub namespace, so the readiness
//! probes here (HTTP, `etcdctl`, a PostgreSQL connection) reach the nodes
//! directly, whatever partition is in place between them.

use crate::netns::Net;
use anyhow::{Context, bail};
use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a (re)started server may take before it answers.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Port every etcd member serves clients on.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// Port every etcd member talks to its peers on.
const ETCD_PEER_PORT: u16 = 2380;
/// Port PostgreSQL listens on.
pub const PG_PORT: u16 = 5432;
/// Port every fencing server listens on.
pub const FENCING_PORT: u16 = 7070;

/// How to tell that a started server serves.
#[derive(Debug, Clone)]
enum Ready {
    /// `etcdctl endpoint health` on this client URL succeeds (the member has a leader).
    Etcd(String),
    /// A PostgreSQL connection with this connection string opens.
    Postgres(String),
    /// `GET` of both the storage and the lock status succeeds at this base URL.
    Fencing(String),
}

/// One server process of the cluster and how to start it again.
pub struct Proc {
    /// The node (and namespace) it runs in: `e1`, `postgres`, `s1`, ...
    pub node: String,
    program: PathBuf,
    args: Vec<OsString>,
    log: PathBuf,
    ready: Ready,
    child: Option<Child>,
}

impl Proc {
    /// An etcd member of the 3-member cluster `members` (node names), data under `work`.
    pub fn etcd(net: &Net, work: &Path, node: &str, members: &[&str]) -> anyhow::Result<Proc> {
        let ip = net.node(node)?.ip;
        let cluster: Vec<String> = members
            .iter()
            .map(|m| Ok(format!("{m}=http://{}:{ETCD_PEER_PORT}", net.node(m)?.ip)))
            .collect::<anyhow::Result<_>>()?;
        let peer = format!("http://{ip}:{ETCD_PEER_PORT}");
        let client = etcd_url(ip);
        let args: Vec<OsString> = [
            "--name",
            node,
            "--data-dir",
            &work.join(format!("{node}-data")).display().to_string(),
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
            "--initial-cluster",
            &cluster.join(","),
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            "fencing-chaos",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        Ok(Proc::new(node, "etcd".into(), args, work, Ready::Etcd(client)))
    }

    /// PostgreSQL on the data directory `data` (made by [`init_postgres`]), run as `user`.
    pub fn postgres(net: &Net, work: &Path, node: &str, data: &Path, user: &str) -> anyhow::Result<Proc> {
        let ip = net.node(node)?.ip;
        let mut args: Vec<OsString> = ["-u", user, "--"].iter().map(OsString::from).collect();
        args.push(pg_bin("postgres").into());
        args.extend(["-D".into(), data.as_os_str().to_owned()]);
        for a in ["-p", &PG_PORT.to_string(), "-c", &format!("listen_addresses={ip}"), "-k"] {
            args.push(a.into());
        }
        args.push(data.parent().unwrap_or(data).as_os_str().to_owned());
        Ok(Proc::new(node, "runuser".into(), args, work, Ready::Postgres(postgres_url(ip))))
    }

    /// `fencing serve` (both roles) with `extra` arguments after `serve`.
    pub fn fencing(net: &Net, work: &Path, node: &str, exe: &Path, extra: Vec<String>) -> anyhow::Result<Proc> {
        let ip = net.node(node)?.ip;
        let mut args: Vec<OsString> = vec!["serve".into(), "--listen".into(), format!("{ip}:{FENCING_PORT}").into()];
        args.extend(["--data-dir".into(), work.join(format!("{node}-data")).into_os_string()]);
        args.extend(extra.into_iter().map(OsString::from));
        Ok(Proc::new(node, exe.to_path_buf(), args, work, Ready::Fencing(fencing_url(ip))))
    }

    fn new(node: &str, program: PathBuf, args: Vec<OsString>, work: &Path, ready: Ready) -> Proc {
        let log = work.join(format!("{node}.log"));
        Proc { node: node.to_string(), program, args, log, ready, child: None }
    }

    /// Starts the process in its namespace and waits until it serves.
    pub async fn start(&mut self, net: &Net) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log)?;
        let child = net
            .command(&self.node, &self.program)?
            .args(&self.args)
            .env_remove("FENCING_AUTH_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {} on {}", self.program.display(), self.node))?;
        self.child = Some(child);
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build()?;
        let begin = Instant::now();
        while !self.serves(&http).await {
            if let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                bail!("{} exited with {status}; see {}", self.node, self.log.display());
            }
            if begin.elapsed() > READY_TIMEOUT {
                bail!("{} did not serve within {READY_TIMEOUT:?}; see {}", self.node, self.log.display());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    async fn serves(&self, http: &reqwest::Client) -> bool {
        match &self.ready {
            Ready::Etcd(url) => {
                // etcdctl takes up to a second: from a blocking thread, off the campaign's workers.
                let url = url.clone();
                let probe = move || {
                    Command::new("etcdctl")
                        .env("ETCDCTL_API", "3")
                        .args(["--endpoints", &url, "--command-timeout=1s", "endpoint", "health"])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                };
                tokio::task::spawn_blocking(probe).await.unwrap_or(false)
            }
            Ready::Postgres(url) => tokio_postgres::connect(url, tokio_postgres::NoTls).await.is_ok(),
            Ready::Fencing(base) => {
                let mut ok = true;
                for path in ["/v1/storage/fence?resource_id=probe", "/v1/locks/status?resource_id=probe"] {
                    let answer = http.get(format!("{base}{path}")).send().await;
                    ok &= answer.is_ok_and(|r| r.status().is_success());
                }
                ok
            }
        }
    }

    /// SIGKILLs everything in the node's namespace and reaps the process.
    pub fn kill(&mut self, net: &Net) -> anyhow::Result<()> {
        // Our own child (the namespace's first process) first, reaped here;
        // then the rest, which their new parent reaps.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        net.kill_all(&self.node, Duration::from_secs(10))?;
        Ok(())
    }
}

/// The client URL of the etcd member at `ip`.
pub fn etcd_url(ip: Ipv4Addr) -> String {
    format!("http://{ip}:{ETCD_CLIENT_PORT}")
}

/// The base URL of the fencing server at `ip`.
pub fn fencing_url(ip: Ipv4Addr) -> String {
    format!("http://{ip}:{FENCING_PORT}")
}

/// The connection string of one database node at `ip`.
pub fn postgres_url(ip: Ipv4Addr) -> String {
    format!("host={ip} port={PG_PORT} user=fencing dbname=postgres connect_timeout=3")
}

/// A PostgreSQL 15 program: from `$FENCING_PG_BIN` or `/usr/lib/postgresql/15/bin`.
pub fn pg_bin(name: &str) -> PathBuf {
    let dir = std::env::var_os("FENCING_PG_BIN").unwrap_or_else(|| "/usr/lib/postgresql/15/bin".into());
    PathBuf::from(dir).join(name)
}

/// Makes a cluster directory `dir/data` owned by `user` (PostgreSQL refuses to run as
/// root) that trusts the campaign's subnet. Returns the data directory.
pub fn init_postgres(dir: &Path, user: &str) -> anyhow::Result<PathBuf> {
    let initdb = pg_bin("initdb");
    if !initdb.exists() {
        bail!("{} not found: install PostgreSQL 15 (scripts/setup --all) or set FENCING_PG_BIN", initdb.display());
    }
    std::fs::create_dir_all(dir)?;
    let status = Command::new("chown").arg(user).arg(dir).status().context("run chown")?;
    if !status.success() {
        bail!("chown {user} {} failed: is there a `{user}` user? (set FENCING_PG_USER)", dir.display());
    }
    let reach = Command::new("runuser").args(["-u", user, "--", "test", "-w"]).arg(dir).status();
    if !reach.is_ok_and(|s| s.success()) {
        bail!(
            "PostgreSQL runs as `{user}`, who cannot reach {}: choose a --dir whose parent directories others may enter",
            dir.display()
        );
    }
    let data = dir.join("data");
    let out = Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(&initdb)
        .args(["-A", "trust", "-U", "fencing", "-E", "UTF8", "--no-locale", "-D"])
        .arg(&data)
        .output()
        .context("run initdb")?;
    if !out.status.success() {
        bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let hba = data.join("pg_hba.conf");
    let mut rules = std::fs::read_to_string(&hba).context("read pg_hba.conf")?;
    rules.push_str("host all all 10.231.0.0/24 trust\nhost replication all 10.231.0.0/24 trust\n");
    std::fs::write(&hba, rules).context("write pg_hba.conf")?;
    Ok(data)
}

/// True when the `fencing` extension is installed into this PostgreSQL.
pub fn extension_installed() -> bool {
    let out = Command::new(pg_bin("pg_config")).arg("--sharedir").output();
    let Ok(out) = out else { return false };
    let share = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&share).join("extension/fencing.control").exists()
}

/// The etcd member that `members` (node names with their client URLs) agree leads, if any.
pub fn etcd_leader(members: &[(String, String)]) -> Option<String> {
    let endpoints: Vec<&str> = members.iter().map(|(_, url)| url.as_str()).collect();
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &endpoints.join(","), "--command-timeout=1s", "endpoint", "status", "-w", "json"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let status: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).ok()?;
    let leader = status.first()?.pointer("/Status/leader")?.as_u64().filter(|l| *l != 0)?;
    // Every member that answered must name the same leader; during an election they may not.
    if status.iter().any(|s| s.pointer("/Status/leader").and_then(|l| l.as_u64()) != Some(leader)) {
        return None;
    }
    let endpoint =
        status.iter().find(|s| s.pointer("/Status/header/member_id").and_then(|m| m.as_u64()) == Some(leader))?;
    let url = endpoint.get("Endpoint")?.as_str()?;
    members.iter().find(|(_, u)| u == url).map(|(name, _)| name.clone())
}
