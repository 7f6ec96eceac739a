//! Optional bearer-token authentication for the mutating endpoints.
//!
//! `fencing serve --auth-token-file PATH` loads one shared token; from then on
//! every request whose method can change state (anything but `GET`, `HEAD` and
//! `OPTIONS`: storage writes, lock acquire/renew/release, and any route added
//! later) must carry `Authorization: Bearer <token>`. A missing, malformed or
//! wrong header gets 401 with the usual JSON error body (`code`
//! `unauthorized`, `field` `authorization`) and a `WWW-Authenticate: Bearer`
//! challenge, and the request never reaches its handler, so a refused request
//! changes nothing. Reads (`/v1/storage/read`, `/v1/storage/fence`,
//! `/v1/locks/status`) and `GET /metrics` stay open, unless the server runs
//! with `--auth-reads`, which puts every request behind the token.
//!
//! Invariants:
//! - the token is non-empty printable ASCII without spaces (so it always fits
//!   in a header); the file's trailing newline is not part of it;
//! - the comparison takes time that depends only on the configured token's
//!   length, never on how many leading bytes of a guess are right (see
//!   [`constant_time_eq`]), so the token cannot be recovered byte by byte by
//!   timing the 401s.

use super::{ApiError, is_mutating};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
pub use fencing_api::auth::{TokenFileError, read_token_file};
use std::sync::Arc;

/// The configured token, shared by every request.
#[derive(Clone)]
pub struct BearerAuth {
    token: Arc<[u8]>,
    /// Whether reads and `/metrics` need the token too (`--auth-reads`).
    reads: bool,
}

impl BearerAuth {
    /// Mutating requests need `token`.
    pub fn new(token: &str) -> BearerAuth {
        BearerAuth { token: token.as_bytes().into(), reads: false }
    }

    /// Every request needs the token, reads and `/metrics` included.
    pub fn with_reads(mut self, reads: bool) -> BearerAuth {
        self.reads = reads;
        self
    }

    /// Whether an `Authorization` header value carries the configured token.
    pub fn accepts(&self, header: Option<&HeaderValue>) -> bool {
        let Some(value) = header.map(HeaderValue::as_bytes) else { return false };
        // The scheme is case-insensitive (RFC 7235); exactly one space follows it.
        if value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
            return false;
        }
        constant_time_eq(&value[7..], &self.token)
    }
}

/// Compares a presented secret with the expected one in time that depends only
/// on `expected.len()`: every byte of `expected` is visited and differences are
/// OR-ed together, with no early exit on the first mismatch. A length mismatch
/// is folded into the result instead of returning early. `black_box` keeps the
/// optimizer from turning the loop back into a short-circuiting compare.
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = u64::from(presented.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(!e);
        diff |= u64::from(std::hint::black_box(p ^ e));
    }
    std::hint::black_box(diff) == 0
}

/// Middleware: refuses unauthenticated mutating requests with 401.
pub async fn require_bearer(State(auth): State<BearerAuth>, req: Request, next: Next) -> Response {
    let needed = auth.reads || is_mutating(req.method());
    if !needed || auth.accepts(req.headers().get(header::AUTHORIZATION)) {
        return next.run(req).await;
    }
    let (message, challenge) = match req.headers().get(header::AUTHORIZATION) {
        None => ("this endpoint needs `Authorization: Bearer <token>`", r#"Bearer realm="fencing""#),
        Some(_) => ("the bearer token is missing or wrong", r#"Bearer realm="fencing", error="invalid_token""#),
    };
    let error = ApiError {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthorized",
        message: message.into(),
        field: Some("authorization".into()),
    };
    let mut response = error.into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

/// Wraps `app` so its mutating routes need the token.
pub fn protect(app: axum::Router, auth: BearerAuth) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state(auth, require_bearer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cres", b"s3cret"));
        assert!(!constant_time_eq(b"s3cre", b"s3cret"));
        assert!(!constant_time_eq(b"s3crett", b"s3cret"));
        assert!(!constant_time_eq(b"", b"s3cret"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn header_parsing() {
        let auth = BearerAuth::new("tok-1");
        let h = |s: &str| HeaderValue::from_str(s).unwrap();
        assert!(auth.accepts(Some(&h("Bearer tok-1"))));
        assert!(auth.accepts(Some(&h("bearer tok-1"))));
        assert!(!auth.accepts(Some(&h("Bearer tok-2"))));
        assert!(!auth.accepts(Some(&h("Basic tok-1"))));
        assert!(!auth.accepts(Some(&h("Bearer"))));
        assert!(!auth.accepts(Some(&h("Bearer  tok-1"))));
        assert!(!auth.accepts(None));
    }

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        assert_eq!(read_token_file(&write("a", "abc\n")).unwrap(), "abc");
        assert_eq!(read_token_file(&write("b", "abc\r\n")).unwrap(), "abc");
        assert_eq!(read_token_file(&write("c", "abc")).unwrap(), "abc");
        assert!(matches!(read_token_file(&write("d", "")), Err(TokenFileError::Empty { .. })));
        assert!(matches!(read_token_file(&write("e", "\n")), Err(TokenFileError::Empty { .. })));
        assert!(matches!(read_token_file(&write("f", "a b\n")), Err(TokenFileError::Invalid { .. })));
        assert!(matches!(read_token_file(&write("g", "abc\n\n")), Err(TokenFileError::Invalid { .. })));
        assert!(matches!(read_token_file(&dir.path().join("none")), Err(TokenFileError::Unreadable { .. })));
    }
}
