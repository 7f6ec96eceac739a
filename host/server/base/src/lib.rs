//! What the reference server's products share: the lock service
//! (`fencing-locks`), the fenced store (`fencing-store`) and the HTTP server
//! over them (`fencing-server`).
//!
//! The lock service and the store sit side by side, neither above the
//! other: the lock service hands out tokens, the store checks them, and
//! neither calls the other. What both need therefore lives below both, in
//! this small crate, rather than in one of them (which would make the lock
//! service depend on the store, or the store on the lock service) or in
//! `fencing-server` (which depends on both). It holds no rule of either
//! product:
//! - both keep a durable log of fixed-format records synced in batches (the
//!   lease journal, the store's write-ahead log);
//! - both publish series into the one Prometheus registry behind
//!   `GET /metrics`, bounded per resource the same way;
//! - both must tell a full disk from other I/O failures, to say what the
//!   operator should do;
//! - the lock service names its directory in the recovery commands it
//!   prints, quoted for a shell as the server's secret-file checks quote
//!   theirs (`secrets.rs`, whose rules the HTTP server's token files and
//!   key files follow).
//!
//! # Layout
//! - [`records`]: records `[len u32][crc32 u32][payload]` and the
//!   zero-filled [`records::RecordFile`] both durable logs write and sync.
//! - [`telemetry`]: the process-wide [`telemetry::Metrics`] registry and
//!   [`telemetry::SeriesBound`], which keeps per-resource label values to a
//!   fixed number.
//! - [`secrets`]: what every file holding a secret must be (private, a token
//!   long enough), comparison in constant time, paths quoted for a shell.
//! - [`is_out_of_space`] (here): whether an I/O error means a full disk or quota.

pub mod records;
pub mod secrets;
pub mod telemetry;

/// Whether an I/O error means the disk (`ENOSPC`) or the user's quota (`EDQUOT`) is full.
pub fn is_out_of_space(e: &std::io::Error) -> bool {
    use nix::errno::Errno;
    e.raw_os_error().is_some_and(|code| code == Errno::ENOSPC as i32 || code == Errno::EDQUOT as i32)
}
