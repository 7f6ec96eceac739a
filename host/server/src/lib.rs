//! The reference fencing host (binary `fencing`).
//!
//! It decides every write with `fencing-runtime` (the `fencing:guard`
//! component, or when asked the same rules linked natively), stores data
//! behind durable fences, and serves a lease-based lock service that hands out
//! fencing tokens, behind one HTTP API.
//!
//! # Layout
//! - [`wire`]: the JSON bodies of both APIs, one definition each, and the one
//!   rule for names (`names.rs`).
//! - [`http`]: errors naming the field (`mod.rs`), the accept loop and what
//!   bounds a connection (`conn.rs`), the checks every request passes first
//!   (`gate.rs`: Host, media type, origin, framing), body limit and JSON
//!   decoding (`body.rs`), bodies spooled past 64 KiB (`spool.rs`), strict
//!   query strings (`query.rs`), bearer auth, the storage, lock and admin
//!   (fence reset) routes.
//! - [`storage`]: the fenced storage engine: the `Engine` trait and the guard
//!   decision (`mod.rs`), validation into `ValidWrite` (`validate.rs`), redb
//!   (behind its write-ahead log, `wal.rs`; committed by one leader at a
//!   time, a lone writer on its own thread, `group.rs`; opened, and reopened
//!   after a full disk, with its space reserve by `redb_open.rs`; objects
//!   being read shared by `read_cache.rs`) and PostgreSQL backends, the
//!   service and its telemetry.
//! - [`locks`]: the lock service (leases with fencing tokens): validation into
//!   `ValidAcquire`, lease ids, the embedded backend (its shards, lease
//!   journal and generation clock) and etcd.
//! - `records` (private): the record framing both durable logs share.
//! - [`client`]: HTTP clients, including the lease-keeping lock client.
//! - [`telemetry`]: the Prometheus registry behind `GET /metrics`.
//! - [`vectors`]: the shared test vectors (`tests/vectors/*.json`) and their runner.
//! - [`chaos`]: the safety campaign (fault injection, history, checker).
//! - [`bench`](mod@bench): the load generators behind `fencing bench`.
//! - [`cli`]: the `fencing` command line, one file per subcommand.
//!
//! `docs/design.md` follows one write and one acquisition through these files.

pub mod bench;
pub mod chaos;
pub mod cli;
pub mod client;
pub mod http;
pub mod locks;
mod records;
pub mod storage;
pub mod telemetry;
pub mod vectors;
pub mod wire;
