//! What the functions take from SQL, checked once by `fencing_runtime::accept`'s
//! rules: names (resource and lock: text or bytes, UTF-8, 1 to 256
//! characters, no control character, no edge whitespace), tokens and
//! sequences (SQL integers: 0 to 2^63-1, a negative one refused, never
//! reinterpreted; or decimal text, as `@fencing_token` may hold it), policies
//! (spelled as in the contract) and proofs (hex text).
//!
//! A UDF argument arrives as one of MariaDB's four result types (string,
//! integer, real, decimal) or NULL; [`Value`] is that, borrowed. Every
//! refusal is an [`ArgError`]: which argument, the rule's code
//! (`name_control`, `number_negative`, ...) and the message every host
//! words the same way.

use fencing_runtime::{Policy, accept};
use std::fmt;
use udf::SqlResult;

/// An argument as MariaDB passed it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Null,
    Text(&'a [u8]),
    Int(i64),
    Real(f64),
    Decimal(&'a str),
}

impl<'a> From<SqlResult<'a>> for Value<'a> {
    fn from(r: SqlResult<'a>) -> Value<'a> {
        match r {
            SqlResult::String(Some(b)) => Value::Text(b),
            SqlResult::Int(Some(v)) => Value::Int(v),
            SqlResult::Real(Some(v)) => Value::Real(v),
            SqlResult::Decimal(Some(d)) => Value::Decimal(d),
            _ => Value::Null,
        }
    }
}

impl Value<'_> {
    /// The SQL type's name, for errors.
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Text(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Real(_) => "a floating-point number",
            Value::Decimal(_) => "a decimal number",
        }
    }
}

/// Why an argument was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// The argument, as the user knows it (`lock`, `@fencing_token`, ...).
    pub what: String,
    /// The rule's stable code (`name_control`), or `argument_type`/`argument_missing`.
    pub code: &'static str,
    /// The message, ending with the code in parentheses.
    pub message: String,
}

impl ArgError {
    fn new(what: &str, code: &'static str, problem: impl fmt::Display) -> ArgError {
        ArgError { what: what.to_string(), code, message: format!("{what} {problem}") }
    }

    /// A required argument that is NULL.
    pub fn missing(what: &str) -> ArgError {
        ArgError::new(what, "argument_missing", "is NULL (argument_missing)")
    }

