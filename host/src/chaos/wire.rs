//! The HTTP request and response bodies the campaign speaks to the storage
//! server and the lock service (the seed 001 payloads of issues 3 and 4).
//!
//! These are the client's view: requests are serialized exactly as the servers
//! document them, responses are decoded leniently (unknown fields ignored) so a
//! server that adds fields stays compatible. Tokens are always `u64`; `bytes`
//! is standard base64 with padding.

use serde::{Deserialize, Serialize};

/// How a write changes a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MutationType {
    /// Replace the file's contents.
    #[serde(rename = "PUT")]
    Put,
    /// Append to the file.
    #[serde(rename = "APPEND")]
    Append,
    /// Remove the file.
    #[serde(rename = "DELETE")]
    Delete,
}

/// `write_payload` of a write request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WritePayload {
    pub file_path: String,
    pub mutation_type: MutationType,
    /// Base64 of the bytes to write.
    pub bytes: String,
}

/// `POST /v1/storage/write`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteRequest {
    pub resource_id: String,
    pub fencing_token: u64,
    pub write_payload: WritePayload,
    /// The lock the token belongs to; the server defaults it to `resource_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    /// The per-write counter within the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// The 200 and 409 bodies of a write (`accepted` tells which).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WriteResponse {
    pub accepted: bool,
    #[serde(default)]
    pub high_water: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub presented: Option<u64>,
}

/// `POST /v1/locks/acquire`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireRequest {
    pub resource_id: String,
    pub client_id: String,
    pub lease_duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// The 200 and 409 bodies of an acquire (`lock_acquired` tells which).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AcquireResponse {
    pub lock_acquired: bool,
    #[serde(default)]
    pub lock_token: Option<String>,
    #[serde(default)]
    pub fencing_token: Option<u64>,
    #[serde(default)]
    pub lease_duration_ms: Option<u64>,
}

/// `POST /v1/locks/renew` and `POST /v1/locks/release`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRequest {
    pub resource_id: String,
    pub lock_token: String,
}

/// The parts of `GET /v1/storage/read` the checker needs: the bytes and the
/// fence's high-water mark (accepted at the top level or under `fence`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadResult {
    pub bytes: Option<Vec<u8>>,
    pub high_water: Option<u64>,
}

impl ReadResult {
    /// Extracts bytes and high-water from a read body; `None` if `bytes` is present but not base64.
    pub fn from_json(body: &serde_json::Value) -> Option<ReadResult> {
        use base64::Engine;
        let bytes = match body.get("bytes").and_then(|b| b.as_str()) {
            Some(b64) => Some(base64::engine::general_purpose::STANDARD.decode(b64).ok()?),
            None => None,
        };
        let high_water = body
            .get("fence")
            .and_then(|f| f.get("high_water"))
            .or_else(|| body.get("high_water"))
            .and_then(|h| h.as_u64());
        Some(ReadResult { bytes, high_water })
    }
}
