//! `fencing_seal()`: the operator's switch for a connection that will run
//! SQL written by others.
//!
//! SQLite has no roles: whoever runs SQL on a read-write connection can drop
//! a trigger, a table or the fence table's guards, and with the extension
//! loaded can call `fencing_reset`, `fencing_unprotect` or `fencing_set_keys`.
//! An application that hands a connection to code it does not trust with
//! those (a plugin, a scripting layer, a tenant's queries) calls
//! `SELECT fencing_seal()` once it has configured the connection (keys,
//! plugin, protections). From then on the connection's authorizer denies,
//! at prepare time:
//! - the functions that change how the connection or a table is fenced:
//!   `fencing_protect`, `fencing_unprotect`, `fencing_reset`,
//!   `fencing_set_keys`, `fencing_use_plugin`;
//! - dropping, altering or re-indexing a protected table, and creating a
//!   trigger on one of the extension's tables or any object named `fencing_*`
//!   in `main`; dropping a `fencing_*` trigger or view;
//! - writing the extension's tables other than from the extension's own
//!   triggers (`fencing_*`);
//! - `PRAGMA writable_schema` and setting `PRAGMA trusted_schema`.
//!
//! Writes to protected tables, `fencing_present`, `fencing_present_proof`
//! and reads of every table go on as before. No SQL undoes the seal: only
//! the program holding the connection can, through SQLite's C API
//! (`sqlite3_set_authorizer`, Python's `set_authorizer(None)`, the shell's
//! `.auth off`), which also replaces it with the program's own authorizer:
//! SQLite keeps one per connection.
//!
//! Invariant: the authorizer reads only the session's sealed list; it runs
//! inside SQLite's prepare and must not run SQL itself.

use crate::args::fail;
use crate::fence_in_row::table_of;
use crate::session::{Session, State};
use rusqlite::functions::Context;
use rusqlite::{Result, ffi};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::sync::Mutex;

/// The functions a sealed connection cannot call.
const DENIED_FUNCTIONS: [&str; 5] =
    ["fencing_protect", "fencing_unprotect", "fencing_reset", "fencing_set_keys", "fencing_use_plugin"];

/// `fencing_seal()`: installs the authorizer; answers what it keeps.
pub fn seal(ctx: &Context<'_>, s: &Session) -> Result<String> {
    // SAFETY: the connection running this function; its reads finish before it returns.
    let db = unsafe { ctx.get_connection()? };
    let labels: Vec<String> = if crate::fence_in_row::exists(&db, "fencing_protected")? {
        db.prepare("SELECT tbl FROM main.fencing_protected")?.query_map([], |r| r.get(0))?.collect::<Result<_>>()?
    } else {
        Vec::new()
    };
    let mut tables = Vec::with_capacity(labels.len());
    for label in &labels {
        tables.push(table_of(&db, label)?.unwrap_or_else(|| label.clone()));
    }
    let n = tables.len();
    let data = {
        let mut state = s.lock();
        state.sealed = Some(tables);
        // One handle on the state is leaked to SQLite per connection: the
        // authorizer may run until the connection closes, after which
        // nothing calls it (a few hundred bytes per sealed connection).
        *state.authorizer_data.get_or_insert_with(|| s.leak() as usize)
    };
    // SAFETY: a live connection; `data` points at a `Mutex<State>` that is never freed.
    let rc = unsafe { ffi::sqlite3_set_authorizer(db.handle(), Some(authorize), data as *mut c_void) };
    if rc != ffi::SQLITE_OK {
        return Err(fail("fencing_seal: SQLite refused the authorizer"));
    }
    Ok(format!(
        "sealed: this connection can no longer reset, unprotect, re-protect or re-key fences, change the extension's \
         tables or alter the {n} protected tables; writes are fenced as before"
    ))
}

/// `name` begins with `fencing_`, in any case.
fn extension_name(name: &str) -> bool {
    name.get(..8).is_some_and(|p| p.eq_ignore_ascii_case("fencing_"))
}

/// What the authorizer decides for one action of a statement being prepared.
fn decide(state: &State, action: c_int, a1: Option<&str>, a2: Option<&str>, inner: Option<&str>) -> c_int {
    let Some(protected) = &state.sealed else { return ffi::SQLITE_OK };
    let is_protected = |t: Option<&str>| t.is_some_and(|t| protected.iter().any(|p| p.eq_ignore_ascii_case(t)));
    let ours = |t: Option<&str>| t.is_some_and(extension_name);
    let deny = match action {
        ffi::SQLITE_FUNCTION => a2.is_some_and(|f| DENIED_FUNCTIONS.iter().any(|d| d.eq_ignore_ascii_case(f))),
        ffi::SQLITE_DROP_TRIGGER | ffi::SQLITE_DROP_TEMP_TRIGGER | ffi::SQLITE_DROP_VIEW => ours(a1),
        ffi::SQLITE_CREATE_TRIGGER | ffi::SQLITE_CREATE_TEMP_TRIGGER => ours(a1) || ours(a2),
        ffi::SQLITE_CREATE_TABLE | ffi::SQLITE_CREATE_VIEW => ours(a1),
        ffi::SQLITE_CREATE_INDEX => ours(a1) || ours(a2) || is_protected(a2),
        ffi::SQLITE_DROP_TABLE => ours(a1) || is_protected(a1),
        // a1 is the schema, a2 the table.
        ffi::SQLITE_ALTER_TABLE => ours(a2) || is_protected(a2),
        ffi::SQLITE_INSERT | ffi::SQLITE_UPDATE | ffi::SQLITE_DELETE => ours(a1) && !ours(inner),
        ffi::SQLITE_PRAGMA => {
            a1.is_some_and(|p| p.eq_ignore_ascii_case("writable_schema"))
                || (a1.is_some_and(|p| p.eq_ignore_ascii_case("trusted_schema")) && a2.is_some())
        }
        _ => false,
    };
    if deny { ffi::SQLITE_DENY } else { ffi::SQLITE_OK }
}

/// The authorizer SQLite calls while preparing each statement of a sealed connection.
unsafe extern "C" fn authorize(
    data: *mut c_void,
    action: c_int,
    a1: *const c_char,
    a2: *const c_char,
    _schema: *const c_char,
    inner: *const c_char,
) -> c_int {
    let text = |p: *const c_char| {
        // SAFETY: SQLite passes NUL-terminated strings or NULL.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().ok()).flatten()
    };
    // SAFETY: `data` is the leaked `Mutex<State>` of `seal`, alive for the process.
    let state = unsafe { &*(data as *const Mutex<State>) };
    let state = state.lock().unwrap_or_else(|p| p.into_inner());
    decide(&state, action, text(a1), text(a2), text(inner))
}
