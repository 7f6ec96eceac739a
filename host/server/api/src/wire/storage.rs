//! The storage API's bodies: the `POST /v1/storage/write` request and the
//! fence as every storage answer shows it.

use fencing_rules::Fence;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// How a write changes its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Mutation {
    /// Replace the object with the bytes.
    #[serde(alias = "put")]
    Put,
    /// Append the bytes to the object (creating it if absent).
    #[serde(alias = "append")]
    Append,
    /// Remove the object (bytes are ignored). Deleting an absent object is admitted and changes only the fence.
    #[serde(alias = "delete")]
    Delete,
}

/// The wire schema: the upper-case names, and the lower-case ones also accepted.
impl utoipa::PartialSchema for Mutation {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(["PUT", "APPEND", "DELETE", "put", "append", "delete"]))
            .description(Some("PUT replaces the object, APPEND appends to it, DELETE removes it."))
            .into()
    }
}

impl utoipa::ToSchema for Mutation {}

impl Mutation {
    /// The wire name (`PUT`, `APPEND`, `DELETE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mutation::Put => "PUT",
            Mutation::Append => "APPEND",
            Mutation::Delete => "DELETE",
        }
    }
}

/// The write API's payload, plus optional `lock_id` and `sequence`. Unknown
/// fields are refused (a misspelt `sequence` must not write unsequenced).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteBody {
    /// The resource (bucket) written: 1 to 256 characters, no control characters, no surrounding whitespace.
    pub resource_id: String,
    /// The fencing token from the lock service (at least 1).
    #[serde(deserialize_with = "super::number::u64_integral")]
    pub fencing_token: u64,
    pub write_payload: WritePayload,
    /// The lock the token came from; defaults to `resource_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    /// Orders one holder's writes within one token.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::number::opt_u64_integral")]
    pub sequence: Option<u64>,
    /// The grant's `fencing_proof` (hex), for a server that checks signed
    /// writes (`--verify-keys`); ignored by one that does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fencing_proof: Option<String>,
}

/// What to change: `bytes` is base64 (whitespace such as a trailing newline is
/// ignored); required for `PUT` and `APPEND`, optional (and ignored) for `DELETE`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WritePayload {
    /// The object: 1 to 1024 characters, no control characters or backslash, no empty, `.` or `..` segment.
    pub file_path: String,
    pub mutation_type: Mutation,
    /// Base64 (whitespace ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// A fence on the wire: the lock a resource is bound to, its high-water mark and last sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetBody {
    pub resource_id: String,
    /// Why: logged with the old and new fence (1 to 1024 characters).
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "super::number::opt_u64_integral")]
    pub high_water: Option<u64>,
}

/// 200 answer to a write: admitted and durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WriteAdmitted {
    /// Always `true`.
    pub accepted: bool,
    pub resource_id: String,
    /// The resource's high-water mark after the write.
    pub high_water: u64,
    pub sequence: Option<u64>,
    /// Whether this write began a new token for the resource.
    pub new_term: bool,
    pub flapping: bool,
}

/// 409 (refused by the fence, or too far ahead) or 503 (the guard could not decide) answer to a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WriteRefused {
    /// Always `false`.
    pub accepted: bool,
    /// `stale_token`, `token_reused`, `wrong_lock`, `invalid_token`, `sequence_regressed`,
    /// `token_too_far_ahead`; with signed writes `proof_missing`, `proof_malformed`,
    /// `proof_unknown_key`, `proof_bad`; or (503) why the guard failed (`guard_trap`, ...).
    pub reason: String,
    pub presented: u64,
    /// The resource's high-water mark (0: no fence yet).
    pub high_water: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<FenceBody>,
    /// With `token_too_far_ahead`: the server's `--max-token-advance`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_token_advance: Option<u64>,
    /// With a guard failure: what failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `GET /v1/storage/read`: one object and its resource's fence, from one snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReadAnswer {
    pub resource_id: String,
    pub file_path: String,
    pub size: u64,
    /// Base64.
    pub bytes: String,
    pub fence: Option<FenceBody>,
}

/// `GET /v1/storage/fence`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FenceAnswer {
    pub resource_id: String,
    /// 0 when the resource has no fence.
    pub high_water: u64,
    pub fence: Option<FenceBody>,
    pub flapping: bool,
}

/// `POST /v1/admin/fences/reset`: the fence replaced and the one set (`null`: removed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ResetAnswer {
    pub resource_id: String,
    pub previous: Option<FenceBody>,
    pub fence: Option<FenceBody>,
}
