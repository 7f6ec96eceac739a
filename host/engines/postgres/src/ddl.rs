//! DDL against protected tables, decided before it runs: the event trigger
//! `fencing_ddl_start` (`ddl_command_start`, function `fencing._ddl_start`)
//! reads the statement's parse tree. The SQL handlers at `ddl_command_end`
//! and `sql_drop` (`sql/fencing.sql`) do what is only known afterwards.
//!
//! Refused (SQLSTATE 55000, with a hint), on a protected table:
//! - `ALTER COLUMN .. TYPE`, `DROP COLUMN` and `RENAME COLUMN` of its
//!   resource, token, lock or sequence column (names and values would change
//!   under the fences: unprotect, change, protect again);
//! - `DISABLE TRIGGER` of `fencing_guard_a` or `fencing_guard_truncate`,
//!   `DISABLE TRIGGER ALL`/`USER`, `ENABLE REPLICA TRIGGER` of either (each
//!   leaves writes undecided while the table still reads as protected), and
//!   renaming either trigger;
//! - `SET UNLOGGED` of a fence-in-row table (a crash would empty it, and
//!   its marks with it);
//! - `ATTACH PARTITION` of a table with rows, and `INHERIT` of a table with
//!   rows that is not protected alike (rows that were never decided would
//!   join the protected table);
//! - `ALTER TYPE .. RENAME VALUE` of an enum that names a protected table's
//!   resources (every resource of that label would be renamed).
//!
//! Done first: `DETACH PARTITION` of a fence-in-row partition gives its
//! marks back to `fencing.fences` (as `fencing.unprotect` does), so a
//! detached table written without the fence cannot lower them.

use crate::args::bad_argument;
use crate::owner::qualified_name;
use crate::protected::{self, Protection};
use crate::{carry, names};
use pgrx::pg_sys::{self, AlterTableType as At, Oid};
use pgrx::prelude::*;
use std::ffi::{CStr, c_char, c_void};

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_fencing_ddl_start() -> &'static pg_sys::Pg_finfo_record {
    const V1: &pg_sys::Pg_finfo_record = &pg_sys::Pg_finfo_record { api_version: 1 };
    V1
}

/// `fencing._ddl_start()`, the `ddl_command_start` event trigger function.
///
/// # Safety
/// Called by PostgreSQL's function manager as an event trigger function.
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn fencing_ddl_start(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: the guard runs the closure and reports its panics as ERRORs.
    unsafe {
        pg_sys::submodules::panic::pgrx_extern_c_guard(move || {
            start(fcinfo);
            pg_sys::Datum::from(0)
        })
    }
}

fn start(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: PostgreSQL passes a valid fcinfo; an event trigger's context is EventTriggerData.
    let tree = unsafe {
        let context = fcinfo.as_ref().map_or(std::ptr::null_mut(), |f| f.context);
        if context.is_null() || (*context).type_ != pg_sys::NodeTag::T_EventTriggerData {
            bad_argument(
                PgSqlErrorCode::ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED,
                "fencing: _ddl_start is an event trigger function".into(),
            );
        }
        (*context.cast::<pg_sys::EventTriggerData>()).parsetree
    };
    if tree.is_null() {
        return;
    }
    // SAFETY: the parse tree of the statement about to run; its tag says its type.
    unsafe {
        match (*tree).type_ {
            pg_sys::NodeTag::T_AlterTableStmt => alter_table(&*tree.cast::<pg_sys::AlterTableStmt>()),
            pg_sys::NodeTag::T_RenameStmt => rename(&*tree.cast::<pg_sys::RenameStmt>()),
            pg_sys::NodeTag::T_AlterEnumStmt => alter_enum(&*tree.cast::<pg_sys::AlterEnumStmt>()),
            _ => {}
        }
    }
}

/// Raises the refusal of a statement on a protected table.
fn refuse(message: String, hint: &str) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE, message, hint);
}

const UNPROTECT_FIRST: &str = "fencing.unprotect the table, make the change, and fencing.protect it again";

