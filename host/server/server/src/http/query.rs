//! Query strings, decoded strictly: every GET endpoint names the parameters
//! it takes, and anything else is a 400 naming the parameter.
//!
//! Invariant: a query that passes has each known key at most once, no
//! unknown key, and every value is the exact UTF-8 its percent-escapes spell;
//! nothing is decoded loosely (a bad escape is never turned into U+FFFD, a
//! repeated key never silently keeps one of its values).

use super::ApiError;
use std::collections::HashMap;

/// The decoded parameters of one request.
#[derive(Debug, Default)]
pub struct Params(HashMap<&'static str, String>);

impl Params {
    /// Parses `query` (the part after `?`, if any), accepting only `allowed` keys.
    pub fn parse(query: Option<&str>, allowed: &[&'static str]) -> Result<Params, ApiError> {
        let mut params = HashMap::new();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(raw_key).map_err(|why| ApiError::field("query", format!("parameter name: {why}")))?;
            let Some(&known) = allowed.iter().find(|k| **k == key) else {
                let takes = if allowed.is_empty() {
                    "this endpoint takes no query parameters".to_owned()
                } else {
                    format!("this endpoint takes {}", allowed.join(", "))
                };
                let field = if key.is_empty() { "query".to_owned() } else { key };
                return Err(ApiError::field(field, format!("unknown query parameter ({takes})")));
            };
            let value = decode(raw_value).map_err(|why| ApiError::field(known, why))?;
            if params.insert(known, value).is_some() {
                return Err(ApiError::field(known, "query parameter given more than once"));
            }
        }
        Ok(Params(params))
    }

    /// A parameter that must be present.
    pub fn required(&self, name: &'static str) -> Result<&str, ApiError> {
        self.0.get(name).map(String::as_str).ok_or_else(|| ApiError::field(name, "query parameter is required"))
    }
}

/// Decodes `application/x-www-form-urlencoded` text: `+` is a space, `%XX`
/// must be two hex digits, and the bytes must be UTF-8.
fn decode(raw: &str) -> Result<String, String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit));
                let Some(&[hi, lo]) = hex else {
                    return Err(format!("bad percent-escape at byte {i} (`%` must be followed by two hex digits)"));
                };
                let byte = (hex_value(hi) << 4) | hex_value(lo);
                out.push(byte);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out)
        .map_err(|e| format!("percent-escapes do not spell UTF-8 (at byte {})", e.utf8_error().valid_up_to()))
}

/// The value of one ASCII hex digit (checked by the caller).
fn hex_value(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &["resource_id", "file_path"];

    #[test]
    fn decodes_escapes_and_plus() {
        let p = Params::parse(Some("resource_id=a%2Fb+c&file_path=%2Fx%C3%A9"), KEYS).unwrap();
        assert_eq!(p.required("resource_id").unwrap(), "a/b c");
        assert_eq!(p.required("file_path").unwrap(), "/xé");
    }

    #[test]
    fn refuses_repeats_unknown_keys_and_bad_escapes() {
        let field = |q: &str| Params::parse(Some(q), KEYS).unwrap_err().field;
        assert_eq!(field("resource_id=a&resource_id=b").as_deref(), Some("resource_id"));
        assert_eq!(field("resource=a").as_deref(), Some("resource"));
        assert_eq!(field("resource_id=%zz").as_deref(), Some("resource_id"));
        assert_eq!(field("resource_id=%4").as_deref(), Some("resource_id"));
        assert_eq!(field("resource_id=%+1").as_deref(), Some("resource_id"));
        assert_eq!(field("resource_id=%ff").as_deref(), Some("resource_id"), "not UTF-8");
        assert_eq!(field("%zz=1").as_deref(), Some("query"));
    }

    #[test]
    fn a_missing_parameter_is_named() {
        let p = Params::parse(None, KEYS).unwrap();
        assert_eq!(p.required("file_path").unwrap_err().field.as_deref(), Some("file_path"));
        assert!(Params::parse(Some("&&resource_id=a&"), KEYS).is_ok(), "empty pairs carry nothing");
    }
}
