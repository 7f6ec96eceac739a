//! Load generators behind `fencing bench`.
//!
//! - [`writes`]: durable fenced writes on the storage engine, side by side
//!   with the same workload as a conditional `UPDATE` on SQLite ([`sqlite`]);
//!   both report a [`write_results::RunResult`].
//! - [`locks`]: acquire+release cycles over loopback HTTP against the
//!   embedded backend and, when given, etcd.
//! - [`restart`]: how long a lock service restart keeps locks away, with
//!   leases held.

pub mod locks;
pub mod restart;
pub mod sqlite;
pub mod write_results;
pub mod writes;
