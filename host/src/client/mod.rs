//! HTTP clients of the `fencing` services (used by the CLI, tests and benches).
//!
//! - [`storage`]: the storage API client.
//! - [`locks`]: the lock API client and [`locks::HeldLock`], which keeps a
//!   lease alive and hands out its fencing token only while it is held.

pub mod locks;
pub mod storage;
