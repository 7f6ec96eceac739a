//! The `fencing:guard` component inside SQLite.
//!
//! `SELECT load_extension('…/libfencing_sqlite')` (or the shell's `.load`)
//! registers SQL functions on the connection. `fencing_protect(..)` gives a
//! table triggers that decide every INSERT, UPDATE and DELETE inside the
//! writing statement: the component compares what the row presents with the
//! resource's fence in `fencing_fences`, an admission raises the fence in the
//! same transaction, and a refusal fails the statement (undoing every row it
//! changed) with a message that names the reason, the presented token and the
//! high-water mark. `docs/sqlite.md` is the user's guide.
//!
//! # Layout
//! - `guard.rs`: the component: one embedded guard per process, built on
//!   first use with the engine options of a host inside another program, or
//!   a plugin a connection chose; a call's failure becomes a refusal.
//! - `session.rs`: what a connection presents when a row does not carry it
//!   (`fencing_present`), and the connection's plugin.
//! - `args.rs`: what comes in from SQL, checked once by
//!   `fencing_runtime::accept` (names, policies, tokens as signed 64-bit,
//!   proofs), identifiers and literals quoted, and the error that fails a
//!   statement.
//! - `answer.rs`: the JSON of a decision and its evidence, and of a fence.
//! - `functions.rs`: the SQL functions, their flags, and what loading sets.
//! - `signed.rs`: signed tokens: the connection's verifier keys and the signed decision.
//! - `check_row.rs`: the triggers' decision of one row, and the admitted
//!   fence it hands to the trigger's body.
//! - `fences.rs`: the fence table and the guards that keep every mark.
//! - `fence_in_row.rs`: where a resource's mark lives: its fence row, raised
//!   by the token a protected row carries (fence in row), and the invariants
//!   that keep the two equal to the last admission.
//! - `schema.rs`: what a protected table must look like, and the unique keys
//!   its triggers watch (the fence named by the key as the table compares it).
//! - `triggers.rs`: the SQL of a protected table's triggers and view.
//! - `protect.rs`: `fencing_protect`/`fencing_unprotect`.
//! - `reset.rs`: the operator's recorded reset.
//! - `seal.rs`: `fencing_seal`, the authorizer of a connection that runs
//!   others' SQL.

mod answer;
mod args;
mod check_row;
mod fence_in_row;
mod fences;
mod functions;
mod guard;
mod protect;
mod reset;
mod schema;
mod seal;
mod session;
mod signed;
mod tables;
mod triggers;

use rusqlite::{Connection, ffi};
use std::os::raw::{c_char, c_int};

/// The entry point SQLite finds from the library's file name.
///
/// # Safety
/// Called by SQLite's extension loader with a live connection and its API table.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sqlite3_fencingsqlite_init(
    db: *mut ffi::sqlite3,
    err: *mut *mut c_char,
    api: *mut ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: forwarded as received from the loader.
    unsafe { Connection::extension_init2(db, err, api, functions::register) }
}
