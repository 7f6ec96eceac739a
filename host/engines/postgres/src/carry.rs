//! A fence-in-row table's claims on `fencing.fences`, in Rust so that no
//! statement with the extension owner's rights ever evaluates anything of
//! the protected table's but its columns (`owner.rs`).
//!
//! - `fencing._carry_claim(tbl)`: every row of `tbl` (with its partitions)
//!   claims its resource (`protect`): refused if a row is behind its
//!   resource's fence (a higher mark, another lock, a later sequence, or a
//!   claim by another table). The carrier is the protected table itself: a
//!   partitioned table's rows are unique across its partitions, so a row
//!   moving between partitions keeps its claim.
//! - `fencing._carry_release(tbl)`: the fences `tbl`'s rows carry go back to
//!   `fencing.fences`, never below the claim (`unprotect`); [`give_back`]
//!   does it for one partition leaving (`DETACH PARTITION`).
//! - `fencing._carried(tbl, resource)`: the fence a row carries (`fencing.fence`).
//! - `fencing._reset_carried(..)`: the operator's reset of a carried fence
//!   rewrites the row as the table's owner, past its trigger once.
//!
//! Rows are read as the extension's owner only column by column: names by
//! `fencing.resource_name` (no cast, no operator of the column's type), the
//! token and sequence as built-in integers, the lock as built-in text
//! (`setup.rs` checked every type first). A row is found by its name through
//! the column type's own input function and `OPERATOR(pg_catalog.=)`; a
//! domain is compared as its base type, so no domain check runs.

use crate::args::{bad_argument, check_name};
use crate::names;
use crate::owner::{self, AsRole, qualified_name, quoted};
use crate::protected;
use crate::setup::Setup;
use crate::trigger;
use crate::write::spi_failed;
use fencing_runtime::Policy;
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::ffi::CString;

/// A fence-in-row table's columns, as SQL needs them.
struct Carrier {
    relid: pg_sys::Oid,
    table: String,
    setup: Setup,
}

impl Carrier {
    /// `tbl` protected with `fence_in_row`, its trigger's columns checked as every decision checks them.
    fn of(relid: pg_sys::Oid) -> Option<Carrier> {
        let args = protected::of(relid).filter(|p| p.enabled && p.in_row())?.args;
        // SAFETY: the relation exists (its trigger was just read); the lock is PostgreSQL's to release.
        let rel = unsafe { pgrx::PgRelation::with_lock(relid, pg_sys::AccessShareLock as pg_sys::LOCKMODE) };
        let names = [args[0].as_str(), &args[1], &args[2], &args[3]];
        let setup = Setup::resolve(rel.tuple_desc().as_ptr(), names, Policy::NonDecreasing, true)
            .unwrap_or_else(|(code, message)| bad_argument(code, message));
        Some(Carrier { relid, table: qualified_name(relid), setup })
    }

    fn column(&self, i: usize) -> String {
        format!("t.{}", quoted(&self.setup.names[i]))
    }

    /// The row of each resource of this table (with its partitions), as
    /// `(resource, lock, token, sequence)` columns of `r`.
    fn rows(&self) -> String {
        self.rows_of(&self.table)
    }

    /// As [`Carrier::rows`], of table `from` (one of this table's partitions).
    fn rows_of(&self, from: &str) -> String {
        let resource = format!("fencing.resource_name({})", self.column(0));
        let lock = match self.setup.lock {
            Some(_) => format!("coalesce({}::pg_catalog.text, {resource})", self.column(2)),
            None => resource.clone(),
        };
        let sequence = match self.setup.sequence {
            Some(_) => format!("{}::pg_catalog.int8", self.column(3)),
            None => "NULL::pg_catalog.int8".to_owned(),
        };
        format!(
            "WITH r AS (SELECT {resource} AS resource, {lock} AS lock, {}::pg_catalog.int8 AS token, \
             {sequence} AS sequence FROM {from} t WHERE {} IS NOT NULL)",
            self.column(1),
            self.column(0)
        )
    }

    /// `$1` as the resource column's value (`value` of `$1` by the base type's
    /// input function), for `t.<resource> OPERATOR(pg_catalog.=) $1`.
    fn key<'a>(&self, resource: &str) -> DatumWithOid<'a> {
        // SAFETY: syscache lookups of the column's type; the input function
        // is a base type's own (never a domain's checks).
        unsafe {
            let base = pg_sys::getBaseType(self.setup.resource.type_oid);
            let (mut input, mut ioparam) = (pg_sys::Oid::INVALID, pg_sys::Oid::INVALID);
            pg_sys::getTypeInputInfo(base, &mut input, &mut ioparam);
            let text = CString::new(resource).unwrap_or_default();
            let datum = pg_sys::OidInputFunctionCall(input, text.as_ptr().cast_mut(), ioparam, -1);
            DatumWithOid::new(datum, base)
        }
    }
}

