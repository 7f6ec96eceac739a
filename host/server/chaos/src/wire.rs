//! The campaign's view of the servers' answers.
//!
//! Requests are not defined here: the clients serialize the servers' own
//! request types (`wire::storage::WriteBody`, `wire::locks::AcquireRequest`,
//! `wire::locks::LeaseRef`), so there is one definition of each body. Responses are
//! decoded leniently (unknown fields ignored, every field but the verdict
//! optional) because the campaign must record whatever a faulty or restarted
//! server answers rather than fail on it. Tokens are always `u64`; `bytes` is
//! standard base64 with padding.

use serde::Deserialize;

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
    /// The lock service's proof for the token (servers that sign grants).
    #[serde(default)]
    pub fencing_proof: Option<String>,
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
