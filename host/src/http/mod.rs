//! HTTP plumbing shared by every API: JSON errors that name the offending
//! field, a JSON extractor that produces them, body limits, and the server loop.
//!
//! Error bodies have one shape: `{"error": {"code", "message", "field"?}}`,
//! except fence rejections, which use the storage API's documented 409 body.

pub mod auth;
pub mod locks;
pub mod storage;

use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

/// Largest request body any endpoint accepts (bytes). Larger bodies get 413.
pub const MAX_BODY_BYTES: usize = 8 << 20;

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
        (self.status, axum::Json(json!({ "error": error }))).into_response()
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
                "body_too_large",
                format!("request body exceeds {MAX_BODY_BYTES} bytes"),
            )),
            Err(e) => Err(ApiError::new(e.status(), "bad_body", e.body_text())),
        }
    }
}

/// A JSON body whose decoding errors name the field (`write_payload.bytes`)
/// and map to 400 (malformed), 413 (too large) or 415 (not JSON).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ApiBody(bytes) = ApiBody::from_request(req, state).await?;
        decode_json(&bytes).map(ApiJson)
    }
}

/// Decodes JSON, naming the path of the first field that failed.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let field = if path == "." || path.is_empty() { None } else { Some(path) };
        let code = if inner.is_syntax() || inner.is_eof() { "malformed_json" } else { "invalid_field" };
        ApiError { status: StatusCode::BAD_REQUEST, code, message: inner.to_string(), field }
    })
}

/// Maps axum's own JSON rejection (for handlers that use `axum::Json`).
pub fn json_rejection(e: JsonRejection) -> ApiError {
    ApiError::new(e.status(), "bad_body", e.body_text())
}

/// Serves `app` on `listener` until ctrl-c or SIGTERM.
pub async fn serve(listener: tokio::net::TcpListener, app: Router) -> std::io::Result<()> {
    let app = app.layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES));
    axum::serve(listener, app).with_graceful_shutdown(shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = ctrl_c => {},
        _ = term.recv() => {},
    }
}
