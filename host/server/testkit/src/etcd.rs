//! Real etcd members (`/usr/bin/etcd`) on loopback ports, for tests of the
//! etcd lock backend: one member, or a cluster whose leader a test can kill.

use crate::free_port;
use std::process::{Child, Command, Stdio};

const ETCD: &str = "/usr/bin/etcd";

/// One etcd member, killed on drop.
pub struct Member {
    pub name: String,
    /// Its client URL (`http://127.0.0.1:PORT`).
    pub client: String,
    pub child: Child,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `n` members on loopback with data under `dir`.
pub fn cluster(dir: &std::path::Path, n: usize) -> Vec<Member> {
    let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let initial: Vec<String> =
        ports.iter().enumerate().map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}")).collect();
    let members: Vec<Member> = ports
        .iter()
        .enumerate()
        .map(|(i, (client, peer))| {
            let client = format!("http://127.0.0.1:{client}");
            let peer = format!("http://127.0.0.1:{peer}");
            let child = Command::new(ETCD)
                .args(["--name", &format!("m{i}"), "--data-dir"])
                .arg(dir.join(format!("m{i}")))
                .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
                .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &initial.join(","), "--initial-cluster-state", "new"])
                .args([
                    "--initial-cluster-token",
                    "fencing-test",
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "500",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn etcd");
            Member { name: format!("m{i}"), client, child }
        })
        .collect();
    members
}