fn refuse_not_owner(relid: pg_sys::Oid, what: &str) {
    if !owner::caller_owns(relid) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("fencing: only the owner of {} may {what} it", qualified_name(relid)),
        );
    }
}

/// `fencing._carry_claim(tbl)`: every row of `tbl` claims its resource's
/// fence, or the call fails naming the first row that cannot.
#[pg_extern(name = "_carry_claim", parallel_unsafe)]
pub fn carry_claim(tbl: pg_sys::Oid) {
    refuse_not_owner(tbl, "protect");
    let Some(c) = Carrier::of(tbl) else {
        bad_argument(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("fencing: {} is not protected with fence_in_row", qualified_name(tbl)),
        )
    };
    durable_and_unique(&c);
    let rows = c.rows();
    let regclass = "$1::pg_catalog.oid::pg_catalog.regclass";
    let _owner = AsRole::extension_owner();
    Spi::connect_mut(|client| {
        let args = [c.relid.into()];
        let mut run =
            |sql: String, what| client.update(sql.as_str(), None, &args).unwrap_or_else(|e| spi_failed(what, e));
        run(
            format!("DELETE FROM fencing.carriers c WHERE c.tbl OPERATOR(pg_catalog.=) {regclass}"),
            "forget the carrier",
        );
        let (r, t, l, s) = (&c.setup.names[0], &c.setup.names[1], &c.setup.names[2], &c.setup.names[3]);
        let carrier_row = format!(
            "INSERT INTO fencing.carriers VALUES ({regclass}, {}, {}, {}, {})",
            literal(r),
            literal(t),
            if l.is_empty() { "NULL".into() } else { literal(l) },
            if s.is_empty() { "NULL".into() } else { literal(s) }
        );
        run(carrier_row, "record the carrier");
        let negative = run(
            format!("{rows} SELECT r.resource FROM r WHERE r.token OPERATOR(pg_catalog.<) 0 LIMIT 1"),
            "read the rows",
        );
        if let Some(resource) = negative.first().get::<String>(1).ok().flatten() {
            bad_argument(
                PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("fencing: the row for {resource} has a negative token"),
            );
        }
        // The upsert locks each existing fence and takes it only if the row
        // carries it at least as far; the check after it finds the rest.
        run(
            format!(
                "{rows} INSERT INTO fencing.fences AS f (resource, lock, high_water, sequence, carrier)
                 SELECT r.resource, r.lock, coalesce(r.token, 0), r.sequence, {regclass} FROM r
                 ON CONFLICT ON CONSTRAINT fences_pkey DO UPDATE SET lock = EXCLUDED.lock,
                     high_water = EXCLUDED.high_water, sequence = EXCLUDED.sequence, carrier = EXCLUDED.carrier,
                     updated_at = pg_catalog.now()
                 WHERE f.carrier IS NULL AND f.lock OPERATOR(pg_catalog.=) EXCLUDED.lock
                   AND f.high_water OPERATOR(pg_catalog.<=) EXCLUDED.high_water
                   AND NOT (f.high_water OPERATOR(pg_catalog.=) EXCLUDED.high_water
                            AND coalesce(f.sequence, -1) OPERATOR(pg_catalog.>) coalesce(EXCLUDED.sequence, -1))"
            ),
            "claim the fences",
        );
        let behind = run(
            format!(
                "{rows} SELECT r.resource, r.token, f.high_water, f.lock, r.lock,
                        f.carrier::pg_catalog.oid::pg_catalog.int8
                 FROM r JOIN fencing.fences f ON f.resource OPERATOR(pg_catalog.=) r.resource
                 WHERE f.carrier IS NULL OR f.carrier::pg_catalog.oid OPERATOR(pg_catalog.<>) $1 LIMIT 1"
            ),
            "check the claims",
        );
        let row = behind.first();
        let Some(resource) = row.get::<String>(1).ok().flatten() else { return };
        let token = row.get::<i64>(2).ok().flatten();
        let high_water = row.get::<i64>(3).ok().flatten().unwrap_or(0);
        let (fence_lock, lock) =
            (row.get::<String>(4).ok().flatten().unwrap_or_default(), row.get::<String>(5).ok().flatten());
        let carrier = row.get::<i64>(6).ok().flatten();
        let why = match (carrier, token) {
            (Some(other), _) => format!("table {} carries it", oid_name(other)),
            (None, None) => format!("the fence is at {high_water} and the row has no token"),
            (None, Some(t)) if high_water > t => format!("the fence is at {high_water}, above the row's token {t}"),
            _ if Some(&fence_lock) != lock.as_ref() => {
                format!("the fence is bound to lock {fence_lock}, the row to {}", lock.unwrap_or_default())
            }
            _ => "the fence's sequence is past the row's".to_owned(),
        };
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("fencing: the row for {resource} cannot carry its fence: {why}"),
            "write the row with a token that the fence admits first, or reset the fence (fencing.reset_fence)"
        );
    });
}

