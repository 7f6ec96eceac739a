//! Who may call what: the writers' bearer token on the routes that change
//! state, and the operators' tokens on the operator routes.
//!
//! `fencing serve --auth-token-file PATH` loads the writers' token; from then
//! on every request whose method can change state (anything but `GET`, `HEAD`
//! and `OPTIONS`: storage writes, lock acquire/renew/release, and any route
//! added later) must carry `Authorization: Bearer <token>`. A missing,
//! malformed or wrong header gets 401 with the usual JSON error body (`code`
//! `unauthorized`, `field` `authorization`) and a `WWW-Authenticate: Bearer`
//! challenge, and the request never reaches its handler, so a refused request
//! changes nothing. Reads (`/v1/storage/read`, `/v1/storage/fence`,
//! `/v1/locks/status`) and `GET /metrics` stay open, unless the server runs
//! with `--auth-reads`, which puts every request behind the token.
//!
//! The operator routes (every path under [`OPERATOR_ROUTES`]) take no
//! writer's token: they need an operator's, from `--admin-token-file`
//! (`operators.rs`), and are off (403 `admin_disabled`) without one. A
//! writer's token there is 403 `operator_only`; a missing or unknown one 401.
//! A request that passes carries its [`Operator`](super::operators::Operator).
//!
//! Invariants:
//! - the writers' token is printable ASCII without spaces (so it always fits
//!   in a header), at least `secrets::MIN_TOKEN_CHARS` long, in a file only
//!   its owner can read; the file's trailing newline is not part of it;
//! - the comparison takes time that depends only on the configured token's
//!   length, never on how many leading bytes of a guess are right (see
//!   [`constant_time_eq`]), so the token cannot be recovered byte by byte by
//!   timing the 401s.

use super::operators::Operators;
use super::{ApiError, is_mutating};
pub use crate::secrets::constant_time_eq;
use crate::secrets::{SecretFileError, check_private, check_token_length};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
pub use fencing_api::auth::{TokenFileError, read_token_file};
use std::path::Path;
use std::sync::Arc;

/// The paths only operators may call.
pub const OPERATOR_ROUTES: &str = "/v1/admin/";

/// The writers' token, shared by every request.
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

    /// Reads `--auth-token-file` as a server must: private to its owner, and
    /// a token of at least `secrets::MIN_TOKEN_CHARS` characters.
    pub fn load(path: &Path) -> Result<BearerAuth, SecretFileError> {
        check_private(path, "the writers' bearer token")?;
        let token = read_token_file(path).map_err(|e| SecretFileError::new(path, token_problem(e)))?;
        check_token_length(path, &token)?;
        Ok(BearerAuth::new(&token))
    }

    /// Every request needs the token, reads and `/metrics` included.
    pub fn with_reads(mut self, reads: bool) -> BearerAuth {
        self.reads = reads;
        self
    }

    /// The token, as configured.
    pub fn token(&self) -> &str {
        std::str::from_utf8(&self.token).unwrap_or_default()
    }

    /// Whether an `Authorization` header value carries the configured token.
    pub fn accepts(&self, header: Option<&HeaderValue>) -> bool {
        bearer(header).is_some_and(|presented| constant_time_eq(presented, &self.token))
    }
}

fn token_problem(e: TokenFileError) -> String {
    match e {
        TokenFileError::Unreadable { source, .. } => format!("cannot read the auth token file: {source}"),
        TokenFileError::Empty { .. } => "the auth token file is empty: it must hold the token".into(),
        TokenFileError::Invalid { .. } => {
            "the auth token file must hold one token of printable ASCII without spaces".into()
        }
    }
}

/// The credential a bearer header presents: what follows the scheme
/// (case-insensitive, RFC 7235) and exactly one space.
fn bearer(header: Option<&HeaderValue>) -> Option<&[u8]> {
    let value = header.map(HeaderValue::as_bytes)?;
    if value.len() < 7 || !value[..7].eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    Some(&value[7..])
}

/// Every credential a server checks: the writers' token (if any) and the
/// operators' (if any).
#[derive(Clone, Default)]
pub struct Access {
    pub writers: Option<BearerAuth>,
    pub operators: Option<Operators>,
}

/// Middleware: refuses requests without the credential their route needs.
pub async fn require_credentials(State(access): State<Access>, mut req: Request, next: Next) -> Response {
    let presented = req.headers().get(header::AUTHORIZATION).cloned();
    if req.uri().path().starts_with(OPERATOR_ROUTES) {
        // Operators only: the writers' token is never enough.
        let Some(operators) = &access.operators else {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "admin_disabled",
                "operator routes are off on this server: start it with --admin-token-file",
            )
            .with_field("authorization")
            .into_response();
        };
        if let Some(operator) = bearer(presented.as_ref()).and_then(|t| operators.who(t)) {
            req.extensions_mut().insert(operator);
            return next.run(req).await;
        }
        if access.writers.as_ref().is_some_and(|w| w.accepts(presented.as_ref())) {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "operator_only",
                "this is a writer's token; operator routes need an operator's (--admin-token-file)",
            )
            .with_field("authorization")
            .into_response();
        }
        return unauthorized(presented.as_ref(), "an operator's token");
    }
    let Some(writers) = &access.writers else { return next.run(req).await };
    let needed = writers.reads || is_mutating(req.method());
    if !needed || writers.accepts(presented.as_ref()) {
        return next.run(req).await;
    }
    unauthorized(presented.as_ref(), "the bearer token")
}

/// 401 with its challenge: `whose` token was missing or wrong.
fn unauthorized(presented: Option<&HeaderValue>, whose: &str) -> Response {
    let (message, challenge) = match presented {
        None => (format!("this endpoint needs `Authorization: Bearer <token>` ({whose})"), r#"Bearer realm="fencing""#),
        Some(_) => (format!("{whose} is missing or wrong"), r#"Bearer realm="fencing", error="invalid_token""#),
    };
    let error = ApiError {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthorized",
        message,
        field: Some("authorization".into()),
    };
    let mut response = error.into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

/// Wraps `app` so each route needs the credential `access` says it needs.
/// Every server is wrapped, with or without tokens: the operator routes are
/// refused by this layer when no operator is configured.
pub fn protect(app: axum::Router, access: Access) -> axum::Router {
    app.layer(axum::middleware::from_fn_with_state(access, require_credentials))
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

    #[test]
    fn a_servers_token_file_is_private_and_long_enough() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let write = |text: &str, mode: u32| {
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("0123456789abcdef\n", 0o600);
        assert_eq!(BearerAuth::load(&path).unwrap().token(), "0123456789abcdef");
        write("0123456789abcdef\n", 0o644);
        assert!(BearerAuth::load(&path).err().unwrap().problem.contains("chmod 600"));
        write("x\n", 0o600);
        assert!(BearerAuth::load(&path).err().unwrap().problem.contains("at least 16"));
        write("\n", 0o600);
        assert!(BearerAuth::load(&path).err().unwrap().problem.contains("empty"));
    }
}
