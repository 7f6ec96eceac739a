//! The operator's API: `POST /v1/admin/fences/reset`.
//!
//! A reset replaces one resource's fence (see [`ResetBody`]): it un-bricks a
//! resource whose mark a runaway token pushed to the top, or re-binds a
//! resource to another lock. It can also let old tokens through again, so
//! it needs an operator's credential (`--admin-token-file`, checked by
//! `auth.rs` before the handler runs: never a writer's token) and is off
//! (403 `admin_disabled`) on a server without one. Every reset is recorded
//! in the audit log before it is applied and again with its outcome
//! (`audit.rs`: who, from which address, when, the reason, the fence before
//! and after), and logged at WARN with the client's values escaped.
//! Answers: 200 `{"resource_id", "previous", "fence"}`; 400 naming the field;
//! 503 `audit_unavailable` when the record cannot be written (nothing changed).

use super::ApiError;
use super::ErrorBody;
use super::audit::AuditLog;
use super::body::ApiJson;
use super::budget::Peer;
use super::operators::Operator;
use crate::storage::{StorageError, StorageService, validate_lock_id, validate_resource_id};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Json, Router};
use fencing_api::wire::storage::{FenceBody, ResetAnswer, ResetBody};
use fencing_runtime::Fence;

use fencing_api::wire::names::reason_problem;

#[derive(Clone)]
pub(crate) struct Admin {
    service: StorageService,
    audit: AuditLog,
}

/// The admin routes over `service`, recording every use in `audit`. They
/// answer only requests `auth::protect` let through with an [`Operator`].
pub fn router(service: StorageService, audit: AuditLog) -> Router {
    Router::new().route("/v1/admin/fences/reset", post(reset)).with_state(Admin { service, audit })
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

/// Replace one resource's fence (operators only: `--admin-token-file`).
#[utoipa::path(post, path = "/v1/admin/fences/reset", tag = "admin", request_body = ResetBody,
    security(("operator" = [])),
    responses(
        (status = 200, description = "The fence replaced; recorded in the audit log and logged", body = ResetAnswer),
        (status = 401, description = "No operator's token, or an unknown one", body = ErrorBody),
        (status = 403, description = "Off on this server (`admin_disabled`: no `--admin-token-file`), or a writer's \
                                      token (`operator_only`)", body = ErrorBody),
        (status = 503, description = "The audit log cannot be written (`audit_unavailable`); nothing changed", body = ErrorBody),
    ))]
pub(crate) async fn reset(
    State(admin): State<Admin>,
    operator: Option<Extension<Operator>>,
    peer: Option<Extension<Peer>>,
    ApiJson(body): ApiJson<ResetBody>,
) -> Result<Response, ApiError> {
    // Only `auth::protect` adds the operator: without it this route serves no one.
    let Some(Extension(operator)) = operator else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "admin_disabled",
            "operator routes are off on this server: start it with --admin-token-file",
        )
        .with_field("authorization"));
    };
    let to = reset_target(&body)?;
    let peer = peer.map(|Extension(p)| p.ip().to_string());
    let reason = body.reason.trim();
    let asked = serde_json::json!({
        "action": "reset_fence", "operator": operator.name, "peer": peer,
        "resource_id": body.resource_id, "reason": reason, "requested": to.clone().map(FenceBody::from),
    });
    admin.audit.record(with(&asked, "requested", serde_json::json!({}))).await?;
    let previous = match admin.service.reset_fence(&body.resource_id, to.clone(), reason).await {
        Ok(previous) => previous,
        Err(e) => {
            let failed = with(&asked, "failed", serde_json::json!({"error": e.to_string()}));
            admin.audit.record(failed).await?;
            return Err(super::storage::storage_error(e));
        }
    };
    let (before, after) = (previous.map(FenceBody::from), to.map(FenceBody::from));
    let done = with(&asked, "done", serde_json::json!({"before": before, "after": after}));
    if admin.audit.record(done).await.is_err() {
        // The change is made and its request recorded; only the outcome is missing.
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "audit_unavailable",
            "the fence was reset, but the operators' audit log could not record the outcome (the request is \
             recorded; the server's log has the error); read the fence to see it",
        )
        .with_field("authorization"));
    }
    tracing::warn!(
        operator = ?operator.name,
        peer = ?peer,
        resource = ?body.resource_id,
        reason = ?reason,
        before = ?before,
        after = ?after,
        "fence reset by an operator"
    );
    Ok(Json(ResetAnswer { resource_id: body.resource_id, previous: before, fence: after }).into_response())
}

/// `record` with its `phase` and the fields of `extra`.
fn with(record: &serde_json::Value, phase: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut out = record.clone();
    out["phase"] = phase.into();
    if let serde_json::Value::Object(fields) = extra {
        for (k, v) in fields {
            out[k] = v;
        }
    }
    out
}
