//! Network namespaces for the distributed campaign: each node (an etcd
//! member, PostgreSQL, a fencing server, a client) runs in a namespace of its
//! own with one interface, joined by veth links to a bridge that lives in a
//! hub namespace, so the machine's own interfaces and packet filters are never
//! touched. Every net has its own hub, so nets of concurrent runs may use the
//! same addresses.
//!
//! The bridge itself has an address ([`HUB_IP`]): a thread that enters the
//! hub ([`Net::enter_hub`]) reaches every node and is never cut off, which is
//! where the campaign watches and reads from.
//!
//! A partition is an nftables table in each affected node's namespace that
//! drops traffic to and from the nodes on the other side (both directions,
//! both ends); a heal removes those tables. Needs root, `ip` (iproute2) and
//! `nft` (nftables).
//!
//! Dropping a [`Net`] kills every process still running in its namespaces and
//! deletes them; [`sweep_stale`] removes what a killed campaign left behind.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Every namespace this module makes starts with this.
const PREFIX: &str = "fencing-";

/// Nodes are 10.231.0.11 to 10.231.0.254.
pub const MAX_NODES: usize = 244;

/// The bridge's address in the hub namespace; partitions never name it.
pub const HUB_IP: Ipv4Addr = Ipv4Addr::new(10, 231, 0, 1);

/// Why a net could not be built or changed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("network namespaces need root (run the campaign as root)")]
    NotRoot,
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("a net holds at most {MAX_NODES} nodes, not {0}")]
    TooManyNodes(usize),
    #[error("no node named {0}")]
    UnknownNode(String),
    #[error("enter the hub namespace {ns}: {error}")]
    Enter { ns: String, error: String },
}

/// One node: its name, namespace and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub ns: String,
    pub ip: Ipv4Addr,
}

/// A set of nodes on one bridge.
#[derive(Debug)]
pub struct Net {
    hub: String,
    nodes: Vec<Node>,
}

fn run(args: &[&str], stdin: Option<&str>) -> Result<(), NetError> {
    let mut child = Command::new(args[0])
        .args(&args[1..])
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| NetError::Command { command: args.join(" "), stderr: e.to_string() })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        let _ = pipe.write_all(text.as_bytes());
    }
    let out =
        child.wait_with_output().map_err(|e| NetError::Command { command: args.join(" "), stderr: e.to_string() })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetError::Command { command: args.join(" "), stderr: String::from_utf8_lossy(&out.stderr).trim().into() })
    }
}

fn namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().map(|o| o.stdout).unwrap_or_default();
    String::from_utf8_lossy(&out).lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect()
}

/// SIGKILLs every process in `ns`; returns their pids.
fn kill_all_in(ns: &str) -> Vec<i32> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().map(|o| o.stdout).unwrap_or_default();
    let pids: Vec<i32> = String::from_utf8_lossy(&out).split_whitespace().filter_map(|p| p.parse().ok()).collect();
    for &pid in &pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
    }
    pids
}

fn delete(ns: &str) {
    kill_all_in(ns);
    let _ = run(&["ip", "netns", "delete", ns], None);
}

/// Deletes the namespaces of nets whose process is gone (a campaign killed
/// before it could clean up), and kills what still runs in them.
pub fn sweep_stale() {
    for ns in namespaces() {
        let Some(rest) = ns.strip_prefix(PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            delete(&ns);
        }
    }
}

