//! Whose rights each statement of the extension runs with.
//!
//! Invariants (PostgreSQL's guidance for extensions, and why no role gains a
//! right through this one):
//! - the fence tables (`fencing.fences`, `fencing.carriers`) are written
//!   only as their owner ([`AsRole::extension_owner`]), by statements that
//!   name every table, function, type and operator with its schema
//!   (`OPERATOR(pg_catalog.=)`) and touch nothing but those tables and plain
//!   values: nothing the caller's `search_path` can put first is ever
//!   resolved, so no caller-supplied operator, cast or function runs there;
//! - a protected table is read or written by the extension only as the
//!   table's owner, in a restricted operation
//!   ([`AsRole::table_owner`], as PostgreSQL itself runs a table's index
//!   expressions during VACUUM): whatever the owner attached to the table
//!   (casts, domains, triggers, policies) runs with the owner's rights,
//!   cannot change the session's role, and its settings are undone after;
//! - the caller's role is restored on every exit (and by PostgreSQL's abort
//!   handling on an error).

use pgrx::pg_sys::{self, Oid};
use std::cell::Cell;

/// Runs as another role until dropped, then restores the caller's.
pub struct AsRole {
    user: Oid,
    context: i32,
    /// The GUC nest level to undo (a restricted operation's settings).
    nest_level: Option<i32>,
}

thread_local! {
    /// The owner of `fencing.fences`, looked up once per backend.
    static EXTENSION_OWNER: Cell<Option<Oid>> = const { Cell::new(None) };
}

impl AsRole {
    /// As the owner of the fence tables (a SECURITY DEFINER function's role).
    pub fn extension_owner() -> AsRole {
        AsRole::switch(extension_owner(), 0, false)
    }

    /// As the owner of table `relid`, in a restricted operation, with row
    /// security off (settings changed inside are undone).
    pub fn table_owner(relid: Oid) -> AsRole {
        AsRole::switch(relation_owner(relid), pg_sys::SECURITY_RESTRICTED_OPERATION as i32, true)
    }

    fn switch(role: Oid, flags: i32, own_settings: bool) -> AsRole {
        let (mut user, mut context) = (Oid::INVALID, 0);
        // SAFETY: reads and writes of the backend's current role, as
        // fmgr_security_definer and index builds do; restored in `drop`.
        let nest_level = unsafe {
            pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
            pg_sys::SetUserIdAndSecContext(role, context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32 | flags);
            own_settings.then(|| {
                let level = pg_sys::NewGUCNestLevel();
                // Row security off: a policy that would hide rows from the
                // owner makes the statement fail, never answer with fewer rows.
                pg_sys::set_config_option(
                    c"row_security".as_ptr(),
                    c"off".as_ptr(),
                    pg_sys::GucContext::PGC_USERSET,
                    pg_sys::GucSource::PGC_S_SESSION,
                    pg_sys::GucAction::GUC_ACTION_SAVE,
                    true,
                    0,
                    false,
                );
                level
            })
        };
        AsRole { user, context, nest_level }
    }
}

impl Drop for AsRole {
    fn drop(&mut self) {
        // SAFETY: undoes what `switch` did, innermost first.
        unsafe {
            if let Some(level) = self.nest_level {
                pg_sys::AtEOXact_GUC(false, level);
            }
            pg_sys::SetUserIdAndSecContext(self.user, self.context);
        }
    }
}

/// The role the calling statement runs as.
pub fn current_user() -> Oid {
    // SAFETY: a read of the backend's current role.
    unsafe { pg_sys::GetUserId() }
}

/// The owner of a relation.
pub fn relation_owner(relid: Oid) -> Oid {
    // SAFETY: the relation is opened (it exists: callers hold its OID from
    // the catalogs or a trigger), read and closed.
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            crate::args::bad_argument(
                pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("fencing: no table with oid {}", relid.to_u32()),
            );
        }
        let owner = (*(*rel).rd_rel).relowner;
        pg_sys::RelationClose(rel);
        owner
    }
}

/// The owner of `fencing.fences` (the extension's tables).
fn extension_owner() -> Oid {
    if let Some(owner) = EXTENSION_OWNER.get() {
        return owner;
    }
    // SAFETY: catalog lookups by name; both exist while the extension does.
    let fences = unsafe {
        let schema = pg_sys::get_namespace_oid(c"fencing".as_ptr(), false);
        pg_sys::get_relname_relid(c"fences".as_ptr(), schema)
    };
    let owner = relation_owner(fences);
    EXTENSION_OWNER.set(Some(owner));
    owner
}

/// Whether tables owned by `role` may raise fences: a member of
/// `fencing_writer` (with its privileges) or a superuser. A protected
/// table's writes raise the fences of whatever resources its rows name, so
/// a table whose owner holds no right to write fences (a role with CONNECT
/// only, and its TEMP table) decides nothing.
pub fn may_write_fences(role: Oid) -> bool {
    // SAFETY: a catalog lookup by name and a membership check (both cached by PostgreSQL).
    unsafe {
        if pg_sys::superuser_arg(role) {
            return true;
        }
        let writer = pg_sys::get_role_oid(c"fencing_writer".as_ptr(), true);
        writer != Oid::INVALID && pg_sys::has_privs_of_role(role, writer)
    }
}

/// Whether the calling role owns `relid` (or is a member of its owner, or a superuser).
pub fn caller_owns(relid: Oid) -> bool {
    // SAFETY: a catalog check of an existing relation.
    unsafe { pg_sys::pg_class_ownercheck(relid, current_user()) }
}

/// A relation's name, schema-qualified and quoted as SQL needs it.
pub fn qualified_name(relid: Oid) -> String {
    // SAFETY: syscache lookups; a NULL name (a relation that is gone) is refused.
    unsafe {
        let name = pg_sys::get_rel_name(relid);
        let schema = pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid));
        if name.is_null() || schema.is_null() {
            crate::args::bad_argument(
                pgrx::PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                format!("fencing: no table with oid {}", relid.to_u32()),
            );
        }
        let quoted = pg_sys::quote_qualified_identifier(schema, name);
        std::ffi::CStr::from_ptr(quoted).to_string_lossy().into_owned()
    }
}

/// An identifier quoted as SQL needs it.
pub fn quoted(ident: &str) -> String {
    let mut out = String::with_capacity(ident.len() + 2);
    out.push('"');
    for c in ident.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}
