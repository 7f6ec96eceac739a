//! The reference fencing server: fenced storage, a lock service that hands
//! out fencing tokens, and the HTTP API in front of both.
//!
//! It decides every write with `fencing-runtime` (the `fencing:guard`
//! component, or when asked the same rules linked natively) and keeps every
//! resource's fence durable beside its data. The `fencing` command
//! (`host/server/cli`) parses flags and starts it; the JSON bodies it speaks are
//! `fencing-api`'s.
//!
//! # Layout
//! - [`http`]: errors naming the field (`mod.rs`), the accept loop and what
//!   bounds a connection (`conn.rs`), the checks every request passes first
//!   (`gate.rs`: Host, media type, origin, framing), body limit and JSON
//!   decoding (`body.rs`), bodies spooled past 64 KiB (`spool.rs`), strict
//!   query strings (`query.rs`), who may call what (`auth.rs`: the writers'
//!   token; `operators.rs`: the operators' tokens), the storage, lock and
//!   operator (fence reset, recorded in `audit.rs`) routes.
//! - [`storage`]: the fenced storage engine: the `Engine` trait and the guard
//!   decision (`mod.rs`), validation into `ValidWrite` (`validate.rs`), redb
//!   (behind its write-ahead log, `wal.rs`; committed by one leader at a
//!   time, a lone writer on its own thread, `group.rs`; opened, and reopened
//!   after a full disk, with its space reserve by `redb_lifecycle.rs`; objects
//!   being read shared by `read_cache.rs`) and PostgreSQL backends, the
//!   service and its telemetry.
//! - [`locks`]: the lock service (leases with fencing tokens): validation into
//!   `ValidAcquire`, lease ids, the embedded backend (its shards, lease
//!   journal and generation clock) and etcd.
//! - [`keys`]: the key files of signed tokens (`--signing-key`, `--verify-keys`).
//! - [`secrets`]: what every file holding a secret must be (private, a
//!   token long enough).
//! - `records` (private): the record framing both durable logs share.
//! - [`telemetry`]: the Prometheus registry behind `GET /metrics`.
//!
//! `docs/design.md` follows one write and one acquisition through these files.

pub mod http;
pub mod keys;
pub mod locks;
mod records;
pub mod secrets;
pub mod storage;
pub mod telemetry;