/// Refuses a carrier whose rows could be two for one resource, or lost on a
/// crash (checked by `protect` first, and again here, so that no trigger
/// made by hand claims anything).
fn durable_and_unique(c: &Carrier) {
    // SAFETY: a syscache lookup of an existing table.
    let persistence = unsafe { pg_sys::get_rel_persistence(c.relid) } as u8;
    let unique = Spi::connect(|client| {
        client
            .select(
                "SELECT fencing._unique_alone($1::pg_catalog.oid::pg_catalog.regclass, $2)",
                None,
                &[c.relid.into(), c.setup.names[0].as_str().into()],
            )
            .unwrap_or_else(|e| spi_failed("look for the unique key", e))
            .first()
            .get::<bool>(1)
            .ok()
            .flatten()
            .unwrap_or(false)
    });
    if persistence != b'p' || !unique {
        bad_argument(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "fencing: {} cannot carry fences in its rows: it must be a permanent table with {} unique on its own",
                c.table,
                quoted(&c.setup.names[0])
            ),
        );
    }
}

/// `fencing._carry_release(tbl)`: the fences `tbl` carries go back to
/// `fencing.fences` (never below the claim) and the table is no carrier.
#[pg_extern(name = "_carry_release", parallel_unsafe)]
pub fn carry_release(tbl: pg_sys::Oid) {
    if !protected::is_carrier(tbl) {
        return;
    }
    refuse_not_owner(tbl, "unprotect");
    give_back(tbl, tbl);
    let _owner = AsRole::extension_owner();
    Spi::connect_mut(|client| {
        let args = [tbl.into()];
        let mut run = |sql: &str, what| client.update(sql, None, &args).unwrap_or_else(|e| spi_failed(what, e));
        let carried = "f.carrier::pg_catalog.oid OPERATOR(pg_catalog.=) $1";
        // Claims of rows that never had an admitted write: no fence.
        run(
            &format!("DELETE FROM fencing.fences f WHERE {carried} AND f.high_water OPERATOR(pg_catalog.=) 0"),
            "drop empty claims",
        );
        run(&format!("UPDATE fencing.fences f SET carrier = NULL WHERE {carried}"), "release the claims");
        run(
            "DELETE FROM fencing.carriers c WHERE c.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
            "forget the carrier",
        );
    });
}

/// The marks the rows of `from` (the carrier itself, or a partition leaving
/// it) carry for `carrier`, written back to `fencing.fences` never below the
/// claim; those fences are no longer carried.
pub fn give_back(from: pg_sys::Oid, carrier: pg_sys::Oid) {
    refuse_not_owner(from, "detach or unprotect");
    // The columns as the claim recorded them (the trigger may be gone already).
    let Some(rows) = Carrier::of(carrier).map(|c| c.rows_of(&qualified_name(from))) else { return };
    let _owner = AsRole::extension_owner();
    Spi::connect_mut(|client| {
        client
            .update(
                format!(
                    "{rows} UPDATE fencing.fences f SET lock = r.lock, high_water = greatest(f.high_water, r.token),
                         sequence = CASE WHEN r.token OPERATOR(pg_catalog.>=) f.high_water THEN r.sequence
                                         ELSE f.sequence END,
                         carrier = NULL, updated_at = pg_catalog.now()
                     FROM r WHERE f.carrier::pg_catalog.oid OPERATOR(pg_catalog.=) $1
                       AND f.resource OPERATOR(pg_catalog.=) r.resource AND r.token IS NOT NULL"
                )
                .as_str(),
                None,
                &[carrier.into()],
            )
            .unwrap_or_else(|e| spi_failed("give the fences back", e));
    });
}