    /// Whether SQL's numeric-range SQLSTATE (22003) fits better than 22023.
    pub fn out_of_range(&self) -> bool {
        matches!(self.code, "number_negative" | "number_above_signed" | "number_too_large")
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn wrong_type(what: &str, expected: &str, v: &Value<'_>) -> ArgError {
    ArgError::new(what, "argument_type", format_args!("must be {expected}, got {} (argument_type)", v.kind()))
}

/// A name (resource or lock); `None` for NULL. Integers and decimals are
/// named by their decimal text, as SQL shows them.
pub fn name(v: Value<'_>, what: &str) -> Result<Option<String>, ArgError> {
    let checked =
        |bytes: &[u8]| accept::name_bytes(bytes).map(str::to_owned).map_err(|e| ArgError::new(what, e.code(), e));
    match v {
        Value::Null => Ok(None),
        Value::Text(b) => checked(b).map(Some),
        Value::Int(i) => checked(i.to_string().as_bytes()).map(Some),
        Value::Decimal(d) => checked(d.as_bytes()).map(Some),
        Value::Real(_) => Err(wrong_type(what, "text", &v)),
    }
}

/// A token or sequence as SQL presents it: an integer (0 to 2^63-1) or its
/// canonical decimal text (up to 2^64-1 when `unsigned_text`, else also at
/// most 2^63-1); `None` for NULL.
pub fn number(v: Value<'_>, what: &str, unsigned_text: bool) -> Result<Option<u64>, ArgError> {
    let refused = |e: accept::NumberError| ArgError::new(what, e.code(), e);
    match v {
        Value::Null => Ok(None),
        Value::Int(i) => accept::from_signed(i).map(Some).map_err(refused),
        Value::Text(t) => {
            let n = accept::number(t).map_err(refused)?;
            if !unsigned_text {
                accept::to_signed(n).map_err(refused)?;
            }
            Ok(Some(n))
        }
        Value::Real(_) | Value::Decimal(_) => Err(wrong_type(what, "an integer or its decimal text", &v)),
    }
}

/// A policy by its contract name; NULL is the default, `non-decreasing`.
pub fn policy(v: Value<'_>) -> Result<Policy, ArgError> {
    match v {
        Value::Null => Ok(Policy::NonDecreasing),
        Value::Text(t) => accept::policy(t).map_err(|e| ArgError::new("policy", e.code(), e)),
        other => Err(wrong_type("policy", "text", &other)),
    }
}

/// A proof from its hex text; NULL is the empty proof (a missing one).
pub fn proof(v: Value<'_>, what: &str) -> Result<Vec<u8>, ArgError> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Text(t) => accept::proof(t).map_err(|e| ArgError::new(what, e.code(), e)),
        other => Err(wrong_type(what, "hex text", &other)),
    }
}

/// Text that is not a name (a table's name, verifier keys); `None` for NULL.
pub fn text<'a>(v: Value<'a>, what: &str) -> Result<Option<&'a str>, ArgError> {
    match v {
        Value::Null => Ok(None),
        Value::Text(t) => std::str::from_utf8(t)
            .map(Some)
            .map_err(|_| ArgError::new(what, "name_not_utf8", "is not UTF-8 text (name_not_utf8)")),
        other => Err(wrong_type(what, "text", &other)),
    }
}

/// An integer that is not a token (a verdict code); `None` for NULL.
pub fn int(v: Value<'_>, what: &str) -> Result<Option<i64>, ArgError> {
    match v {
        Value::Null => Ok(None),
        Value::Int(i) => Ok(Some(i)),
        other => Err(wrong_type(what, "an integer", &other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tokens_policies_and_proofs_follow_the_shared_rules() {
        assert_eq!(name(Value::Text(b"orders"), "lock"), Ok(Some("orders".into())));
        assert_eq!(name(Value::Int(42), "resource"), Ok(Some("42".into())));
        assert_eq!(name(Value::Null, "lock"), Ok(None));
        let nul = name(Value::Text(b"a\0b"), "lock").unwrap_err();
        assert_eq!(nul.code, "name_control");
        assert_eq!(nul.message, "lock contains control character U+0000 (name_control)");
        assert_eq!(name(Value::Real(1.5), "lock").unwrap_err().code, "argument_type");

        assert_eq!(number(Value::Int(34), "token", false), Ok(Some(34)));
        assert_eq!(number(Value::Int(-1), "token", false).unwrap_err().code, "number_negative");
        assert_eq!(number(Value::Text(b"34"), "token", false), Ok(Some(34)));
        assert_eq!(number(Value::Text(b"034"), "token", false).unwrap_err().code, "number_leading_zero");
        let big = Value::Text(b"9223372036854775808");
        assert_eq!(number(big, "token", false).unwrap_err().code, "number_above_signed");
        assert_eq!(number(big, "token", true), Ok(Some(1 << 63)));
        assert!(number(Value::Int(-1), "token", false).unwrap_err().out_of_range());

        assert_eq!(policy(Value::Null), Ok(Policy::NonDecreasing));
        assert_eq!(policy(Value::Text(b"strictly-increasing")), Ok(Policy::StrictlyIncreasing));
        assert_eq!(policy(Value::Text(b"non_decreasing")).unwrap_err().code, "policy_unknown");
        assert_eq!(proof(Value::Text(b"0aff"), "proof"), Ok(vec![10, 255]));
        assert_eq!(proof(Value::Text(b"zz"), "proof").unwrap_err().code, "proof_not_hex");
        assert_eq!(proof(Value::Null, "proof"), Ok(vec![]));
    }
}
