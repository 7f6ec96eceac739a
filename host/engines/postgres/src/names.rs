//! A resource column's value as a resource name that no setting changes.
//!
//! A fence is found by its resource's name, so the same row must give the
//! same name in every session, and two values the table holds as one key
//! must give one name. A type's output function does neither in general:
//! `date` and `timestamp` print by `DateStyle`, `timestamptz` by `TimeZone`
//! as well, and `numeric` prints `1.50` and `1.5`, which are one key. So a
//! resource column has one of the types below (or a domain over one), and
//! its value is named here, never by the session's output function:
//!
//! | type | name |
//! |---|---|
//! | `text`, `varchar` (deterministic collation) | the text |
//! | `char(n)` (deterministic collation) | the text without its trailing spaces, as `char` compares |
//! | `smallint`, `integer`, `bigint` | decimal |
//! | `numeric` | decimal without insignificant trailing zeros (`1.50` is `1.5`), `NaN`, `Infinity` |
//! | `uuid` | lowercase, with hyphens |
//! | `date` | ISO 8601 (`2026-05-01`, `0044-03-15 BC`, `infinity`) |
//! | `timestamp` | ISO (`2026-05-01 12:00:00.5`) |
//! | `timestamptz` | ISO in UTC (`2026-05-01 12:00:00+00`) |
//! | an enum | its label |
//!
//! Other types are refused by `fencing.protect` and by every decision
//! (`float8` prints by `extra_float_digits`, `bytea` by `bytea_output`,
//! `money` by `lc_monetary`, a nondeterministic collation makes two texts
//! one key). The name then passes the shared name rule (`accept::name`).
//! `fencing.resource_name(value)` gives the name of any value from SQL.

use fencing_runtime::accept;
use pgrx::pg_sys::{self, Oid};
use std::ffi::{CStr, c_char};

/// How a resource column's values are named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    Int2,
    Int4,
    Int8,
    Text,
    /// `char(n)`: trailing spaces do not count.
    BpChar,
    Numeric,
    /// `uuid` and enums: their output functions depend on no setting.
    Output(Oid),
    Date,
    Timestamp,
    TimestampTz,
}

/// How values of `type_oid` under `collation` are named, or why they cannot be.
pub fn naming(type_oid: Oid, collation: Oid) -> Result<Naming, String> {
    // SAFETY: syscache lookups of a type that exists (the column's).
    let base = unsafe { pg_sys::getBaseType(type_oid) };
    let collated = |n: Naming| -> Result<Naming, String> {
        // SAFETY: a syscache lookup; an invalid collation is the default's.
        if collation != Oid::INVALID && !unsafe { pg_sys::get_collation_isdeterministic(collation) } {
            return Err(format!(
                "its collation {} is nondeterministic: values the table holds as one key would name different \
                 fences; use a deterministic collation",
                collation_name(collation)
            ));
        }
        Ok(n)
    };
    match base {
        pg_sys::INT2OID => Ok(Naming::Int2),
        pg_sys::INT4OID => Ok(Naming::Int4),
        pg_sys::INT8OID => Ok(Naming::Int8),
        pg_sys::TEXTOID | pg_sys::VARCHAROID => collated(Naming::Text),
        pg_sys::BPCHAROID => collated(Naming::BpChar),
        pg_sys::NUMERICOID => Ok(Naming::Numeric),
        pg_sys::DATEOID => Ok(Naming::Date),
        pg_sys::TIMESTAMPOID => Ok(Naming::Timestamp),
        pg_sys::TIMESTAMPTZOID => Ok(Naming::TimestampTz),
        // SAFETY: a syscache lookup.
        b if b == pg_sys::UUIDOID || unsafe { pg_sys::type_is_enum(b) } => Ok(Naming::Output(output_function(b))),
        _ => Err(format!(
            "its type {} has no name that every session reads alike (resource columns are text, varchar, char, \
             smallint, integer, bigint, numeric, uuid, date, timestamp, timestamptz or an enum)",
            type_name(type_oid)
        )),
    }
}

