//! The distributed campaign's network: nodes in namespaces of their own
//! reach each other over the bridge, a partition cuts exactly the pairs it
//! names (both directions) and a heal restores them, a 3-member etcd cluster
//! runs across the namespaces and elects a new leader when its leader is cut
//! off, and dropping the net leaves no namespace and no process behind.
//! Needs root, iproute2, nftables and etcd (scripts/setup --all).

use fencing_chaos::netns::Net;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn namespaces() -> String {
    String::from_utf8(Command::new("ip").args(["netns", "list"]).output().unwrap().stdout).unwrap()
}

/// True when `from` opens a TCP connection to `to`'s port within a second.
fn reaches(net: &Net, from: &str, to: &str, port: u16) -> bool {
    let ip = net.node(to).unwrap().ip;
    let probe = format!("exec 3<>/dev/tcp/{ip}/{port}");
    net.command(from, "timeout").unwrap().args(["1", "bash", "-c", &probe]).status().unwrap().success()
}

fn listen(net: &Net, node: &str, port: u16) -> Child {
    let ip = net.node(node).unwrap().ip;
    let script = format!(
        "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('{ip}', {port}))\ns.listen(64)\nwhile True: s.accept()[0].close()"
    );
    net.command(node, "python3").unwrap().args(["-c", &script]).spawn().unwrap()
}

fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn partitions_cut_what_they_name_and_heal() {
    let net = Net::create(&["a", "b", "c"]).unwrap();
    let names: Vec<String> = net.nodes().iter().map(|n| n.ns.clone()).collect();
    let mut server = listen(&net, "b", 7000);
    eventually("b listens", || reaches(&net, "a", "b", 7000));
    assert!(reaches(&net, "c", "b", 7000));
    net.partition(&["a"], &["b"]).unwrap();
    assert!(!reaches(&net, "a", "b", 7000), "a partition must cut a from b");
    assert!(reaches(&net, "c", "b", 7000), "c is on neither side of it");
    // Both directions are cut: a listener on a is out of b's reach too.
    let mut back = listen(&net, "a", 7001);
    eventually("a listens", || reaches(&net, "c", "a", 7001));
    assert!(!reaches(&net, "b", "a", 7001));
    net.heal().unwrap();
    assert!(reaches(&net, "a", "b", 7000) && reaches(&net, "b", "a", 7001), "the heal restores both directions");
    drop(net);
    let left = namespaces();
    for ns in &names {
        assert!(!left.contains(ns.as_str()), "{ns} left behind");
    }
    // The processes that ran in the namespaces are gone with them.
    for child in [&mut server, &mut back] {
        let deadline = Instant::now() + Duration::from_secs(5);
        while child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a process of the net outlived it");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The member id of the leader as one member sees it (`None` while it has none or cannot tell).
fn leader_seen_by(net: &Net, member: &str) -> Option<u64> {
    let ip = net.node(member).unwrap().ip;
    let out = net
        .command(member, "etcdctl")
        .unwrap()
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &format!("http://{ip}:2379"), "--command-timeout=1s", "endpoint", "status", "-w", "json"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v[0]["Status"]["leader"].as_u64().filter(|l| *l != 0)
}

fn member_id(net: &Net, member: &str) -> u64 {
    let ip = net.node(member).unwrap().ip;
    let out = net
        .command(member, "etcdctl")
        .unwrap()
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &format!("http://{ip}:2379"), "endpoint", "status", "-w", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["Status"]["header"]["member_id"].as_u64().unwrap()
}

#[test]
fn an_etcd_cluster_across_namespaces_replaces_a_leader_cut_off_from_the_majority() {
    let members = ["e1", "e2", "e3"];
    let net = Net::create(&members).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cluster: Vec<String> = members.iter().map(|m| format!("{m}=http://{}:2380", net.node(m).unwrap().ip)).collect();
    let mut children = vec![];
    for m in members {
        let ip = net.node(m).unwrap().ip;
        let log = std::fs::File::create(dir.path().join(format!("{m}.log"))).unwrap();
        children.push(
            net.command(m, "etcd")
                .unwrap()
                .args(["--name", m, "--data-dir"])
                .arg(dir.path().join(m))
                .args(["--listen-peer-urls", &format!("http://{ip}:2380")])
                .args(["--initial-advertise-peer-urls", &format!("http://{ip}:2380")])
                .args(["--listen-client-urls", &format!("http://{ip}:2379")])
                .args(["--advertise-client-urls", &format!("http://{ip}:2379")])
                .args(["--initial-cluster", &cluster.join(","), "--initial-cluster-state", "new"])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
    }
    let mut leader = 0;
    eventually("the cluster elects a leader all members agree on", || {
        let seen: Vec<Option<u64>> = members.iter().map(|m| leader_seen_by(&net, m)).collect();
        leader = seen[0].unwrap_or(0);
        seen.iter().all(|s| s.is_some() && *s == seen[0])
    });
    let ids: Vec<u64> = members.iter().map(|m| member_id(&net, m)).collect();
    let old = members[ids.iter().position(|id| *id == leader).expect("the leader is a member")];
    let rest: Vec<&str> = members.iter().copied().filter(|m| *m != old).collect();
    net.partition(&[old], &rest).unwrap();
    eventually("the majority elects another leader", || {
        let seen: Vec<Option<u64>> = rest.iter().map(|m| leader_seen_by(&net, m)).collect();
        seen.iter().all(|s| s.is_some_and(|l| l != leader) && *s == seen[0])
    });
    net.heal().unwrap();
    eventually("the old leader follows the new one", || {
        let seen: Vec<Option<u64>> = members.iter().map(|m| leader_seen_by(&net, m)).collect();
        seen.iter().all(|s| s.is_some() && *s == seen[0]) && seen[0] != Some(leader)
    });
    drop(net);
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
}
