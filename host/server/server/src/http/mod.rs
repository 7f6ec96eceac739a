//! HTTP plumbing shared by every API: JSON errors that name the offending
//! field. Request bodies (limit and JSON decoding) are `body.rs`, how they are
//! received without a copy in memory per slow sender `spool.rs`; the accept
//! loop and connection bounds `conn.rs` (with JSON in place of hyper's own
//! answers to heads it cannot parse, `framing.rs`), what bounds requests that hold a
//! connection for long `budget.rs`; the checks every request passes
//! first (Host, media type, origin, framing) `gate.rs`; query strings `query.rs`.
//!
//! Error bodies have one shape: `{"error": {"code", "message", "field"?}}`,
//! except fence rejections, which use the storage API's documented 409 body.

pub mod admin;
pub mod audit;
pub mod auth;
pub mod body;
pub mod budget;
pub mod conn;
mod framing;
pub mod gate;
pub mod locks;
pub mod openapi;
pub mod operators;
mod query;
mod spool;
pub mod storage;

pub use conn::{ConnLimits, ConnMetrics};

use budget::{BODY_TIMEOUT, SERVER_BUSY};
use spool::{BODY_TOO_LARGE, OUT_OF_DESCRIPTORS};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

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

    /// The same error, naming `field`.
    pub fn with_field(mut self, field: impl Into<String>) -> ApiError {
        self.field = Some(field.into());
        self
    }

    /// 500 for a failure inside the server; the message is logged, not leaked in detail.
    pub fn internal(err: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %err, "internal error");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", err.to_string())
    }
}

/// Every error answer's body: `{"error": {"code", "message", "field"?}}`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong, and where.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Machine-readable: `invalid_field`, `malformed_json`, `unsupported_media_type`, `host_not_allowed`, ...
    pub code: String,
    /// For people.
    pub message: String,
    /// The field, parameter or header at fault (`write_payload.bytes`, `resource_id`, `content-type`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body =
            ErrorBody { error: ErrorDetail { code: self.code.to_owned(), message: self.message, field: self.field } };
        let mut response = (self.status, axum::Json(body)).into_response();
        if [BODY_TOO_LARGE, BODY_TIMEOUT, SERVER_BUSY, OUT_OF_DESCRIPTORS].contains(&self.code) {
            // The rest of the body was never read, so the connection cannot
            // carry another request: say so, and a client will not reuse it.
            // (An `object_too_large` 413 comes after the whole body was read.)
            response.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

/// Whether a request with this method can change state (anything but GET,
/// HEAD and OPTIONS): what authentication and the gate's browser checks cover.
pub(crate) fn is_mutating(method: &axum::http::Method) -> bool {
    use axum::http::Method;
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `app` with JSON answers for an unknown path (404 naming `path`) and an
/// unsupported method (405 naming `method`), like every other error.
pub fn with_fallbacks(app: Router) -> Router {
    app.fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such endpoint").with_field("path") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this endpoint does not take that method",
            )
            .with_field("method")
        })
}

/// Serves `app` on `listener` until ctrl-c or SIGTERM, with the default [`ConnLimits`].
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    serve_until(listener, app, shutdown_signal()).await
}

/// Serves `app` on `listener` until `shutdown` completes, with the default
/// [`ConnLimits`] and unregistered connection metrics.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    app: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    conn::serve_with(listener, app, ConnLimits::default(), ConnMetrics::default(), shutdown).await
}

/// Completes at ctrl-c or SIGTERM. The handlers are installed by this call,
/// not when the future is first polled: a signal that arrives as soon as the
/// server listens must never meet the default action (terminate at once).
/// Call it inside the runtime, before binding the listener.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut interrupt = signal(SignalKind::interrupt()).expect("SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {},
            _ = interrupt.recv() => {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unread_body_closes_the_connection() {
        let close = |e: ApiError| e.into_response().headers().get(header::CONNECTION).cloned();
        let unread = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, BODY_TOO_LARGE, "over the limit");
        assert_eq!(close(unread).as_ref().map(|v| v.as_bytes()), Some(&b"close"[..]));
        let read = ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "object_too_large", "object over the limit");
        assert_eq!(close(read), None, "the whole body was read: the connection stays usable");
    }
}
