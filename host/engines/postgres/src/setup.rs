//! A protected table's trigger arguments (its resource, token, lock and
//! sequence columns, policy, and where its fences live), resolved against
//! the table's descriptor: what each column may be is written once here,
//! for `fencing.protect` (`fencing._check_columns`) and for every decision.
//!
//! Invariants:
//! - the resource column is nameable (`names.rs`: one of the listed types,
//!   a deterministic collation); the token and sequence columns are
//!   `smallint`, `integer` or `bigint`; the lock column `text` or `varchar`;
//!   none of them is generated (a BEFORE trigger sees a generated column
//!   before it is computed);
//! - a setup is used only while every column is where, of the type and
//!   collation, and under the name it was resolved with: a row whose
//!   descriptor differs (an `ALTER TABLE` since) resolves again, and a column
//!   that no longer qualifies refuses the write (the column's type is thus
//!   checked at every decision, and a token column turned `numeric` is never
//!   read as an integer).

use crate::args::{bad_argument, policy};
use crate::names::{self, Naming};
use crate::row::Column;
use fencing_runtime::Policy;
use pgrx::prelude::*;
use pgrx::{PgTrigger, PgTriggerError};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::rc::Rc;

/// A trigger's arguments, resolved against its table's columns.
pub struct Setup {
    /// The resource, token, lock and sequence column names ("": none).
    pub names: [String; 4],
    pub resource: Column,
    pub naming: Naming,
    pub token: Column,
    pub lock: Option<Column>,
    pub sequence: Option<Column>,
    pub policy: Policy,
    /// The table carries its fences in its rows (`fence_in_row`).
    pub in_row: bool,
    /// The carrier of its rows' fences: the protected table whose trigger
    /// this is, or was cloned from (a partitioned table, for its partitions).
    pub carrier: pg_sys::Oid,
    /// The table is a partition: an UPDATE may move its row to another.
    pub partition: bool,
}

/// Why a column cannot play its part: SQLSTATE and message.
pub type Refused = (PgSqlErrorCode, String);

thread_local! {
    /// Setups by trigger OID: a trigger's arguments never change, and each
    /// use checks the columns against the table's current descriptor.
    static SETUPS: RefCell<HashMap<pg_sys::Oid, Rc<Setup>>> = RefCell::new(HashMap::new());
}

/// The live attributes of a descriptor.
fn attributes(desc: pg_sys::TupleDesc) -> &'static [pg_sys::FormData_pg_attribute] {
    // SAFETY: the descriptor belongs to an open relation; `natts` entries follow it.
    unsafe { (*desc).attrs.as_slice((*desc).natts as usize) }
}

fn attname(a: &pg_sys::FormData_pg_attribute) -> &[u8] {
    // SAFETY: attname is a NUL-terminated NameData.
    unsafe { CStr::from_ptr(a.attname.data.as_ptr()) }.to_bytes()
}

/// The column `name` of the descriptor as `role` (`resource_column`,
/// `token_column`, `lock_column`, `sequence_column`) needs it.
fn column(desc: pg_sys::TupleDesc, role: &str, name: &str) -> Result<Column, Refused> {
    let Some(a) = attributes(desc).iter().find(|a| !a.attisdropped && a.attnum > 0 && attname(a) == name.as_bytes())
    else {
        return Err((
            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            format!("fencing: {role}: the table has no column {name}"),
        ));
    };
    if a.attgenerated != 0 {
        return Err((
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            format!(
                "fencing: {role} {name} is a generated column: a BEFORE trigger sees it before it is computed, so \
                 the write would be decided on the wrong value; fence a column the writer sets"
            ),
        ));
    }
    let c = Column { attnum: a.attnum, type_oid: a.atttypid, collation: a.attcollation, byval: a.attbyval };
    let wrong_type = |expected: &str| -> Result<Column, Refused> {
        Err((
            PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
            format!("fencing: {role} {name} must be {expected}, not {}", names::type_name(c.type_oid)),
        ))
    };
    match role {
        "token_column" | "sequence_column" => match c.type_oid {
            pg_sys::INT8OID | pg_sys::INT4OID | pg_sys::INT2OID => Ok(c),
            _ => wrong_type("bigint, integer or smallint"),
        },
        "lock_column" => match c.type_oid {
            pg_sys::TEXTOID | pg_sys::VARCHAROID => Ok(c),
            _ => wrong_type("text or varchar"),
        },
        _ => match names::naming(c.type_oid, c.collation) {
            Ok(_) => Ok(c),
            Err(why) => Err((PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("fencing: {role} {name}: {why}"))),
        },
    }
}