/// The elements of a parse tree's list.
///
/// # Safety
/// `list` is NULL or a pointer list of the parse tree.
unsafe fn elements(list: *mut pg_sys::List) -> Vec<*mut c_void> {
    if list.is_null() {
        return Vec::new();
    }
    // SAFETY: a List's `length` cells follow `elements`.
    unsafe {
        let l = &*list;
        (0..l.length as usize).map(|i| (*l.elements.add(i)).ptr_value).collect()
    }
}

/// A C string of the parse tree ("" for NULL).
fn text<'a>(s: *const c_char) -> &'a str {
    // SAFETY: NULL or a NUL-terminated string of the parse tree.
    if s.is_null() { "" } else { unsafe { CStr::from_ptr(s) }.to_str().unwrap_or("") }
}

/// The table a RangeVar names, if it exists (no lock is taken: the
/// statement takes its own).
fn relation(rv: *const pg_sys::RangeVar) -> Option<Oid> {
    if rv.is_null() {
        return None;
    }
    // SAFETY: a RangeVar of the parse tree; missing_ok answers InvalidOid.
    let relid = unsafe {
        pg_sys::RangeVarGetRelidExtended(
            rv,
            pg_sys::NoLock as i32,
            pg_sys::RVROption::RVR_MISSING_OK,
            None,
            std::ptr::null_mut(),
        )
    };
    (relid != Oid::INVALID).then_some(relid)
}

fn is_ours(trigger: &str) -> bool {
    trigger == "fencing_guard_a" || trigger == "fencing_guard_truncate"
}

/// `ALTER TABLE`: each subcommand against the table's protection.
fn alter_table(stmt: &pg_sys::AlterTableStmt) {
    if stmt.objtype != pg_sys::ObjectType::OBJECT_TABLE {
        return;
    }
    let Some(relid) = relation(stmt.relation) else { return };
    let protection = protected::of(relid);
    let table = || qualified_name(relid);
    // SAFETY: the statement's command list.
    for cmd in unsafe { elements(stmt.cmds) } {
        // SAFETY: an AlterTableStmt's list holds AlterTableCmds.
        let cmd = unsafe { &*cmd.cast::<pg_sys::AlterTableCmd>() };
        let name = text(cmd.name);
        let sub = cmd.subtype;
        if let Some(p) = &protection {
            if let (At::AT_AlterColumnType | At::AT_DropColumn, Some(role)) = (sub, p.role_of(name)) {
                refuse(format!("fencing: column {name} is the {role} of protected table {}", table()), UNPROTECT_FIRST);
            }
            if (matches!(sub, At::AT_DisableTrig | At::AT_EnableReplicaTrig) && is_ours(name))
                || matches!(sub, At::AT_DisableTrigAll | At::AT_DisableTrigUser)
            {
                refuse(
                    format!("fencing: this would stop the fence's triggers of protected table {} from firing", table()),
                    "writes to a protected table are always decided; fencing.unprotect takes a table out from under the fence",
                );
            }
            if sub == At::AT_SetUnLogged && p.in_row() {
                refuse(
                    format!("fencing: {} carries its fences in its rows; unlogged, a crash would empty it", table()),
                    UNPROTECT_FIRST,
                );
            }
            if sub == At::AT_AttachPartition {
                // SAFETY: ATTACH PARTITION's definition is a PartitionCmd.
                let part = unsafe { &*cmd.def.cast::<pg_sys::PartitionCmd>() };
                attach(relid, relation(part.name));
            }
            if matches!(sub, At::AT_DetachPartition | At::AT_DetachPartitionFinalize) && p.in_row() {
                // SAFETY: DETACH PARTITION's definition is a PartitionCmd.
                let part = unsafe { &*cmd.def.cast::<pg_sys::PartitionCmd>() };
                if let Some(part) = relation(part.name) {
                    release_tree(part);
                }
            }
        }
        if sub == At::AT_AddInherit {
            // SAFETY: INHERIT's definition is the parent's RangeVar.
            let parent = relation(cmd.def.cast::<pg_sys::RangeVar>());
            if let Some((parent, p)) = parent.and_then(|o| protected::of(o).map(|p| (o, p))) {
                inherit(relid, parent, &p);
            }
        }
    }
}

