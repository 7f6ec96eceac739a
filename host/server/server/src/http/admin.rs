//! The operator's API: `POST /v1/admin/fences/reset`.
//!
//! A reset replaces one resource's fence (see [`ResetBody`]): it un-bricks a
//! resource whose mark a runaway token pushed to the top, or re-binds a
//! resource to another lock. It can also let old tokens through again, so it
//! is served only by a server with `--auth-token-file` (the bearer token
//! guards it like every other POST); without one it answers 403
//! `admin_disabled`. Every reset is logged at WARN with its reason, the old
//! fence and the new one. Answers: 200 `{"resource_id", "previous", "fence"}`;
//! 400 naming the field.

use super::ApiError;
use super::ErrorBody;
use super::body::ApiJson;
use crate::storage::{StorageError, StorageService, validate_lock_id, validate_resource_id};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use fencing_api::wire::storage::{FenceBody, ResetAnswer, ResetBody};
use fencing_runtime::Fence;

use fencing_api::wire::names::reason_problem;

#[derive(Clone)]
pub(crate) struct Admin {
    service: StorageService,
    enabled: bool,
}

/// The admin routes over `service`; `enabled` only when the server authenticates mutating requests.
pub fn router(service: StorageService, enabled: bool) -> Router {
    Router::new().route("/v1/admin/fences/reset", post(reset)).with_state(Admin { service, enabled })
}

/// The fence a valid reset body sets (`None`: remove it).
pub fn reset_target(body: &ResetBody) -> Result<Option<Fence>, ApiError> {
    let field = |e: StorageError| match e {
        StorageError::InvalidField { field, message } => ApiError::field(field, message),
        other => ApiError::internal(other),
    };
    validate_resource_id(&body.resource_id).map_err(field)?;
    if let Some(problem) = reason_problem(&body.reason) {
        return Err(ApiError::field("reason", problem));
    }
    match (&body.lock_id, body.high_water) {
        (None, None) => Ok(None),
        (Some(lock), Some(high_water)) => {
            validate_lock_id(lock).map_err(field)?;
            if high_water == 0 {
                return Err(ApiError::field("high_water", "must be at least 1"));
            }
            Ok(Some(Fence { lock: lock.clone(), high_water, sequence: None }))
        }
        (Some(_), None) => Err(ApiError::field("high_water", "give lock_id and high_water together, or neither")),
        (None, Some(_)) => Err(ApiError::field("lock_id", "give lock_id and high_water together, or neither")),
    }
}

/// Replace one resource's fence (operators; servers with `--auth-token-file` only).
#[utoipa::path(post, path = "/v1/admin/fences/reset", tag = "admin", request_body = ResetBody,
    responses(
        (status = 200, description = "The fence replaced; logged", body = ResetAnswer),
        (status = 403, description = "Not served without `--auth-token-file` (`admin_disabled`)", body = ErrorBody),
    ))]
pub(crate) async fn reset(State(admin): State<Admin>, ApiJson(body): ApiJson<ResetBody>) -> Result<Response, ApiError> {
    if !admin.enabled {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_disabled",
            "fence resets need a server started with --auth-token-file",
        )
        .with_field("authorization"));
    }
    let to = reset_target(&body)?;
    let previous = admin
        .service
        .reset_fence(&body.resource_id, to.clone(), body.reason.trim())
        .await
        .map_err(super::storage::storage_error)?;
    Ok(Json(ResetAnswer {
        resource_id: body.resource_id,
        previous: previous.map(FenceBody::from),
        fence: to.map(FenceBody::from),
    })
    .into_response())
}
