//! Request bodies decoded as JSON whose errors name the field. [`ApiJson`]
//! receives (as `spool.rs` describes: the size limit, the timeout, large
//! bodies through a temporary file) and decodes for a handler, in one step;
//! [`HeldJson`] also keeps the spooled body's permit; [`decode_json`]
//! is the decoding alone, for the named decoders the fuzz targets drive
//! (`storage::decode_write`, `locks::decode_acquire`).
//!
//! Invariant: a body that fails here reaches no handler, so it changes nothing.

use super::ApiError;
pub use super::spool::MAX_BODY_BYTES;
use super::spool::{self, Held};
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// A JSON body, decoded: 413 `body_too_large` over the limit, 408
/// `body_timeout` when it stalls, 400 `malformed_json` or `invalid_field`
/// (naming the field) when it does not decode. The body is received as
/// `spool.rs` receives it; a spooled one's permit ends with the decoding.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send + 'static> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let HeldJson(value, _permit) = HeldJson::from_request(req, state).await?;
        Ok(ApiJson(value))
    }
}

/// [`ApiJson`] that keeps a spooled body's permit: for a handler whose
/// decoded value is as large as its body (a storage write), so that the
/// permits bound the memory until the request is answered.
pub struct HeldJson<T>(pub T, pub Held);

impl<S: Send + Sync, T: DeserializeOwned + Send + 'static> FromRequest<S> for HeldJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, ApiError> {
        let received = spool::receive(req).await?;
        let value = if received.permit.spooled() {
            // Large: decoded off the request threads.
            let bytes = received.bytes;
            tokio::task::spawn_blocking(move || decode_json(&bytes)).await.map_err(ApiError::internal)??
        } else {
            decode_json(&received.bytes)?
        };
        Ok(HeldJson(value, received.permit))
    }
}

/// Decodes JSON, naming the path of the first field that failed (a missing
/// field by its own path, not its parent's). Anything but whitespace after the
/// value is refused as malformed, and so is an array anywhere: every request
/// body of this API is an object of scalars and objects (the OpenAPI test
/// `request_bodies_hold_no_arrays` keeps it so), while serde would read an
/// array as a record's fields in order.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if let Some(at) = first_array(bytes) {
        let message = format!("a JSON array at byte {at}: request bodies are JSON objects, fields by name");
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_field", message).with_field("body"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = known_path(e.path());
        let inner = e.into_inner();
        let parent = if path.is_empty() { None } else { Some(path) };
        let code = if inner.is_syntax() || inner.is_eof() { "malformed_json" } else { "invalid_field" };
        let message = inner.to_string();
        // A fault that is not inside any field (not JSON, not an object) is the body's.
        let field = match missing_field(&message) {
            Some(name) => Some(parent.map_or_else(|| name.to_owned(), |p| format!("{p}.{name}"))),
            None => Some(parent.unwrap_or_else(|| "body".to_owned())),
        };
        ApiError { status: StatusCode::BAD_REQUEST, code, message, field }
    })?;
    de.end().map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.to_string()).with_field("body"))?;
    Ok(value)
}

/// The fields of `path` the decoder knew when it failed: a body cut short
/// where a key was due has an unknown (`?`) last segment, which names
/// nothing; what is left names where the body broke off (or nothing, and
/// then the body itself is named).
fn known_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut known = Vec::new();
    for segment in path.iter() {
        match segment {
            Segment::Map { key } => known.push(key.clone()),
            Segment::Seq { index } => known.push(index.to_string()),
            Segment::Enum { variant } => known.push(variant.clone()),
            Segment::Unknown => break,
        }
    }
    known.join(".")
}

/// The offset of the first `[` outside a JSON string, if any. It runs on
/// every body before the decoding, so it jumps between the three bytes that
/// matter (a base64 payload holds none of them) instead of walking each one.
fn first_array(bytes: &[u8]) -> Option<usize> {
    let (mut at, mut in_string) = (0, false);
    while let Some(rest) = bytes.get(at..) {
        let i = at + memchr::memchr3(b'"', b'\\', b'[', rest)?;
        match (in_string, bytes[i]) {
            // An escape inside a string: the next byte is part of it, whatever it is.
            (true, b'\\') => {
                at = i + 2;
                continue;
            }
            (_, b'"') => in_string = !in_string,
            (false, b'[') => return Some(i),
            _ => {}
        }
        at = i + 1;
    }
    None
}

