//! Which tables are protected and how: the arguments of a table's
//! `fencing_guard_a` (its own, or the clone a partition gets from its
//! partitioned parent), read from `pg_trigger` with fully qualified SQL.
//! `fencing._protection(tbl)` gives them to the SQL functions.

use crate::owner::{AsRole, qualified_name};
use crate::write::spi_failed;
use pgrx::prelude::*;

/// A protected table's settings: the trigger's six arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protection {
    /// Resource, token, lock and sequence columns ("" for none), policy, and `row` or `table`.
    pub args: Vec<String>,
    /// The trigger fires (`tgenabled` is not `D`).
    pub enabled: bool,
}

impl Protection {
    /// The table carries its fences in its rows.
    pub fn in_row(&self) -> bool {
        self.args.get(5).is_some_and(|m| m == "row")
    }

    /// The part column `name` plays (`resource_column`, ...), if any.
    pub fn role_of(&self, name: &str) -> Option<&'static str> {
        let roles = ["resource_column", "token_column", "lock_column", "sequence_column"];
        self.args.iter().zip(roles).find(|(a, _)| !a.is_empty() && a.as_str() == name).map(|(_, r)| r)
    }
}

/// The protection of `relid` (`None`: not protected).
pub fn of(relid: pg_sys::Oid) -> Option<Protection> {
    Spi::connect(|client| {
        let rows = client
            .select(
                "SELECT t.tgargs, t.tgenabled OPERATOR(pg_catalog.<>) 'D' FROM pg_catalog.pg_trigger t \
                 WHERE t.tgrelid OPERATOR(pg_catalog.=) $1 AND t.tgname OPERATOR(pg_catalog.=) 'fencing_guard_a' \
                 AND t.tgfoid OPERATOR(pg_catalog.=) 'fencing._guard_row()'::pg_catalog.regprocedure",
                None,
                &[relid.into()],
            )
            .unwrap_or_else(|e| spi_failed("read the table's trigger", e));
        let row = rows.first();
        let bytes: Option<Vec<u8>> = row.get(1).ok().flatten();
        // Each argument ends with a NUL byte.
        bytes.map(|b| {
            let mut args: Vec<String> = b.split(|&c| c == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
            args.pop();
            Protection { args, enabled: row.get::<bool>(2).ok().flatten().unwrap_or(false) }
        })
    })
}

/// Every protected table, with its protection.
pub fn all() -> Vec<(pg_sys::Oid, Protection)> {
    let tables: Vec<pg_sys::Oid> = Spi::connect(|client| {
        client
            .select(
                "SELECT t.tgrelid FROM pg_catalog.pg_trigger t \
                 WHERE t.tgname OPERATOR(pg_catalog.=) 'fencing_guard_a' \
                 AND t.tgfoid OPERATOR(pg_catalog.=) 'fencing._guard_row()'::pg_catalog.regprocedure",
                None,
                &[],
            )
            .unwrap_or_else(|e| spi_failed("list the protected tables", e))
            .filter_map(|row| row.get::<pg_sys::Oid>(1).ok().flatten())
            .collect()
    });
    tables.into_iter().filter_map(|t| of(t).map(|p| (t, p))).collect()
}

/// The table whose `fencing_guard_a` is the origin of `relid`'s: `relid`
/// itself, or for a partition the protected table its trigger was cloned
/// from. The carrier of a fence-in-row table's rows.
pub fn origin(relid: pg_sys::Oid) -> Option<pg_sys::Oid> {
    Spi::connect(|client| {
        client
            .select(
                "WITH RECURSIVE up(relid, parent) AS (
                     SELECT t.tgrelid, t.tgparentid FROM pg_catalog.pg_trigger t
                     WHERE t.tgrelid OPERATOR(pg_catalog.=) $1 AND t.tgname OPERATOR(pg_catalog.=) 'fencing_guard_a'
                     UNION ALL
                     SELECT t.tgrelid, t.tgparentid FROM pg_catalog.pg_trigger t
                     JOIN up ON t.oid OPERATOR(pg_catalog.=) up.parent)
                 SELECT up.relid FROM up WHERE up.parent OPERATOR(pg_catalog.=) 0::pg_catalog.oid",
                None,
                &[relid.into()],
            )
            .unwrap_or_else(|e| spi_failed("find the protected table", e))
            .first()
            .get::<pg_sys::Oid>(1)
            .ok()
            .flatten()
    })
}

/// Whether `relid` (with its partitions or children) has no row. Read as the
/// table's owner with row security off: a policy that would hide rows from
/// the owner makes this fail rather than answer "empty".
pub fn is_empty(relid: pg_sys::Oid) -> bool {
    let sql = format!("SELECT NOT EXISTS (SELECT 1 FROM {})", qualified_name(relid));
    let _owner = AsRole::table_owner(relid);
    Spi::connect(|client| {
        client
            .select(sql.as_str(), None, &[])
            .unwrap_or_else(|e| spi_failed("look for rows", e))
            .first()
            .get::<bool>(1)
            .ok()
            .flatten()
            .unwrap_or(false)
    })
}

/// `fencing._protection(tbl)`: the arguments of `tbl`'s `fencing_guard_a`
/// (resource, token, lock and sequence columns, policy, `row` or `table`),
/// NULL when the table is not protected.
#[pg_extern(name = "_protection", stable, parallel_safe)]
fn protection(tbl: pg_sys::Oid) -> Option<Vec<String>> {
    of(tbl).map(|p| p.args)
}

/// Whether `tbl` is registered as carrying its fences in its rows
/// (`fencing.carriers`, protected with `fence_in_row`).
pub fn is_carrier(tbl: pg_sys::Oid) -> bool {
    Spi::connect(|client| {
        client
            .select(
                "SELECT 1 FROM fencing.carriers c WHERE c.tbl::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
                None,
                &[tbl.into()],
            )
            .map(|rows| !rows.is_empty())
            .unwrap_or_else(|e| spi_failed("read the carriers", e))
    })
}
