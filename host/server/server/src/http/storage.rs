//! The storage API: `POST /v1/storage/write`, `GET /v1/storage/read`, `GET /v1/storage/fence`.
//!
//! Status codes: 200 admitted (or read/fence found), 409 refused by the fence
//! (`{"accepted": false, "reason", "presented", "high_water"}`), 400 malformed
//! (the body names the field), 404 no such object, 413 body or object too
//! large, 503 refused because the guard could not decide (fail closed) or the
//! store is reopening, 507 the disk or the store's quota is full.
//! A request that gets any non-200 answer changed nothing.

use super::ApiError;
use super::ErrorBody;
use super::body::{HeldJson, decode_json};
use super::query::Params;
use crate::storage::{Mutation, StorageError, StorageService, ValidWrite, WriteOutcome, WriteRequest};
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use fencing_api::wire::storage::{FenceAnswer, FenceBody, ReadAnswer, WriteAdmitted, WriteBody, WriteRefused};
use fencing_runtime::Fence;
use futures::StreamExt;

/// The storage routes, sharing `service`.
pub fn router(service: StorageService) -> Router {
    Router::new()
        .route("/v1/storage/write", post(write))
        .route("/v1/storage/read", get(read))
        .route("/v1/storage/fence", get(fence))
        .with_state(service)
}

/// Maps a storage error to its HTTP answer.
pub fn storage_error(e: StorageError) -> ApiError {
    match e {
        StorageError::InvalidField { field, message } => ApiError::field(field, message),
        StorageError::TooLarge { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "object_too_large", e.to_string())
                .with_field("write_payload.bytes")
        }
        StorageError::Closed => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "closed", e.to_string()),
        StorageError::NoSpace(_) => {
            ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage", e.to_string())
        }
        StorageError::QuotaExceeded { .. } => {
            ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "quota_exceeded", e.to_string()).with_field("write_payload")
        }
        StorageError::Unavailable(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "store_unavailable", e.to_string())
        }
        StorageError::Backend(_) => ApiError::internal(e),
    }
}

/// What [`decode_bytes`] accepts, as a regular expression: standard base64,
/// padded, the unused bits of the last character zero, with ASCII whitespace
/// anywhere. The published schema carries it; a test holds it to the decoder.
pub const BYTES_PATTERN: &str = concat!(
    r"^[\t\n\u000C\r ]*",
    r"(?:(?:[A-Za-z0-9+/][\t\n\u000C\r ]*){4})*",
    r"(?:[A-Za-z0-9+/][\t\n\u000C\r ]*[A-Za-z0-9+/][\t\n\u000C\r ]*[AEIMQUYcgkosw048][\t\n\u000C\r ]*=[\t\n\u000C\r ]*",
    r"|[A-Za-z0-9+/][\t\n\u000C\r ]*[AQgw][\t\n\u000C\r ]*=[\t\n\u000C\r ]*=[\t\n\u000C\r ]*)?$"
);

/// Decodes base64 ignoring ASCII whitespace (`base64` output ends in `\n`).
pub fn decode_bytes(text: &str) -> Result<Vec<u8>, ApiError> {
    let decoded = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        BASE64.decode(compact.as_bytes())
    } else {
        // The usual case, without a second copy of the text.
        BASE64.decode(text.as_bytes())
    };
    decoded.map_err(|e| ApiError::field("write_payload.bytes", format!("invalid base64: {e}")))
}

/// Longest `fencing_proof`, in hex digits ([`fencing_runtime::accept::MAX_PROOF_HEX`]).
pub use fencing_runtime::accept::MAX_PROOF_HEX;

/// What [`decode_proof`] accepts, as a regular expression (an even count of
/// lowercase or uppercase hex digits); the published schema carries it.
pub const PROOF_PATTERN: &str = "^(?:[0-9a-fA-F]{2})*$";

/// A write's `fencing_proof`: the proof bytes in hex, as the grant gave them
/// ([`fencing_runtime::accept::proof`]).
pub fn decode_proof(text: &str) -> Result<Vec<u8>, ApiError> {
    fencing_runtime::accept::proof(text.as_bytes()).map_err(|e| ApiError::field("fencing_proof", e.to_string()))
}

/// Decodes and validates a `POST /v1/storage/write` body into the engine's
/// request: the JSON as [`HeldJson`] decodes it, then [`write_request`]. The
/// `decode_write` fuzz target calls it, so it runs exactly the handler's code.
pub fn decode_write(bytes: &[u8]) -> Result<ValidWrite, ApiError> {
    write_request(decode_json(bytes)?)
}

