//! The reference fencing server: the HTTP API in front of fenced storage and
//! a lock service that hands out fencing tokens.
//!
//! It decides every write with `fencing-runtime` (the `fencing:guard`
//! component, or when asked the same rules linked natively) and keeps every
//! resource's fence durable beside its data. The `fencing` command
//! (`host/server/cli`) parses flags and starts it; the JSON bodies it speaks are
//! `fencing-api`'s.
//!
//! The server is a family of crates, each a product with its own invariants
//! and tests, dependencies pointing one way:
//! `fencing-base` <- `fencing-store`, `fencing-locks` <- `fencing-server`.
//! The store and the lock service stand side by side (neither depends on the
//! other); what both need is `fencing-base`'s. This crate assembles them
//! behind HTTP and re-exports them under the names its users import
//! ([`storage`], [`locks`], [`telemetry`]).
//!
//! # Layout
//! - [`assembly`]: a server built from a typed [`assembly::Config`] (the
//!   roles, the store and its guard, the lock service, credentials, bounds),
//!   in the order its layers must take; `fencing serve` parses its flags
//!   into one.
//! - [`http`]: errors naming the field (`mod.rs`), the accept loop and what
//!   bounds a connection (`conn.rs`), the checks every request passes first
//!   (`gate.rs`: Host, media type, origin, framing), body limit and JSON
//!   decoding (`body.rs`), bodies spooled past 64 KiB (`spool.rs`), strict
//!   query strings (`query.rs`), who may call what (`auth.rs`: the writers'
//!   token; `operators.rs`: the operators' tokens), the storage, lock and
//!   operator (fence reset, recorded in `audit.rs`) routes.
//! - [`keys`]: the key files of signed tokens (`--signing-key`, `--verify-keys`).
//! - [`storage`] (`fencing-store`, `host/server/store`): the fenced storage
//!   engines (redb behind its write-ahead log, PostgreSQL), the guard's
//!   decision inside every write, validation, the service and its telemetry.
//! - [`locks`] (`fencing-locks`, `host/server/locks`): the lock service
//!   (leases with fencing tokens): validation into `ValidAcquire`, lease
//!   ids, the embedded backend (its shards, lease journal and generation
//!   clock), its offline operations and etcd.
//! - [`secrets`] (`fencing-base`): what every file holding a secret must be
//!   (private, a token long enough).
//! - [`telemetry`] (`fencing-base`, `host/server/base`): the Prometheus
//!   registry behind `GET /metrics`.
//!
//! `docs/design.md` follows one write and one acquisition through these files.

pub mod assembly;
pub mod http;
pub mod keys;

pub use fencing_base::{secrets, telemetry};
pub use fencing_locks as locks;
pub use fencing_store as storage;