impl Setup {
    /// The setup of `names` (resource, token, lock, sequence; "" for none)
    /// against a table's descriptor.
    pub fn resolve(desc: pg_sys::TupleDesc, names: [&str; 4], policy: Policy, in_row: bool) -> Result<Setup, Refused> {
        let optional = |role, name: &str| (!name.is_empty()).then(|| column(desc, role, name)).transpose();
        let resource = column(desc, "resource_column", names[0])?;
        let naming = names::naming(resource.type_oid, resource.collation)
            .map_err(|why| (PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, why))?;
        Ok(Setup {
            resource,
            naming,
            token: column(desc, "token_column", names[1])?,
            lock: optional("lock_column", names[2])?,
            sequence: optional("sequence_column", names[3])?,
            policy,
            in_row,
            carrier: pg_sys::Oid::INVALID,
            partition: false,
            names: names.map(str::to_owned),
        })
    }

    /// Whether every column is still where, and of the type, collation and
    /// name, it was.
    fn matches(&self, desc: pg_sys::TupleDesc) -> bool {
        let attrs = attributes(desc);
        let columns = [Some(self.resource), Some(self.token), self.lock, self.sequence];
        columns.iter().zip(&self.names).all(|(c, name)| match c {
            None => true,
            Some(c) => attrs.get(c.attnum as usize - 1).is_some_and(|a| {
                !a.attisdropped
                    && a.attgenerated == 0
                    && a.atttypid == c.type_oid
                    && a.attcollation == c.collation
                    && attname(a) == name.as_bytes()
            }),
        })
    }
}

/// The firing trigger's setup, resolved once per backend and again after
/// the table's columns changed; a column that no longer qualifies refuses
/// the write.
pub fn setup(
    trigger: &PgTrigger<'_>,
    relid: pg_sys::Oid,
    desc: pg_sys::TupleDesc,
) -> Result<Rc<Setup>, PgTriggerError> {
    // SAFETY: the trigger description belongs to the firing trigger.
    let oid = unsafe { (*trigger.trigger_data().tg_trigger).tgoid };
    if let Some(s) = SETUPS.with(|m| m.borrow().get(&oid).cloned())
        && s.matches(desc)
    {
        return Ok(s);
    }
    let args = trigger.extra_args()?;
    let again = || -> ! {
        bad_argument(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "fencing: protect the table again".into())
    };
    let [r, t, l, s, p, mode] = &args[..] else { again() };
    let resolved = Setup::resolve(desc, [r.as_str(), t, l, s], policy(p), mode == "row");
    let mut setup = resolved.unwrap_or_else(|(code, message)| {
        let table = crate::owner::qualified_name(relid);
        bad_argument(code, format!("{message} (table {table}, changed since fencing.protect; the write is refused)"))
    });
    if setup.in_row {
        setup.carrier = crate::protected::origin(relid).unwrap_or(relid);
        // A fence-in-row trigger that fencing.protect did not make (its rows
        // never claimed, its key never checked) keeps no fence.
        if !crate::protected::is_carrier(setup.carrier) {
            bad_argument(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "fencing: {} has a fence-in-row trigger that fencing.protect did not make; protect the table",
                    crate::owner::qualified_name(relid)
                ),
            );
        }
    }
    // SAFETY: a syscache lookup of the firing relation.
    setup.partition = unsafe { pg_sys::get_rel_relispartition(relid) };
    let setup = Rc::new(setup);
    SETUPS.with(|m| m.borrow_mut().insert(oid, setup.clone()));
    Ok(setup)
}

/// `fencing._check_columns(..)`: raises why `tbl`'s columns cannot be
/// protected as named (the rules of every decision), or returns.
#[pg_extern(name = "_check_columns", parallel_unsafe)]
fn check_columns(
    tbl: pg_sys::Oid,
    resource_column: &str,
    token_column: &str,
    lock_column: Option<&str>,
    sequence_column: Option<&str>,
) {
    // SAFETY: opens the table by OID (an unknown OID is PostgreSQL's error); the lock lasts the transaction.
    let rel = unsafe { pgrx::PgRelation::with_lock(tbl, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
    if !crate::owner::caller_owns(tbl) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("fencing: only the owner of {} may protect it", crate::owner::qualified_name(tbl)),
        );
    }
    let names = [resource_column, token_column, lock_column.unwrap_or(""), sequence_column.unwrap_or("")];
    if let Err((code, message)) = Setup::resolve(rel.tuple_desc().as_ptr(), names, Policy::NonDecreasing, false) {
        bad_argument(code, message);
    }
}