/// The engine's request for a decoded body: `bytes` must be base64 (required
/// for PUT and APPEND), the lock defaults to the resource, and names and sizes
/// pass [`WriteRequest::validate`] (its field names mapped to their JSON paths).
pub fn write_request(body: WriteBody) -> Result<ValidWrite, ApiError> {
    let data = match (&body.write_payload.bytes, body.write_payload.mutation_type) {
        (Some(text), _) => decode_bytes(text)?,
        (None, Mutation::Delete) => Vec::new(),
        (None, _) => {
            return Err(ApiError::field("write_payload.bytes", "missing field `bytes` (required for PUT and APPEND)"));
        }
    };
    let req = WriteRequest {
        lock_id: body.lock_id.unwrap_or_else(|| body.resource_id.clone()),
        resource_id: body.resource_id,
        token: body.fencing_token,
        sequence: body.sequence,
        file_path: body.write_payload.file_path,
        mutation: body.write_payload.mutation_type,
        bytes: data,
        proof: body.fencing_proof.as_deref().map(decode_proof).transpose()?,
    };
    req.validate().map_err(|e| match e {
        StorageError::InvalidField { field: "file_path", message } => {
            ApiError::field("write_payload.file_path", message)
        }
        e => storage_error(e),
    })
}

/// Decide a write against its resource's fence and apply it if admitted.
#[utoipa::path(post, path = "/v1/storage/write", tag = "storage", request_body = WriteBody,
    responses(
        (status = 200, description = "Admitted and durable", body = WriteAdmitted),
        (status = 409, description = "Refused by the fence (or too far ahead); nothing changed", body = WriteRefused),
        (status = 413, description = "Body over 8 MiB, or object over 64 MiB", body = ErrorBody),
        (status = 503, description = "The guard could not decide (fail closed), or the store is reopening", body = WriteRefused),
        (status = 507, description = "The disk is full; nothing applied", body = ErrorBody),
    ))]
pub(crate) async fn write(
    State(service): State<StorageService>,
    HeldJson(body, _spooled): HeldJson<WriteBody>,
) -> Result<Response, ApiError> {
    let req = write_request(body)?;
    let resource_id = req.resource_id.clone();
    let presented = req.token;
    let recorded = service.write(req).await.map_err(storage_error)?;
    let flapping = recorded.flapping;
    let refused = |reason: &str, fence: Option<Fence>| WriteRefused {
        accepted: false,
        reason: reason.to_owned(),
        presented,
        high_water: fence.as_ref().map_or(0, |f| f.high_water),
        fence: fence.map(FenceBody::from),
        max_token_advance: None,
        message: None,
    };
    Ok(match recorded.outcome {
        WriteOutcome::Admitted { high_water, sequence, new_term } => {
            Json(WriteAdmitted { accepted: true, resource_id, high_water, sequence, new_term, flapping })
                .into_response()
        }
        WriteOutcome::Rejected { rejection, fence } => {
            (StatusCode::CONFLICT, Json(refused(rejection.reason(), fence))).into_response()
        }
        WriteOutcome::ProofRefused { rejection, fence } => {
            (StatusCode::CONFLICT, Json(refused(rejection.reason(), fence))).into_response()
        }
        WriteOutcome::TooFarAhead { max_advance, fence } => {
            let answer = WriteRefused { max_token_advance: Some(max_advance), ..refused("token_too_far_ahead", fence) };
            (StatusCode::CONFLICT, Json(answer)).into_response()
        }
        WriteOutcome::GuardFailed { failure, fence } => {
            let answer = WriteRefused { message: Some(failure.to_string()), ..refused(failure.reason(), fence) };
            (StatusCode::SERVICE_UNAVAILABLE, Json(answer)).into_response()
        }
    })
}

/// One object and its resource's fence, from one snapshot.
#[utoipa::path(get, path = "/v1/storage/read", tag = "storage",
    params(
        ("resource_id" = String, Query, description = "The resource"),
        ("file_path" = String, Query, description = "The object"),
    ),
    responses(
        (status = 200, description = "The object", body = ReadAnswer),
        (status = 404, description = "No such object", body = ErrorBody),
    ))]
pub(crate) async fn read(
    State(service): State<StorageService>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let q = Params::parse(query.as_deref(), &["resource_id", "file_path"])?;
    let resource_id = q.required("resource_id")?;
    let file_path = q.required("file_path")?;
    let read = service.read(resource_id, file_path).await.map_err(storage_error)?;
    let Some(bytes) = read.bytes else {
        let message = format!("no object {file_path:?} in resource {resource_id:?}");
        return Err(ApiError::new(StatusCode::NOT_FOUND, "object_not_found", message).with_field("file_path"));
    };
    Ok(stream_read(resource_id, file_path, bytes, read.fence))
}

