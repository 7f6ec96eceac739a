//! Load generators behind `fencing bench`.
//!
//! - [`writes`]: durable fenced writes on the storage engine, side by side
//!   with the same workload as a conditional `UPDATE` on SQLite ([`sqlite`]).
//! - [`locks`]: acquire+release cycles over loopback HTTP against the
//!   embedded backend and, when given, etcd.

pub mod locks;
pub mod sqlite;
pub mod writes;
