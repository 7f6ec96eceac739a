//! The `fencing:guard` component inside PostgreSQL.
//!
//! `CREATE EXTENSION fencing` puts the same `.wasm` every other host runs in
//! each backend that asks for a decision. A table passed to
//! `fencing.protect(..)` gets row triggers, so every INSERT, UPDATE and DELETE
//! of it, from any client, is decided in the writing transaction: the
//! resource's fence row in `fencing.fences` is locked, the component decides,
//! an admission raises the fence with the write and a refusal fails the
//! statement with its own SQLSTATE (class `FN`). `docs/postgres.md` is the
//! user's guide; `sql/fencing.sql` is the SQL surface.
//!
//! The write path is Rust (it runs for every protected row). pgrx reports
//! errors raised in Rust with PostgreSQL's own SQLSTATEs only, so the row
//! trigger raises its refusals through `raise.rs`, and the SQL functions
//! raise the same texts in PL/pgSQL.
//!
//! # Layout
//! - `args.rs`: what comes in from SQL, checked by the rules every host
//!   shares (`fencing_runtime::accept`: names, policies, tokens as `bigint`
//!   and as decimal settings, proofs), and the SQLSTATE of each refusal.
//! - `names.rs`: a resource column's value as a name no session setting
//!   changes (which types qualify, and their names).
//! - `owner.rs`: whose rights each statement runs with (the fence tables'
//!   owner, a protected table's owner in a restricted operation).
//! - `settings.rs`: the `fencing.*` settings (the plugin path and cache
//!   directory and the verifier keys, superuser-only; the token, lock,
//!   sequence and proof a statement presents).
//! - `guard.rs`: the backend's guard: built on first use, rebuilt when
//!   `fencing.plugin_path` changes, with the engine options a database
//!   backend needs (no signal handlers, no compile threads); with
//!   `fencing.verify_keys` set, every decision is a signed one.
//! - `write.rs`: one write against its resource's fence (lock the fence row,
//!   recognise the same write, decide, raise the fence), the one
//!   implementation behind the trigger and `fencing.try_write`.
//! - `trigger.rs`: the row trigger: what a row presents, the fence it is
//!   decided against (the fence row, or for `fence_in_row` the row itself),
//!   and its refusal; `setup.rs` (the trigger's arguments resolved and
//!   checked against the table's columns) and `row.rs` (a row's values)
//!   beneath it.
//! - `carry.rs`: a fence-in-row table's claims on `fencing.fences` (protect,
//!   unprotect, a partition detached), the fence a row carries, and the
//!   operator's reset of it.
//! - `protected.rs`: which tables are protected, and how.
//! - `ddl.rs`: the `ddl_command_start` event trigger: DDL that would leave a
//!   protected table's writes undecided or its fences wrong, refused.
//! - `raise.rs`: a refusal's SQLSTATE, message and evidence, written once
//!   (`fencing._refusal` for the PL/pgSQL functions), raised from the trigger.
//! - `functions.rs`: the other SQL-callable functions written in Rust
//!   (`fencing._decide`, `fencing._try_write`, `fencing.guard_info`,
//!   `fencing.guard_stats`, the argument checks for PL/pgSQL).
//! - `sql/fencing.sql`: tables, roles and grants, `fencing.admit`,
//!   `fencing.try_write` and `fencing.check`, the refusal SQLSTATEs,
//!   `fencing.protect`/`unprotect` (with what a table's statements reach),
//!   the operator's reset and its record, and the `ddl_command_end` and
//!   `sql_drop` event triggers.

use pgrx::prelude::*;

mod args;
mod carry;
mod ddl;
mod functions;
mod guard;
mod names;
mod owner;
mod protected;
mod raise;
mod row;
mod settings;
mod setup;
mod trigger;
mod write;

::pgrx::pg_module_magic!(name, version);

pgrx::extension_sql_file!("../sql/fencing.sql", name = "fencing_sql", finalize);

/// Runs when a backend loads the library (or the postmaster does, under
/// `shared_preload_libraries`): it only defines the settings. No engine and
/// no thread is created here, so nothing of the Wasm runtime is ever forked.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    settings::define();
}