/// Raw bytes per streamed chunk: a multiple of 3, so the chunks' base64 concatenates.
const READ_CHUNK: usize = 48 << 10;

/// The read answer ([`ReadAnswer`]) with its base64 written a chunk at a
/// time as the client reads, from the one copy of the object (shared with
/// other readers by the engine), so a slow reader holds no copy of its own.
fn stream_read(resource_id: &str, file_path: &str, bytes: bytes::Bytes, fence: Option<Fence>) -> Response {
    #[derive(serde::Serialize)]
    struct Head<'a> {
        resource_id: &'a str,
        file_path: &'a str,
        size: u64,
        fence: Option<FenceBody>,
    }
    let head = Head { resource_id, file_path, size: bytes.len() as u64, fence: fence.map(FenceBody::from) };
    let mut prefix = serde_json::to_string(&head).expect("a read head serializes");
    prefix.pop(); // the closing brace: `bytes` follows
    prefix.push_str(r#","bytes":""#);
    let length = prefix.len() + bytes.len().div_ceil(3) * 4 + 2;
    let chunks = futures::stream::unfold(Some(0usize), move |at| {
        let bytes = bytes.clone();
        async move {
            let at = at?;
            let end = (at + READ_CHUNK).min(bytes.len());
            let mut text = BASE64.encode(&bytes[at..end]).into_bytes();
            if end == bytes.len() {
                text.extend_from_slice(br#""}"#);
                return Some((Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(text)), None));
            }
            Some((Ok(axum::body::Bytes::from(text)), Some(end)))
        }
    });
    let body = futures::stream::once(async move { Ok(axum::body::Bytes::from(prefix)) }).chain(chunks);
    let mut response = Response::new(axum::body::Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(axum::http::header::CONTENT_TYPE, axum::http::HeaderValue::from_static("application/json"));
    headers.insert(axum::http::header::CONTENT_LENGTH, length.into());
    response
}

/// A resource's fence.
#[utoipa::path(get, path = "/v1/storage/fence", tag = "storage",
    params(("resource_id" = String, Query, description = "The resource")),
    responses((status = 200, description = "The fence (null when none)", body = FenceAnswer)))]
pub(crate) async fn fence(
    State(service): State<StorageService>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let q = Params::parse(query.as_deref(), &["resource_id"])?;
    let resource_id = q.required("resource_id")?;
    let (fence, flapping) = service.fence(resource_id).await.map_err(storage_error)?;
    Ok(Json(FenceAnswer {
        resource_id: resource_id.to_owned(),
        high_water: fence.as_ref().map_or(0, |f| f.high_water),
        fence: fence.map(FenceBody::from),
        flapping,
    })
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string of up to eight characters from a few letters, `=` and
    /// space, and of up to five from a wider set: decoded exactly when the
    /// published pattern matches.
    #[test]
    fn the_published_pattern_is_the_decoder() {
        let pattern = regex::Regex::new(BYTES_PATTERN).unwrap();
        let mut checked = 0;
        for (alphabet, len) in
            [(&['A', 'Q', 'B', '=', ' '][..], 8), (&['w', 'g', '+', '/', '=', '\n', '\u{b}', '*', '\u{a0}'][..], 5)]
        {
            let mut strings = vec![String::new()];
            for _ in 0..=len {
                for text in &strings {
                    assert_eq!(pattern.is_match(text), decode_bytes(text).is_ok(), "{text:?}");
                    checked += 1;
                }
                strings = strings.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            }
        }
        assert!(checked > 400_000, "{checked}");
    }

    #[test]
    fn the_published_proof_pattern_is_the_decoder() {
        let pattern = regex::Regex::new(PROOF_PATTERN).unwrap();
        let mut strings = vec![String::new()];
        for _ in 0..=5 {
            for text in &strings {
                assert_eq!(pattern.is_match(text), decode_proof(text).is_ok(), "{text:?}");
            }
            strings = strings.iter().flat_map(|s| ['0', 'a', 'F', 'g', ' '].map(|c| format!("{s}{c}"))).collect();
        }
        assert_eq!(decode_proof("01ff").unwrap(), [1, 255]);
        assert!(decode_proof(&"00".repeat(MAX_PROOF_HEX / 2 + 1)).is_err(), "bounded");
    }
}
