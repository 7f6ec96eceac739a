//! The fencing HTTP API as its clients see it: the JSON bodies of the storage
//! and lock APIs (one definition each, with the OpenAPI schemas the server
//! publishes) and clients for both.
//!
//! The reference server, the `fencing` command and the chaos campaign's
//! clients and checker all depend on this crate; it depends on none of them,
//! so a client (or the checker) cannot reach into the server's code.
//!
//! # Layout
//! - [`wire`]: the bodies: `storage.rs` (a write and the fence every storage
//!   answer shows, [`wire::storage::Mutation`]), `locks.rs` (acquire, renew,
//!   release, status, and [`wire::locks::Acquired`]), `names.rs` (the one
//!   rule for names both APIs share).
//! - [`client`]: the storage client and the lock client with
//!   [`client::locks::HeldLock`], which keeps a lease alive.
//! - [`auth`]: the bearer token read from a file, as the server and the
//!   clients both take it.

pub mod auth;
pub mod client;
pub mod wire;
