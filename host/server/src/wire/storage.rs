//! The storage API's bodies: the `POST /v1/storage/write` request and the
//! fence as every storage answer shows it.

use crate::storage::Mutation;
use fencing_runtime::Fence;
use serde::{Deserialize, Serialize};

/// The write API's payload, plus optional `lock_id` and `sequence`. Unknown
/// fields are refused (a misspelt `sequence` must not write unsequenced).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteBody {
    pub resource_id: String,
    pub fencing_token: u64,
    pub write_payload: WritePayload,
    /// The lock the token came from; defaults to `resource_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// What to change: `bytes` is base64 (whitespace such as a trailing newline is
/// ignored); required for `PUT` and `APPEND`, optional (and ignored) for `DELETE`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WritePayload {
    pub file_path: String,
    pub mutation_type: Mutation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// A fence on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceBody {
    pub lock_id: String,
    pub high_water: u64,
    pub sequence: Option<u64>,
}

impl From<Fence> for FenceBody {
    fn from(f: Fence) -> FenceBody {
        FenceBody { lock_id: f.lock, high_water: f.high_water, sequence: f.sequence }
    }
}

/// `POST /v1/admin/fences/reset`: an operator replaces one resource's fence.
/// With `lock_id` and `high_water` the fence becomes exactly that (the
/// resource is re-bound to `lock_id`); with neither it is removed, so the next
/// write is a first write. Giving one without the other is refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetBody {
    pub resource_id: String,
    /// Why: logged with the old and new fence (1 to 1024 bytes).
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high_water: Option<u64>,
}
