//! The PostgreSQL extension's tests, one binary, against the extension
//! installed into the system PostgreSQL 15 (`scripts/pg-extension install`):
//! SQL functions and vectors (decisions and arguments), protected tables
//! with the fence in a fence row or in the row, names that no setting
//! changes, what a protected table's statements reach and how its columns
//! may change, rights (no role gains one; who may write and reset fences),
//! logical replication, operations (reset, plugins, cache), the reference
//! server deciding through the extension (`--pg-guard extension`), backups,
//! and signed tokens (`fencing.verify_keys`, `fencing.proof`).

mod arguments;
mod backup;
mod in_row;
mod names;
mod ops;
mod privilege;
mod replication;
mod signed;
mod sql;
mod tables;