/// The resource name of a non-null `datum` of a column named by `naming`,
/// or why it is not a name by the shared rule (`accept::name`).
///
/// # Safety
/// `datum` must be a non-null value of the type `naming` was made for.
pub unsafe fn name(naming: Naming, datum: pg_sys::Datum) -> Result<String, accept::NameError> {
    // SAFETY (the whole match): `datum` is of the type `naming` was made for.
    let name = unsafe {
        match naming {
            Naming::Int2 => (datum.value() as i16).to_string(),
            Naming::Int4 => (datum.value() as i32).to_string(),
            Naming::Int8 => (datum.value() as i64).to_string(),
            Naming::Text => text(datum)?,
            Naming::BpChar => text(datum)?.trim_end_matches(' ').to_owned(),
            Naming::Numeric => {
                let numeric = pg_sys::pg_detoast_datum(datum.cast_mut_ptr()).cast();
                owned(pg_sys::numeric_normalize(numeric))
            }
            Naming::Output(function) => owned(pg_sys::OidOutputFunctionCall(function, datum)),
            Naming::Date => date(datum.value() as i32),
            Naming::Timestamp => timestamp(datum.value() as i64, false),
            Naming::TimestampTz => timestamp(datum.value() as i64, true),
        }
    };
    accept::name(&name)?;
    Ok(name)
}

/// A text datum's characters, refused when they are not UTF-8 (a database
/// in another encoding).
unsafe fn text(datum: pg_sys::Datum) -> Result<String, accept::NameError> {
    // SAFETY: a non-null text-like datum, per the caller.
    let bytes = unsafe {
        let value = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr());
        pgrx::varlena::varlena_to_byte_slice(value)
    };
    std::str::from_utf8(bytes).map(str::to_owned).map_err(|_| accept::NameError::NotUtf8)
}

/// A `date` in ISO 8601, by PostgreSQL's own encoder with the style fixed.
fn date(days: i32) -> String {
    match days {
        i32::MIN => return "-infinity".to_owned(),
        i32::MAX => return "infinity".to_owned(),
        _ => {}
    }
    let mut tm = pg_sys::pg_tm::default();
    let mut buf = [0 as c_char; pg_sys::MAXDATELEN as usize + 1];
    // SAFETY: j2date writes the three ints; EncodeDateOnly writes at most MAXDATELEN bytes and a NUL.
    unsafe {
        let julian = days + pg_sys::POSTGRES_EPOCH_JDATE as i32;
        pg_sys::j2date(julian, &mut tm.tm_year, &mut tm.tm_mon, &mut tm.tm_mday);
        pg_sys::EncodeDateOnly(&mut tm, pg_sys::USE_ISO_DATES as i32, buf.as_mut_ptr());
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}

/// A `timestamp` (or `timestamptz` in UTC, with `+00`) in ISO form.
fn timestamp(micros: i64, utc: bool) -> String {
    match micros {
        i64::MIN => return "-infinity".to_owned(),
        i64::MAX => return "infinity".to_owned(),
        _ => {}
    }
    let (mut tm, mut fsec) = (pg_sys::pg_tm::default(), 0);
    let mut buf = [0 as c_char; pg_sys::MAXDATELEN as usize + 1];
    // SAFETY: timestamp2tm without a time zone converts nothing (UTC for a
    // timestamptz); EncodeDateTime writes at most MAXDATELEN bytes and a NUL.
    unsafe {
        let null = std::ptr::null_mut();
        if pg_sys::timestamp2tm(micros, null, &mut tm, &mut fsec, std::ptr::null_mut(), null.cast()) != 0 {
            return format!("timestamp {micros}");
        }
        // Converted to no zone, the time is UTC's: say so for a timestamptz.
        tm.tm_isdst = if utc { 0 } else { -1 };
        pg_sys::EncodeDateTime(&mut tm, fsec, utc, 0, std::ptr::null(), pg_sys::USE_ISO_DATES as i32, buf.as_mut_ptr());
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    }
}

fn owned(s: *mut c_char) -> String {
    // SAFETY: a NUL-terminated string PostgreSQL returned.
    unsafe { CStr::from_ptr(s).to_string_lossy().into_owned() }
}

fn output_function(type_oid: Oid) -> Oid {
    let (mut out, mut varlena) = (Oid::INVALID, false);
    // SAFETY: a syscache lookup of an existing type.
    unsafe { pg_sys::getTypeOutputInfo(type_oid, &mut out, &mut varlena) };
    out
}

/// A type's name for messages (`format_type`).
pub fn type_name(type_oid: Oid) -> String {
    // SAFETY: format_type_be names any type OID.
    owned(unsafe { pg_sys::format_type_be(type_oid) })
}

fn collation_name(collation: Oid) -> String {
    // SAFETY: a syscache lookup; NULL when the collation is gone.
    let name = unsafe { pg_sys::get_collation_name(collation) };
    if name.is_null() { collation.to_u32().to_string() } else { owned(name) }
}