impl Net {
    /// Builds a net of the named nodes, addressed 10.231.0.11, .12, ... in order.
    pub fn create(names: &[&str]) -> Result<Net, NetError> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        if !nix::unistd::geteuid().is_root() {
            return Err(NetError::NotRoot);
        }
        if names.len() > MAX_NODES {
            return Err(NetError::TooManyNodes(names.len()));
        }
        let id = format!("{PREFIX}{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut net = Net { hub: format!("{id}-hub"), nodes: vec![] };
        // From here on, dropping `net` removes whatever was made.
        run(&["ip", "netns", "add", &net.hub], None)?;
        run(&["ip", "-n", &net.hub, "link", "add", "br0", "type", "bridge"], None)?;
        run(&["ip", "-n", &net.hub, "link", "set", "br0", "up"], None)?;
        run(&["ip", "-n", &net.hub, "addr", "add", &format!("{HUB_IP}/24"), "dev", "br0"], None)?;
        run(&["ip", "-n", &net.hub, "link", "set", "lo", "up"], None)?;
        for (i, name) in names.iter().enumerate() {
            let node = Node {
                name: name.to_string(),
                ns: format!("{id}-{name}"),
                ip: Ipv4Addr::new(10, 231, 0, 11 + i as u8),
            };
            run(&["ip", "netns", "add", &node.ns], None)?;
            net.nodes.push(node.clone());
            let veth = format!("v{i}");
            run(
                &[
                    "ip", "-n", &net.hub, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
                    &node.ns,
                ],
                None,
            )?;
            run(&["ip", "-n", &net.hub, "link", "set", &veth, "master", "br0", "up"], None)?;
            run(&["ip", "-n", &node.ns, "addr", "add", &format!("{}/24", node.ip), "dev", "eth0"], None)?;
            run(&["ip", "-n", &node.ns, "link", "set", "eth0", "up"], None)?;
            run(&["ip", "-n", &node.ns, "link", "set", "lo", "up"], None)?;
        }
        Ok(net)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, name: &str) -> Result<&Node, NetError> {
        self.nodes.iter().find(|n| n.name == name).ok_or_else(|| NetError::UnknownNode(name.into()))
    }

    /// Moves the calling thread into the hub namespace: sockets it opens from
    /// then on (and processes it spawns, and threads it starts) reach every node
    /// over the bridge, whatever partitions are in place.
    pub fn enter_hub(&self) -> Result<(), NetError> {
        let err = |error: String| NetError::Enter { ns: self.hub.clone(), error };
        let file = std::fs::File::open(format!("/var/run/netns/{}", self.hub)).map_err(|e| err(e.to_string()))?;
        nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| err(e.to_string()))
    }

    /// SIGKILLs every process running in the node's namespace (a crash of the
    /// machine it stands for) and waits up to `wait` until they are gone, reaped
    /// by their parents: a server that checks whether its predecessor still
    /// runs (PostgreSQL's `postmaster.pid`) would take an unreaped one for alive.
    pub fn kill_all(&self, name: &str, wait: std::time::Duration) -> Result<(), NetError> {
        let pids = kill_all_in(&self.node(name)?.ns);
        let deadline = std::time::Instant::now() + wait;
        while pids.iter().any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
    }

    /// A command that runs `program` inside the node's namespace.
    pub fn command(&self, name: &str, program: impl AsRef<OsStr>) -> Result<Command, NetError> {
        let node = self.node(name)?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &node.ns]).arg(program);
        Ok(cmd)
    }

    /// Cuts every node of `a` off from every node of `b` (both directions),
    /// on top of any partition already in place.
    pub fn partition(&self, a: &[&str], b: &[&str]) -> Result<(), NetError> {
        let mut cut: Vec<(&Node, BTreeSet<Ipv4Addr>)> = vec![];
        for (side, other) in [(a, b), (b, a)] {
            let far: BTreeSet<Ipv4Addr> = other.iter().map(|n| self.node(n).map(|n| n.ip)).collect::<Result<_, _>>()?;
            for n in side {
                cut.push((self.node(n)?, far.clone()));
            }
        }
        for (node, far) in cut {
            let set = far.iter().map(|ip| ip.to_string()).collect::<Vec<_>>().join(", ");
            // One table per node, chains added to on each partition.
            let rules = format!(
                "table inet fencing {{\n chain in {{\n  type filter hook input priority 0;\n  ip saddr {{ {set} }} drop\n }}\n chain out {{\n  type filter hook output priority 0;\n  ip daddr {{ {set} }} drop\n }}\n}}\n"
            );
            run(&["ip", "netns", "exec", &node.ns, "nft", "-f", "-"], Some(&rules))?;
        }
        Ok(())
    }

    /// Removes every partition.
    pub fn heal(&self) -> Result<(), NetError> {
        for node in &self.nodes {
            run(&["ip", "netns", "exec", &node.ns, "nft", "flush", "ruleset"], None)?;
        }
        Ok(())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for node in &self.nodes {
            delete(&node.ns);
        }
        delete(&self.hub);
    }
}
