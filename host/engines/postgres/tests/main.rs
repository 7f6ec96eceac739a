//! The PostgreSQL extension's tests, one binary, against the extension
//! installed into the system PostgreSQL 15 (`scripts/pg-extension install`):
//! SQL functions and vectors, protected tables with the fence in a fence row or
//! in the row, operations (reset, plugins, cache), the reference server
//! deciding through the extension (`--pg-guard extension`), backups, and
//! signed tokens (`fencing.verify_keys`, `fencing.proof`).

mod backup;
mod in_row;
mod ops;
mod signed;
mod sql;
