//! A protected row's values, read through the trigger's tuple: one column
//! ([`Column`], found by name in the table's descriptor), a row's value as
//! an integer, a lock's text or a resource's name (`names.rs`), and an
//! integer written back in the column's own width.

use crate::args::bad_argument;
use crate::names::{self, Naming};
use pgrx::prelude::*;
use std::num::NonZeroUsize;

/// One column of the row: its number, type and collation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Column {
    pub attnum: i16,
    pub type_oid: pg_sys::Oid,
    pub collation: pg_sys::Oid,
    /// The type is passed by value (`typbyval`).
    pub byval: bool,
}

/// One version of the row (old or new) with its table's descriptor.
pub struct Row {
    pub tuple: *mut pg_sys::HeapTupleData,
    pub desc: pg_sys::TupleDesc,
}

impl Row {
    pub fn datum(&self, c: Column) -> Option<pg_sys::Datum> {
        let attnum = NonZeroUsize::new(c.attnum as usize)?;
        // SAFETY: the tuple and descriptor belong to the firing trigger.
        unsafe { pgrx::heap_getattr_raw(self.tuple, attnum, self.desc) }
    }

    /// A text or varchar column's value (the lock column; `setup.rs` checked its type).
    pub fn text(&self, c: Column) -> Option<String> {
        let datum = self.datum(c)?;
        // SAFETY: a non-null text value of the row.
        unsafe { String::from_datum(datum, false) }
    }

    /// The resource column's value as a resource name (`names.rs`), or the
    /// refusal of a value that is not a name (`None` when NULL).
    pub fn name(&self, c: Column, naming: Naming, column: &str) -> Option<String> {
        let datum = self.datum(c)?;
        // SAFETY: a non-null value of the column's type, which `naming` was made for.
        match unsafe { names::name(naming, datum) } {
            Ok(name) => Some(name),
            Err(e) => {
                bad_argument(crate::args::sqlstate(e.code()), format!("fencing: the resource in column {column} {e}"))
            }
        }
    }

    /// Whether a by-value column holds the same value in both rows (`false`
    /// for other types: the caller compares their names).
    pub fn same(&self, other: &Row, c: Column) -> bool {
        c.byval && self.datum(c).map(|d| d.value()) == other.datum(c).map(|d| d.value())
    }

    /// An integer column (smallint, integer or bigint: `setup.rs` checked the type).
    pub fn int(&self, c: Column) -> Option<i64> {
        let datum = self.datum(c)?;
        Some(match c.type_oid {
            pg_sys::INT2OID => datum.value() as i16 as i64,
            pg_sys::INT4OID => datum.value() as i32 as i64,
            _ => datum.value() as i64,
        })
    }
}

/// Stores `value` in an integer column of its own width.
pub fn set_int(tuple: &mut PgHeapTuple<'_, AllocatedByRust>, c: Column, value: i64, name: &str) {
    let out_of_range = || -> ! {
        bad_argument(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("fencing: {value} does not fit the {name} column"),
        )
    };
    let stored = match c.type_oid {
        pg_sys::INT2OID => tuple.set_by_index(attnum(c), i16::try_from(value).unwrap_or_else(|_| out_of_range())),
        pg_sys::INT4OID => tuple.set_by_index(attnum(c), i32::try_from(value).unwrap_or_else(|_| out_of_range())),
        _ => tuple.set_by_index(attnum(c), value),
    };
    stored.unwrap_or_else(|e| {
        bad_argument(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("fencing: the {name} column: {e}"))
    });
}

/// Stores `value` in a text or varchar column.
pub fn set_text(tuple: &mut PgHeapTuple<'_, AllocatedByRust>, c: Column, value: &str, name: &str) {
    tuple.set_by_index(attnum(c), value).unwrap_or_else(|e| {
        bad_argument(PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH, format!("fencing: the {name} column: {e}"))
    });
}

/// A user column's number (columns are found by `setup.rs` among attnum > 0).
fn attnum(c: Column) -> NonZeroUsize {
    NonZeroUsize::new(c.attnum.max(1) as usize).unwrap_or(NonZeroUsize::MIN)
}
