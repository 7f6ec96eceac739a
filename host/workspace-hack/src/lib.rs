//! No code. This crate's dependencies (its `Cargo.toml`, written by
//! `cargo hakari generate`) list every shared dependency with the union of
//! the features any package of the workspace asks of it.
//!
//! cargo resolves features per build: `cargo build -p fencing-postgres`,
//! the SQLite extension's workspace and `cargo test --workspace` would each
//! pick another feature set for serde, smallvec, syn and the rest, and so
//! compile wasmtime and cranelift again. With `--features shared-build`
//! (on `fencing`, `fencing-postgres` and `fencing-sqlite`) every such build
//! depends on this crate, sees one feature set, and reuses what the others
//! compiled. Users' builds do not enable it and never compile it.
//!
//! After changing a dependency: `cargo install --locked cargo-hakari` once,
//! then `cargo hakari generate`. A stale list only costs build time.
