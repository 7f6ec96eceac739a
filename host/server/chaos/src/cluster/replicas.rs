//! The campaign's database: a PostgreSQL primary and, with replication, a
//! standby fed by streaming replication, each on a node of its own (`pg1`,
//! `pg2`). The roles move: a failover is what an HA manager does, scripted so
//! that every step is the campaign's and lands in its history:
//! 1. the primary's node is fenced off by killing everything in it (SIGKILL: the
//!    machine it stands for crashed, so it can no longer acknowledge anything);
//! 2. the standby is promoted (`pg_promote()`) and becomes the primary;
//! 3. when the fault ends, the old primary is rebuilt as the new standby from a
//!    fresh `pg_basebackup` of the new primary (whatever it had that the standby
//!    never received is discarded, as `pg_rewind` would), started, and waited for
//!    until it streams, so the next failover has somewhere to go.
//!
//! The fencing servers never learn of it: their connection string names both
//! nodes with `target_session_attrs=read-write` ([`Database::url`]), so a
//! reconnect lands on whichever is the primary now.
//!
//! [`Replication::Sync`] sets `synchronous_commit = on` and names both nodes in
//! `synchronous_standby_names`, so a commit is acknowledged only once the standby
//! has flushed it; [`Replication::Async`] sets neither, so it is acknowledged
//! before the standby has it.

use super::procs::{PG_PORT, Proc, init_postgres, pg_bin, postgres_url};
use crate::netns::Net;
use anyhow::{Context, bail};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The database nodes, in the order they are first given the primary role.
pub const NODES: [&str; 2] = ["pg1", "pg2"];
/// How long a new standby may take to stream from its primary.
const STREAMING_TIMEOUT: Duration = Duration::from_secs(60);

/// How the primary's commits reach the standby.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// One PostgreSQL, no standby, no failover.
    None,
    /// A commit is acknowledged once the standby flushed it.
    Sync,
    /// A commit is acknowledged before the standby has it.
    Async,
}

impl Replication {
    /// The name the campaign's header and summary carry.
    pub fn name(self) -> &'static str {
        match self {
            Replication::None => "none",
            Replication::Sync => "synchronous",
            Replication::Async => "asynchronous",
        }
    }

    /// The lines added to `postgresql.conf` (a standby's copy comes with its base backup).
    fn settings(self) -> String {
        let names = NODES.join(", ");
        match self {
            Replication::Sync => {
                format!("synchronous_commit = on\nsynchronous_standby_names = 'FIRST 1 ({names})'\n")
            }
            Replication::None | Replication::Async => String::new(),
        }
    }
}

/// The database nodes and which of them is the primary now.
pub struct Database {
    pub nodes: Vec<Proc>,
    primary: usize,
    replication: Replication,
    user: String,
    work: PathBuf,
}