/// A table joining protected `parent` as a partition must bring no row.
fn attach(parent: Oid, part: Option<Oid>) {
    let Some(part) = part else { return };
    if !protected::is_empty(part) {
        refuse(
            format!(
                "fencing: {} has rows that were never decided; attached, they would join protected table {}",
                qualified_name(part),
                qualified_name(parent)
            ),
            "attach the partition empty and INSERT its rows (each is decided), or fencing.unprotect the table first",
        );
    }
}

/// A table joining protected `parent` by inheritance: empty, or protected alike.
fn inherit(child: Oid, parent: Oid, p: &Protection) {
    if p.in_row() {
        refuse(
            format!(
                "fencing: {} carries its fences in its rows; an inheritance child's rows would not be unique with its own",
                qualified_name(parent)
            ),
            "use a partitioned table, or protect the parent without fence_in_row",
        );
    }
    if protected::of(child).is_some_and(|c| c.args == p.args) || protected::is_empty(child) {
        return;
    }
    refuse(
        format!(
            "fencing: {} has rows that were never decided by the fence of {}; inherited, a statement on {} would reach them",
            qualified_name(child),
            qualified_name(parent),
            qualified_name(parent)
        ),
        "protect the child with the same settings first, or inherit it empty",
    );
}

/// Gives back the marks a leaving fence-in-row partition's rows (and its
/// own partitions') carry for the protected table.
fn release_tree(part: Oid) {
    if let Some(carrier) = protected::origin(part) {
        carry::give_back(part, carrier);
    }
}

/// `RENAME` of a fenced column or of the fence's triggers.
fn rename(stmt: &pg_sys::RenameStmt) {
    use pg_sys::ObjectType as Ot;
    if !matches!(stmt.renameType, Ot::OBJECT_COLUMN | Ot::OBJECT_TRIGGER) {
        return;
    }
    let Some(relid) = relation(stmt.relation) else { return };
    let Some(p) = protected::of(relid) else { return };
    let name = text(stmt.subname);
    if stmt.renameType == Ot::OBJECT_COLUMN
        && let Some(role) = p.role_of(name)
    {
        refuse(
            format!("fencing: column {name} is the {role} of protected table {}", qualified_name(relid)),
            UNPROTECT_FIRST,
        );
    }
    if stmt.renameType == Ot::OBJECT_TRIGGER && is_ours(name) {
        refuse(
            format!("fencing: {name} is the fence's trigger of protected table {}", qualified_name(relid)),
            UNPROTECT_FIRST,
        );
    }
}

/// `ALTER TYPE .. RENAME VALUE` of an enum that names resources.
fn alter_enum(stmt: &pg_sys::AlterEnumStmt) {
    if stmt.oldVal.is_null() {
        return;
    }
    // SAFETY: the statement's type name; a missing type answers InvalidOid.
    let enum_type = unsafe {
        let name = pg_sys::makeTypeNameFromNameList(stmt.typeName);
        pg_sys::LookupTypeNameOid(std::ptr::null_mut(), name, true)
    };
    if enum_type == Oid::INVALID {
        return;
    }
    for (relid, p) in protected::all() {
        let column = std::ffi::CString::new(p.args[0].as_str()).unwrap_or_default();
        // SAFETY: syscache lookups of a protected table's resource column.
        let base = unsafe {
            let attnum = pg_sys::get_attnum(relid, column.as_ptr());
            if attnum <= 0 {
                continue;
            }
            pg_sys::getBaseType(pg_sys::get_atttype(relid, attnum))
        };
        if base == enum_type {
            refuse(
                format!(
                    "fencing: renaming a value of {} renames the resources of protected table {} (its {} column), \
                     which would leave their fences behind",
                    names::type_name(enum_type),
                    qualified_name(relid),
                    p.args[0]
                ),
                "add a new value instead, or unprotect the table first",
            );
        }
    }
}