/// The field serde names in "missing field `name`" (it reports the parent's path).
fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `").and_then(|rest| rest.split_once('`')).map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        #[allow(dead_code)]
        outer: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        #[allow(dead_code)]
        n: u64,
    }

    #[test]
    fn decode_json_accepts_a_valid_body() {
        assert!(decode_json::<Body>(br#"{"outer":{"n":7}}"#).is_ok());
    }

    #[test]
    fn decode_json_names_the_failing_field() {
        let e = decode_json::<Body>(br#"{"outer":{"n":"seven"}}"#).unwrap_err();
        assert_eq!((e.status, e.code, e.field.as_deref()), (StatusCode::BAD_REQUEST, "invalid_field", Some("outer.n")));
    }

    #[test]
    fn decode_json_names_a_missing_field_by_its_own_path() {
        let e = decode_json::<Body>(br#"{"outer":{}}"#).unwrap_err();
        assert_eq!((e.code, e.field.as_deref()), ("invalid_field", Some("outer.n")));
        let e = decode_json::<Body>(br#"{}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("outer"));
    }

    #[test]
    fn arrays_are_refused_anywhere_but_inside_strings() {
        for body in [&br#"[{"n":7}]"#[..], br#"{"outer":[7]}"#, br#" [7]"#] {
            let e = decode_json::<Body>(body).unwrap_err();
            assert_eq!(
                (e.status, e.code, e.field.as_deref()),
                (StatusCode::BAD_REQUEST, "invalid_field", Some("body"))
            );
        }
        assert!(decode_json::<Body>(br#"{"outer":{"n":7}}"#).is_ok());
        assert_eq!(first_array(br#"{"a":"[x]","b":"q\"[","c":[1]}"#), Some(26));
        assert_eq!(first_array(br#"{"a":"\\","b":"["}"#), None, "an escaped backslash ends before the quote");
        assert_eq!(first_array(br#"{"a":"\"#), None, "an escape at the very end reads past nothing");
        assert_eq!(first_array(br#"{"a":"x"}["#), Some(9));
    }

    #[test]
    fn decode_json_refuses_bytes_after_the_value() {
        let e = decode_json::<Body>(br#"{"outer":{"n":7}} {"outer":{"n":8}}"#).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, "malformed_json"));
        assert!(decode_json::<Body>(b"{\"outer\":{\"n\":7}}\n ").is_ok(), "trailing whitespace is not data");
    }

    #[test]
    fn a_body_cut_short_names_where_it_broke_off() {
        let field = |body: &[u8]| decode_json::<Body>(body).unwrap_err().field;
        assert_eq!(field(br#"{"outer":{"n":"#).as_deref(), Some("outer.n"));
        assert_eq!(field(br#"{"outer":{"n":7"#).as_deref(), Some("outer"));
        assert_eq!(field(br#"{"outer":{"#).as_deref(), Some("outer"));
        assert_eq!(field(br#"{"outer":{"n":7},"#).as_deref(), Some("body"));
        assert_eq!(field(br#"{"#).as_deref(), Some("body"));
        assert_eq!(field(br#"{"out"#).as_deref(), Some("body"));
        for cut in 1..br#"{"outer":{"n":7}}"#.len() {
            let e = decode_json::<Body>(&br#"{"outer":{"n":7}}"#[..cut]).unwrap_err();
            assert!(e.field.as_deref().is_some_and(|f| !f.contains('?') && !f.is_empty()), "{cut}: {e:?}");
        }
    }

    #[test]
    fn decode_json_reports_malformed_json() {
        let e = decode_json::<Body>(br#"{"outer":"#).unwrap_err();
        assert_eq!(e.code, "malformed_json");
        let e = decode_json::<Body>(b"not json").unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("malformed_json", Some("body")),
            "a fault outside any field is the body's"
        );
        let e = decode_json::<Body>(b"[1, 2]").unwrap_err();
        assert!(e.field.is_some(), "a body of the wrong shape still names where: {e:?}");
    }
}