impl Database {
    /// Makes the primary's cluster, starts it and, with replication, a standby
    /// from its base backup; returns once the standby streams. `settings`:
    /// more lines for `postgresql.conf` (every node has them: a standby gets
    /// the file with its base backup).
    pub async fn start(
        net: &Net,
        work: &Path,
        user: &str,
        replication: Replication,
        settings: &str,
    ) -> anyhow::Result<Database> {
        let count = if replication == Replication::None { 1 } else { 2 };
        let data = init_postgres(&work.join(NODES[0]), user)?;
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).context("read postgresql.conf")?;
        text.push_str(&replication.settings());
        text.push_str(settings);
        std::fs::write(&conf, text).context("write postgresql.conf")?;
        let mut nodes = vec![];
        for node in &NODES[..count] {
            let data = work.join(node).join("data");
            nodes.push(Proc::postgres(net, work, node, &data, user)?);
        }
        let mut db = Database { nodes, primary: 0, replication, user: user.to_string(), work: work.to_path_buf() };
        db.nodes[0].start(net).await.context("start the primary")?;
        if count == 2 {
            db.rebuild_standby(net, 1).await.context("make the standby")?;
        }
        Ok(db)
    }

    /// The servers' connection string: every node, and only the primary accepted.
    pub fn url(&self, net: &Net) -> anyhow::Result<String> {
        let hosts: Vec<String> =
            self.nodes.iter().map(|p| Ok(net.node(&p.node)?.ip.to_string())).collect::<anyhow::Result<_>>()?;
        Ok(format!(
            "host={} port={PG_PORT} user=fencing dbname=postgres connect_timeout=3 target_session_attrs=read-write",
            hosts.join(",")
        ))
    }

    /// The index of the primary in [`Database::nodes`].
    pub fn primary(&self) -> usize {
        self.primary
    }

    /// The standby's index, if there is one.
    pub fn standby(&self) -> Option<usize> {
        (self.nodes.len() == 2).then_some(1 - self.primary)
    }

    /// Fences off the primary (kills its node) and promotes the standby.
    /// Returns `(old primary, new primary)` node names.
    pub async fn fail_over(&mut self, net: &Net) -> anyhow::Result<(String, String)> {
        let standby = self.standby().context("a failover needs a standby")?;
        let old = self.primary;
        self.nodes[old].kill(net)?;
        let url = postgres_url(net.node(&self.nodes[standby].node)?.ip);
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .with_context(|| format!("connect to the standby {}", self.nodes[standby].node))?;
        let driver = tokio::spawn(connection);
        let promoted: bool = client
            .query_one("SELECT pg_promote(true, 60)", &[])
            .await
            .with_context(|| format!("promote {}", self.nodes[standby].node))?
            .get(0);
        drop(client);
        let _ = driver.await;
        if !promoted {
            bail!("{} did not finish its promotion within 60 s", self.nodes[standby].node);
        }
        self.primary = standby;
        Ok((self.nodes[old].node.clone(), self.nodes[standby].node.clone()))
    }

    /// Replaces node `i`'s data with a base backup of the primary, starts it
    /// as a standby and waits until the primary streams to it.
    pub async fn rebuild_standby(&mut self, net: &Net, i: usize) -> anyhow::Result<()> {
        let name = self.nodes[i].node.clone();
        let primary_ip = net.node(&self.nodes[self.primary].node)?.ip;
        // A few seconds of pg_basebackup: off the async workers, which drive the campaign.
        let (dir, node, user) = (self.work.join(&name), name.clone(), self.user.clone());
        tokio::task::spawn_blocking(move || base_backup(&dir, primary_ip, &node, &user))
            .await
            .context("the base backup's thread")??;
        self.nodes[i].start(net).await?;
        self.await_streaming(net, &name).await
    }

    /// Waits until the primary lists `standby` as streaming (and, with
    /// synchronous replication, as its synchronous standby).
    async fn await_streaming(&self, net: &Net, standby: &str) -> anyhow::Result<()> {
        let url = postgres_url(net.node(&self.nodes[self.primary].node)?.ip);
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(connection);
        let wanted = if self.replication == Replication::Sync { "sync" } else { "async" };
        let begin = Instant::now();
        loop {
            let rows = client
                .query(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'",
                    &[&standby],
                )
                .await?;
            if rows.iter().any(|r| r.get::<_, String>(0) == wanted) {
                break;
            }
            if begin.elapsed() > STREAMING_TIMEOUT {
                bail!("{standby} did not stream ({wanted}) within {STREAMING_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        drop(client);
        let _ = driver.await;
        Ok(())
    }
}

/// Makes `dir/data` a standby of the primary at `primary`: a fresh base backup
/// (WAL streamed alongside), `standby.signal`, and a `primary_conninfo` that
/// names the standby `name` so `synchronous_standby_names` can find it.
fn base_backup(dir: &Path, primary: Ipv4Addr, name: &str, user: &str) -> anyhow::Result<()> {
    let data = dir.join("data");
    if data.exists() {
        std::fs::remove_dir_all(&data).with_context(|| format!("remove {}", data.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    let chown = Command::new("chown").arg(user).arg(dir).status().context("run chown")?;
    if !chown.success() {
        bail!("chown {user} {} failed", dir.display());
    }
    let out = Command::new("runuser")
        .args(["-u", user, "--"])
        .arg(pg_bin("pg_basebackup"))
        .args(["-h", &primary.to_string(), "-p", &PG_PORT.to_string(), "-U", "fencing"])
        .args(["-X", "stream", "-c", "fast", "-D"])
        .arg(&data)
        .output()
        .context("run pg_basebackup")?;
    if !out.status.success() {
        bail!("pg_basebackup from {primary} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let conninfo = format!("host={primary} port={PG_PORT} user=fencing application_name={name}");
    let mut auto = std::fs::read_to_string(data.join("postgresql.auto.conf")).unwrap_or_default();
    auto.push_str(&format!("primary_conninfo = '{conninfo}'\n"));
    std::fs::write(data.join("postgresql.auto.conf"), auto).context("write postgresql.auto.conf")?;
    std::fs::write(data.join("standby.signal"), "").context("write standby.signal")?;
    let chown = Command::new("chown").arg("-R").arg(user).arg(&data).status().context("run chown")?;
    if !chown.success() {
        bail!("chown -R {user} {} failed", data.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Replication;

    #[test]
    fn only_synchronous_replication_names_the_standbys() {
        let sync = Replication::Sync.settings();
        assert!(sync.contains("synchronous_commit = on"), "{sync}");
        assert!(sync.contains("synchronous_standby_names = 'FIRST 1 (pg1, pg2)'"), "{sync}");
        assert_eq!(Replication::Async.settings(), "");
        assert_eq!(Replication::None.settings(), "");
    }
}
