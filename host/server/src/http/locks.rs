//! The lock API: `POST /v1/locks/acquire|renew|release`, `GET /v1/locks/status`.
//!
//! Mount with `app.merge(http::locks::router(service))`; the service
//! registered its metrics in the shared registry when it was built.
//!
//! Answers: acquire 200 with the grant or 409 `{"lock_acquired":
//! false, "reason", "remaining_lease_ms"}`; renew/release 200, or 409
//! `wrong_lease` / 410 `lease_expired` naming `lock_token`; invalid input 400
//! naming the field; a backend that cannot answer 503.

use super::{ApiBody, ApiError, decode_json};
use crate::locks::{self, Acquired, LockError, LockService, ValidAcquire};
use crate::wire::locks::{AcquireRequest, LeaseRef};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::collections::HashMap;
use std::sync::Arc;

/// The lock routes over `service`.
pub fn router(service: Arc<dyn LockService>) -> Router {
    Router::new()
        .route("/v1/locks/acquire", post(acquire))
        .route("/v1/locks/renew", post(renew))
        .route("/v1/locks/release", post(release))
        .route("/v1/locks/status", get(status))
        .with_state(service)
}

type Svc = State<Arc<dyn LockService>>;

/// Decodes and validates a `POST /v1/locks/acquire` body (unknown fields are
/// refused; names and lease bounds checked by [`ValidAcquire::new`]).
/// The handler's whole decoding; the `decode_acquire` fuzz target calls it.
pub fn decode_acquire(bytes: &[u8]) -> Result<ValidAcquire, ApiError> {
    let req: AcquireRequest = decode_json(bytes)?;
    ValidAcquire::new(req).map_err(api_error)
}

/// Decodes and validates a renew or release body (the lease id must be 32
/// lowercase hex digits).
pub fn decode_lease(bytes: &[u8]) -> Result<LeaseRef, ApiError> {
    let lease: LeaseRef = decode_json(bytes)?;
    locks::validate_lease(&lease).map_err(api_error)?;
    Ok(lease)
}

async fn acquire(State(svc): Svc, ApiBody(body): ApiBody) -> Result<Response, ApiError> {
    match svc.acquire(decode_acquire(&body)?).await.map_err(api_error)? {
        Acquired::Granted(grant) => Ok(Json(grant).into_response()),
        Acquired::Refused(refusal) => Ok((StatusCode::CONFLICT, Json(refusal)).into_response()),
    }
}

async fn renew(State(svc): Svc, ApiBody(body): ApiBody) -> Result<Response, ApiError> {
    Ok(Json(svc.renew(decode_lease(&body)?).await.map_err(api_error)?).into_response())
}

async fn release(State(svc): Svc, ApiBody(body): ApiBody) -> Result<Response, ApiError> {
    Ok(Json(svc.release(decode_lease(&body)?).await.map_err(api_error)?).into_response())
}

async fn status(State(svc): Svc, Query(q): Query<HashMap<String, String>>) -> Result<Response, ApiError> {
    let id = q.get("resource_id").ok_or_else(|| ApiError::field("resource_id", "query parameter is required"))?;
    Ok(Json(svc.status(id.clone()).await.map_err(api_error)?).into_response())
}

/// Maps a lock error to its HTTP answer.
pub fn api_error(e: LockError) -> ApiError {
    let msg = e.to_string();
    match e {
        LockError::Invalid { field, message } => ApiError::field(field, message),
        LockError::WrongLease => ApiError {
            status: StatusCode::CONFLICT,
            code: "wrong_lease",
            message: msg,
            field: Some("lock_token".into()),
        },
        LockError::LeaseExpired => {
            ApiError { status: StatusCode::GONE, code: "lease_expired", message: msg, field: Some("lock_token".into()) }
        }
        LockError::Unavailable(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", msg),
    }
}