/// `fencing._carried(tbl, resource)`: the fence the row of `resource` in
/// `tbl` carries (no row: none, or the row has no token yet).
#[pg_extern(name = "_carried", parallel_unsafe)]
fn carried(
    tbl: pg_sys::Oid,
    resource: &str,
) -> TableIterator<'static, (name!(lock, String), name!(high_water, i64), name!(last_sequence, Option<i64>))> {
    let Some(c) = Carrier::of(tbl) else { return TableIterator::new(std::iter::empty()) };
    let lock = match c.setup.lock {
        Some(_) => format!("coalesce({}::pg_catalog.text, $2)", c.column(2)),
        None => "$2".to_owned(),
    };
    let sequence = match c.setup.sequence {
        Some(_) => format!("{}::pg_catalog.int8", c.column(3)),
        None => "NULL::pg_catalog.int8".to_owned(),
    };
    let sql = format!(
        "SELECT {lock}, {}::pg_catalog.int8, {sequence} FROM {} t \
         WHERE {} OPERATOR(pg_catalog.=) $1 AND {} IS NOT NULL",
        c.column(1),
        c.table,
        c.column(0),
        c.column(1)
    );
    let fence = Spi::connect(|client| {
        let rows = client
            .select(sql.as_str(), None, &[c.key(resource), resource.into()])
            .unwrap_or_else(|e| spi_failed("read the row's fence", e));
        let row = rows.first();
        let lock: Option<String> = row.get(1).ok().flatten();
        lock.map(|lock| (lock, row.get::<i64>(2).ok().flatten().unwrap_or(0), row.get::<i64>(3).ok().flatten()))
    });
    TableIterator::new(fence)
}

/// `fencing._reset_carried(tbl, resource, new_lock, new_high_water)`: the
/// operator's reset of a fence the row of `resource` carries. The row is
/// rewritten as the table's owner (its other triggers run with the owner's
/// rights), past its own fencing trigger once; the stored row must then
/// carry exactly the reset fence. Called by `fencing.reset_fence` only.
#[pg_extern(name = "_reset_carried", parallel_unsafe)]
fn reset_carried(tbl: pg_sys::Oid, resource: &str, new_lock: Option<&str>, new_high_water: Option<i64>) {
    let Some(c) = Carrier::of(tbl) else {
        bad_argument(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("fencing: {} is not protected with fence_in_row", qualified_name(tbl)),
        )
    };
    if let Some(lock) = new_lock {
        check_name("new_lock", lock);
        if c.setup.lock.is_none() && lock != resource {
            bad_argument(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("fencing: {} carries {resource} without a lock column, so its lock is {resource}", c.table),
            );
        }
    }
    let mut set = format!("{} = $2", quoted(&c.setup.names[1]));
    if c.setup.lock.is_some() && new_lock.is_some() {
        set.push_str(&format!(", {} = $3", quoted(&c.setup.names[2])));
    }
    if c.setup.sequence.is_some() {
        set.push_str(&format!(", {} = NULL", quoted(&c.setup.names[3])));
    }
    let sql = format!(
        "UPDATE {} t SET {set} WHERE {} OPERATOR(pg_catalog.=) $1 RETURNING {}::pg_catalog.int8",
        c.table,
        c.column(0),
        c.column(1)
    );
    let _owner = AsRole::table_owner(tbl);
    let pass = trigger::ResetPass::new(tbl, resource);
    let stored = Spi::connect_mut(|client| {
        let args = [c.key(resource), new_high_water.into(), new_lock.into()];
        let rows = client.update(sql.as_str(), None, &args).unwrap_or_else(|e| spi_failed("reset the row", e));
        (rows.len(), rows.first().get::<i64>(1).ok().flatten())
    });
    drop(pass);
    if stored != (1, new_high_water) {
        bad_argument(
            PgSqlErrorCode::ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION,
            format!(
                "fencing: resetting {resource} in {} left {} row(s) with token {:?}, not {:?}: another trigger of the \
                 table changed the row",
                c.table, stored.0, stored.1, new_high_water
            ),
        );
    }
}

/// `fencing.resource_name(value)`: the resource name a protected table's
/// trigger gives `value` (`names.rs`), whatever the session's settings.
#[pg_extern(name = "resource_name", immutable, parallel_safe)]
fn resource_name(value: pgrx::AnyElement, fcinfo: pg_sys::FunctionCallInfo) -> String {
    // SAFETY: the collation of this call's argument, from its call info.
    let collation = unsafe { (*fcinfo).fncollation };
    let naming = names::naming(value.oid(), collation)
        .unwrap_or_else(|why| bad_argument(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("fencing: {why}")));
    // SAFETY: a non-null value of the type `naming` was made for.
    unsafe { names::name(naming, value.datum()) }
        .unwrap_or_else(|e| bad_argument(crate::args::sqlstate(e.code()), format!("fencing: the resource {e}")))
}

/// A table by OID for a message (its OID when it is gone).
fn oid_name(oid: i64) -> String {
    let oid = pg_sys::Oid::from(u32::try_from(oid).unwrap_or(0));
    // SAFETY: a syscache lookup; NULL when the table is gone.
    let name = unsafe { pg_sys::get_rel_name(oid) };
    if name.is_null() {
        format!("oid {}", oid.to_u32())
    } else {
        // SAFETY: a NUL-terminated name from the syscache.
        unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy().into_owned()
    }
}

/// A SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
