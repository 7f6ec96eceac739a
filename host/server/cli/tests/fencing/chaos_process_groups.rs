//! `fencing chaos` runs each client process in a process group of its own, so
//! stopping a client (the nemesis's SIGSTOP) can never leave the campaign's
//! own group orphaned with a stopped member, which the kernel answers with
//! SIGHUP to the whole group when the starting shell exits.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `(parent pid, process group)` of `pid`, from `/proc/<pid>/stat`.
fn parent_and_group(pid: u32) -> Option<(u32, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    Some((fields.get(1)?.parse().ok()?, fields.get(2)?.parse().ok()?))
}

fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| parent_and_group(pid).is_some_and(|(p, _)| p == parent))
        .collect()
}

fn is_chaos_client(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains("chaos client"))
        .unwrap_or(false)
}

#[test]
fn clients_run_in_their_own_process_groups() {
    let dir = tempfile::tempdir().unwrap();
    let mut campaign = Command::new(env!("CARGO_BIN_EXE_fencing"))
        .args(["chaos", "--seconds", "4", "--seed", "7", "--clients", "3", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (_, campaign_group) = parent_and_group(campaign.id()).expect("campaign is running");
    let deadline = Instant::now() + Duration::from_secs(30);
    let clients = loop {
        let clients: Vec<u32> = children_of(campaign.id()).into_iter().filter(|&p| is_chaos_client(p)).collect();
        if clients.len() == 3 || Instant::now() > deadline {
            break clients;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(clients.len(), 3, "the campaign started its three clients");
    for pid in clients {
        let (_, group) = parent_and_group(pid).expect("client is running");
        assert_eq!(group, pid, "client {pid} leads its own process group");
        assert_ne!(group, campaign_group, "client {pid} is outside the campaign's group");
    }
    let status = campaign.wait().unwrap();
    assert!(status.success(), "the campaign finished cleanly: {status}");
}
