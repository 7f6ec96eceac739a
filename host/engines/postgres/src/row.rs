//! A protected row's values, read through the trigger's tuple: one column's
//! number and type ([`Column`], resolved by name), a row's value as an
//! integer or as text, and an integer written back in the column's own width.

use crate::args::bad_argument;
use pgrx::prelude::*;
use std::ffi::{CStr, CString};
use std::num::NonZeroUsize;

/// One column of the row: its number and type.
#[derive(Clone, Copy)]
pub struct Column {
    pub attnum: i16,
    pub type_oid: pg_sys::Oid,
    /// The type is passed by value (`typbyval`).
    pub byval: bool,
}

/// One version of the row (old or new) with its table's descriptor.
pub struct Row {
    pub tuple: *mut pg_sys::HeapTupleData,
    pub desc: pg_sys::TupleDesc,
}

impl Row {
    fn datum(&self, c: Column) -> Option<pg_sys::Datum> {
        let attnum = NonZeroUsize::new(c.attnum as usize)?;
        // SAFETY: the tuple and descriptor belong to the firing trigger.
        unsafe { pgrx::heap_getattr_raw(self.tuple, attnum, self.desc) }
    }

    /// The value as text, by its type's output function (integers and text directly).
    pub fn text(&self, c: Column) -> Option<String> {
        let datum = self.datum(c)?;
        match c.type_oid {
            pg_sys::INT2OID | pg_sys::INT4OID | pg_sys::INT8OID => return self.int(c).map(|v| v.to_string()),
            // SAFETY: a non-null text value of the row.
            pg_sys::TEXTOID | pg_sys::VARCHAROID => return unsafe { String::from_datum(datum, false) },
            _ => {}
        }
        let (mut out, mut varlena) = (pg_sys::Oid::INVALID, false);
        // SAFETY: `datum` is a non-null value of `c.type_oid`.
        unsafe {
            pg_sys::getTypeOutputInfo(c.type_oid, &mut out, &mut varlena);
            let text = pg_sys::OidOutputFunctionCall(out, datum);
            Some(CStr::from_ptr(text).to_string_lossy().into_owned())
        }
    }

    /// Whether a by-value column holds the same value in both rows (`false`
    /// for other types: the caller compares their text).
    pub fn same(&self, other: &Row, c: Column) -> bool {
        c.byval && self.datum(c).map(|d| d.value()) == other.datum(c).map(|d| d.value())
    }

    /// An integer column (smallint, integer or bigint; `protect` checked the type).
    pub fn int(&self, c: Column) -> Option<i64> {
        let datum = self.datum(c)?;
        Some(match c.type_oid {
            pg_sys::INT2OID => datum.value() as i16 as i64,
            pg_sys::INT4OID => datum.value() as i32 as i64,
            _ => datum.value() as i64,
        })
    }
}

/// The column `name` of table `relid` (`None` for "": no column was named).
pub fn column(relid: pg_sys::Oid, name: &str) -> Option<Column> {
    if name.is_empty() {
        return None;
    }
    let cname = CString::new(name).ok()?;
    // SAFETY: syscache lookups of the firing relation.
    let attnum = unsafe { pg_sys::get_attnum(relid, cname.as_ptr()) };
    if attnum <= 0 {
        bad_argument(
            PgSqlErrorCode::ERRCODE_UNDEFINED_COLUMN,
            format!("fencing: the protected table has no column {name} any more; protect it again"),
        );
    }
    // SAFETY: as above; the attribute exists.
    let type_oid = unsafe { pg_sys::get_atttype(relid, attnum) };
    // SAFETY: a syscache lookup of an existing type.
    let byval = unsafe { pg_sys::get_typbyval(type_oid) };
    Some(Column { attnum, type_oid, byval })
}

/// Stores `value` in an integer column of its own width.
pub fn set_int(tuple: &mut PgHeapTuple<'_, AllocatedByRust>, c: Column, value: i64, name: &str) {
    let attnum = NonZeroUsize::new(c.attnum as usize).expect("a user column");
    let out_of_range = || -> ! {
        bad_argument(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("fencing: {value} does not fit the {name} column"),
        )
    };
    let stored = match c.type_oid {
        pg_sys::INT2OID => tuple.set_by_index(attnum, i16::try_from(value).unwrap_or_else(|_| out_of_range())),
        pg_sys::INT4OID => tuple.set_by_index(attnum, i32::try_from(value).unwrap_or_else(|_| out_of_range())),
        _ => tuple.set_by_index(attnum, value),
    };
    stored.expect("the column accepts its own type");
}
