//! The lock API: `POST /v1/locks/acquire|renew|release`, `GET /v1/locks/status`.
//!
//! Mount with `app.merge(http::locks::router(service))` (or
//! [`signing_router`], whose grants and renewals carry the lock service's
//! proof); the service registered its metrics in the shared registry when it
//! was built.
//!
//! Answers: acquire 200 with the grant or 409 `{"lock_acquired":
//! false, "reason", "remaining_lease_ms"}`; renew/release 200, or 409
//! `wrong_lease` / 410 `lease_expired` naming `lock_token`; invalid input 400
//! naming the field; a backend that cannot answer, or a lock table at its
//! `--max-held-locks` cap (`too_many_locks`), 503; an acquisition that would
//! wait beyond its client's or the server's allowance (`budget.rs`), 503
//! `too_many_waiting` naming `wait_ms`.

use super::ApiError;
use super::ErrorBody;
use super::body::{ApiJson, decode_json};
use super::budget::Peer;
use super::query::Params;
use crate::locks::{Acquired, LockError, LockService, ValidAcquire};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use fencing_api::wire::locks::{AcquireRequest, Grant, LeaseRef, Refusal, Released, Renewed, Status};
use fencing_runtime::proof::Signer;
use std::sync::Arc;

/// The lock routes over `service`.
pub fn router(service: Arc<dyn LockService>) -> Router {
    routes(Locks { service, signer: None })
}

/// The lock routes over `service`, every grant and renewal carrying
/// `signer`'s proof that this token was granted for this lock
/// (`--signing-key`; whatever backend granted it, etcd included).
pub fn signing_router(service: Arc<dyn LockService>, signer: Arc<Signer>) -> Router {
    routes(Locks { service, signer: Some(signer) })
}

fn routes(locks: Locks) -> Router {
    Router::new()
        .route("/v1/locks/acquire", post(acquire))
        .route("/v1/locks/renew", post(renew))
        .route("/v1/locks/release", post(release))
        .route("/v1/locks/status", get(status))
        .with_state(locks)
}

/// The routes' state: the service, and the signer when grants are signed.
#[derive(Clone)]
pub(crate) struct Locks {
    service: Arc<dyn LockService>,
    signer: Option<Arc<Signer>>,
}

impl Locks {
    /// The hex proof for `token` of `lock`, when grants are signed.
    fn prove(&self, lock: &str, token: u64) -> Option<String> {
        Some(fencing_runtime::key_text::hex(&self.signer.as_ref()?.prove(lock, token)))
    }
}

type Svc = State<Locks>;

/// Decodes and validates a `POST /v1/locks/acquire` body: the JSON as
/// [`ApiJson`] decodes it (unknown fields refused), then names and lease
/// bounds by [`ValidAcquire::new`]. The `decode_acquire` fuzz target calls it,
/// so it runs exactly the handler's code.
pub fn decode_acquire(bytes: &[u8]) -> Result<ValidAcquire, ApiError> {
    ValidAcquire::new(decode_json(bytes)?).map_err(api_error)
}

/// Acquire a lease on a lock, with a fencing token above every earlier one.
#[utoipa::path(post, path = "/v1/locks/acquire", tag = "locks", request_body = AcquireRequest,
    responses(
        (status = 200, description = "Granted", body = Grant),
        (status = 409, description = "Held by another lease", body = Refusal),
        (status = 503, description = "At the held-lease cap, too many acquisitions waiting (`too_many_waiting`), or the backend cannot answer", body = ErrorBody),
    ))]
pub(crate) async fn acquire(
    State(svc): Svc,
    peer: Option<Extension<Peer>>,
    ApiJson(req): ApiJson<AcquireRequest>,
) -> Result<Response, ApiError> {
    let waits = req.wait_ms.is_some_and(|ms| ms > 0);
    let req = ValidAcquire::new(req).map_err(api_error)?;
    // Held until the answer: a waiting acquisition counts against its client's allowance.
    let _slot = match peer {
        Some(Extension(peer)) if waits => Some(peer.wait()?),
        _ => None,
    };
    match svc.service.acquire(req).await.map_err(api_error)? {
        Acquired::Granted(mut grant) => {
            grant.fencing_proof = svc.prove(&grant.resource_id, grant.fencing_token);
            Ok(Json(grant).into_response())
        }
        Acquired::Refused(refusal) => Ok((StatusCode::CONFLICT, Json(refusal)).into_response()),
    }
}

/// Extend a lease; only its own `lock_token` can.
#[utoipa::path(post, path = "/v1/locks/renew", tag = "locks", request_body = LeaseRef,
    responses(
        (status = 200, description = "Renewed", body = Renewed),
        (status = 409, description = "Not this lock's current lease (`wrong_lease`)", body = ErrorBody),
        (status = 410, description = "The lease expired (`lease_expired`)", body = ErrorBody),
        (status = 503, description = "The backend cannot answer", body = ErrorBody),
    ))]
pub(crate) async fn renew(State(svc): Svc, ApiJson(lease): ApiJson<LeaseRef>) -> Result<Response, ApiError> {
    // The lease id is checked by the service, which parses it once.
    let mut renewed = svc.service.renew(lease).await.map_err(api_error)?;
    renewed.fencing_proof = svc.prove(&renewed.resource_id, renewed.fencing_token);
    Ok(Json(renewed).into_response())
}

/// Release a lease; only its own `lock_token` can.
#[utoipa::path(post, path = "/v1/locks/release", tag = "locks", request_body = LeaseRef,
    responses(
        (status = 200, description = "Released", body = Released),
        (status = 409, description = "Not this lock's current lease (`wrong_lease`)", body = ErrorBody),
        (status = 410, description = "The lease expired (`lease_expired`)", body = ErrorBody),
        (status = 503, description = "The backend cannot answer", body = ErrorBody),
    ))]
pub(crate) async fn release(State(svc): Svc, ApiJson(lease): ApiJson<LeaseRef>) -> Result<Response, ApiError> {
    Ok(Json(svc.service.release(lease).await.map_err(api_error)?).into_response())
}

/// Who holds a lock, with which token, for how much longer.
#[utoipa::path(get, path = "/v1/locks/status", tag = "locks",
    params(("resource_id" = String, Query, description = "The lock")),
    responses(
        (status = 200, description = "The lock's state", body = Status),
        (status = 503, description = "The backend cannot answer", body = ErrorBody),
    ))]
pub(crate) async fn status(State(svc): Svc, RawQuery(query): RawQuery) -> Result<Response, ApiError> {
    let q = Params::parse(query.as_deref(), &["resource_id"])?;
    let id = q.required("resource_id")?;
    Ok(Json(svc.service.status(id.to_owned()).await.map_err(api_error)?).into_response())
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
        LockError::AtCapacity { .. } => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_locks", msg),
        LockError::Unavailable(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", msg),
    }
}
