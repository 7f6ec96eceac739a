//! The fence inside MariaDB (and MySQL): a library of user-defined functions
//! that runs the `fencing:guard` component inside mariadbd, and the triggers
//! that call it for every INSERT, UPDATE and DELETE of a protected table.
//!
//! ```sql
//! -- once, as an administrator: sql/install.sql (CREATE FUNCTION .. SONAME 'libfencing_mariadb.so', the fencing schema)
//! CALL fencing.protect('app.orders', 'id', 'token');
//! UPDATE app.orders SET body = 'late', token = 33 WHERE id = 'o-1';
//! -- ERROR 1644 (FN001): fencing: stale_token: table app.orders, resource "o-1", lock "o-1": presented token 33, high_water 34 (bound to lock "o-1")
//! ```
//!
//! A UDF cannot read a table, and any account may call any UDF; so the
//! functions here are pure (a decision, its message, a trigger's SQL), and
//! what holds state or rights lives in SQL (`sql/install.sql`): the fences,
//! the settings only an administrator writes, the procedures that protect a
//! table and reset a fence, and the triggers, which run as their definer.
//! `docs/mariadb.md` is the user's guide.
//!
//! # Layout
//! - `boundary.rs`: no panic crosses into mariadbd.
//! - `args.rs`: what comes in from SQL, checked by `fencing_runtime::accept`.
//! - `guard.rs`: the process's guards (embedded, or an administrator's
//!   plugin) and verifiers, built once, as a host inside another program's
//!   process builds them.
//! - `decide.rs`: one row's verdict code, and the words of its refusal.
//! - `answer.rs`: the JSON of the decision functions on plain values.
//! - `triggers.rs`: the triggers of a protected table, generated.
//! - `functions.rs`: the UDFs themselves.

mod answer;
mod args;
mod boundary;
mod decide;
mod functions;
mod guard;
mod triggers;

pub use decide::code;
