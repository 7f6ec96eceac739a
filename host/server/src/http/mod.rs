//! HTTP plumbing shared by every API: JSON errors that name the offending
//! field, a JSON extractor that produces them, body limits, and the server loop.
//!
//! Error bodies have one shape: `{"error": {"code", "message", "field"?}}`,
//! except fence rejections, which use the storage API's documented 409 body.

pub mod auth;
pub mod locks;
pub mod storage;

use axum::Router;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Largest request body any endpoint accepts (bytes). Larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 8 << 20;

/// The code of that 413: the body was refused unread.
const BODY_TOO_LARGE: &str = "body_too_large";

/// An API error: status, machine-readable code, message, and the field at fault.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    /// 400 for a field that is missing, of the wrong type or out of range.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_field",
            message: message.into(),
            field: Some(field.into()),
        }
    }

    /// An error with any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), field: None }
    }

    /// 500 for a failure inside the server; the message is logged, not leaked in detail.
    pub fn internal(err: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %err, "internal error");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(field) = self.field {
            error["field"] = json!(field);
        }
        let mut response = (self.status, axum::Json(json!({ "error": error }))).into_response();
        if self.code == BODY_TOO_LARGE {
            // The rest of the body was never read, so the connection cannot
            // carry another request: say so, and a client will not reuse it.
            // (An `object_too_large` 413 comes after the whole body was read.)
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
        }
        response
    }
}

/// A request body as raw bytes, with the body-limit and transport errors
/// already mapped to [`ApiError`]s (413 `body_too_large`, 400 `bad_body`).
/// Handlers that decode with a named function (`storage::decode_write`,
/// `locks::decode_acquire`) take this, so the fuzz targets drive exactly the
/// decoding the server runs.
pub struct ApiBody(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::body::Bytes::from_request(req, state).await {
            Ok(b) => Ok(ApiBody(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                BODY_TOO_LARGE,
                format!("request body exceeds {MAX_BODY_BYTES} bytes"),
            )),
            Err(e) => Err(ApiError::new(e.status(), "bad_body", e.body_text())),
        }
    }
}

/// Decodes JSON, naming the path of the first field that failed. Anything but
/// whitespace after the value is refused as malformed.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." || path.is_empty() { None } else { Some(path) };
        let code = if inner.is_syntax() || inner.is_eof() { "malformed_json" } else { "invalid_field" };
        ApiError { status: StatusCode::BAD_REQUEST, code, message: inner.to_string(), field }
    })?;
    de.end().map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "malformed_json", e.to_string()))?;
    Ok(value)
}

/// Serves `app` on `listener` until ctrl-c or SIGTERM.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    serve_until(listener, app, shutdown_signal()).await
}

/// Serves `app` on `listener` until `shutdown` completes, with the body limit
/// applied and Nagle's algorithm off on every connection: a response written
/// in more than one segment (pipelined requests, streamed bodies) must not
/// wait for the peer's delayed ACK.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let app = app.layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
    });
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
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
    fn decode_json_refuses_bytes_after_the_value() {
        let e = decode_json::<Body>(br#"{"outer":{"n":7}} {"outer":{"n":8}}"#).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::BAD_REQUEST, "malformed_json"));
        assert!(decode_json::<Body>(b"{\"outer\":{\"n\":7}}\n ").is_ok(), "trailing whitespace is not data");
    }

    #[test]
    fn only_an_unread_body_closes_the_connection() {
        let close = |e: ApiError| e.into_response().headers().get(header::CONNECTION).cloned();
        let unread = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE, "over the limit");
        assert_eq!(close(unread).as_ref().map(|v| v.as_bytes()), Some(&b"close"[..]));
        let read = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "object_too_large", "object over the limit");
        assert_eq!(close(read), None, "the whole body was read: the connection stays usable");
        assert_eq!(close(ApiError::field("resource_id", "empty")), None);
    }

    #[test]
    fn decode_json_reports_malformed_json() {
        let e = decode_json::<Body>(br#"{"outer":"#).unwrap_err();
        assert_eq!(e.code, "malformed_json");
    }
}
