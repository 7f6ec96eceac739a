//! Load generators behind `fencing bench`.
//!
//! - [`writes`]: durable fenced writes on the storage engine, side by side
//!   with the same workload as a conditional `UPDATE` on SQLite ([`sqlite`]).

pub mod sqlite;
pub mod writes;
