//! The safety campaign: a seeded, time-bounded fault-injection run against the
//! real lock service and storage server, recorded as a history and judged by a
//! checker that knows nothing of the servers' code: this crate depends on
//! `fencing-api` and not on `fencing-server`, so the compiler holds it to that.
//! The servers run as child processes of the `fencing` binary it is given.
//!
//! # Layout
//! - [`wire`]: the HTTP bodies the clients send and decode.
//! - [`history`]: the JSON-lines history format (requests, outcomes, faults, restarts).
//! - [`check`]: the checker (also `fencing chaos check FILE`).
//! - [`client`]: one client process: acquire -> writes with sequences -> release, recorded.
//! - [`forger`]: a client that writes with made-up tokens above the high-water mark.
//! - [`proxy`]: the loopback TCP proxy that delays or drops client requests.
//! - [`servers`]: the lock service and storage server as restartable child processes.
//! - [`nemesis`]: the fault schedule (SIGSTOP/SIGCONT clients, SIGKILL servers, proxy faults).
//! - [`netns`]: network namespaces joined by a bridge, and partitions between them (nftables).
//! - [`report`]: the `timeline.html` page drawn from a history.
//! - [`campaign`]: spawns servers and clients, runs the nemesis, merges and checks the history.
//! - [`cluster`]: the distributed campaign: etcd, PostgreSQL, fencing servers and
//!   clients in network namespaces, with partitions and kills of each.

pub mod campaign;
pub mod check;
pub mod client;
pub mod cluster;
pub mod forger;
pub mod history;
pub mod nemesis;
pub mod netns;
pub mod proxy;
pub mod report;
pub mod servers;
pub mod wire;
