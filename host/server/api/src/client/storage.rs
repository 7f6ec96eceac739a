//! A client for the storage API (`/v1/storage/*`).
//!
//! Every call returns the HTTP status and the decoded JSON body, so callers
//! can tell admitted (200), refused by the fence (409), malformed (400) and
//! server failures (5xx) apart without parsing errors out of strings.

use crate::wire::storage::Mutation;
use crate::wire::storage::{WriteBody, WritePayload};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use std::sync::Arc;

/// Why a call did not produce an HTTP answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("request to {url} failed: {source}")]
    Transport { url: String, source: reqwest::Error },
    #[error("response from {url} is not JSON: {source}")]
    Decode { url: String, source: reqwest::Error },
}

/// An HTTP answer: status and JSON body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: serde_json::Value,
}

impl Answer {
    /// `high_water` from the body, if present.
    pub fn high_water(&self) -> Option<u64> {
        self.body.get("high_water").and_then(|v| v.as_u64())
    }

    /// The decoded `bytes` of a read answer.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        self.body.get("bytes").and_then(|v| v.as_str()).and_then(|s| BASE64.decode(s).ok())
    }
}

/// One fenced write, as the client presents it.
#[derive(Debug, Clone)]
pub struct Write<'a> {
    pub resource_id: &'a str,
    pub token: u64,
    pub file_path: &'a str,
    pub mutation: Mutation,
    pub bytes: &'a [u8],
    pub lock_id: Option<&'a str>,
    pub sequence: Option<u64>,
    /// The grant's `fencing_proof` (hex), for a server that checks signed writes.
    pub proof: Option<&'a str>,
}

/// A storage API client for one server base URL (`http://127.0.0.1:7070`).
#[derive(Debug, Clone)]
pub struct StorageClient {
    base: String,
    http: reqwest::Client,
    auth: Option<Arc<str>>,
}

impl StorageClient {
    pub fn new(base: &str) -> StorageClient {
        StorageClient::with_client(base, reqwest::Client::new())
    }

    /// Shares an existing `reqwest::Client` (connection pool).
    pub fn with_client(base: &str, http: reqwest::Client) -> StorageClient {
        StorageClient { base: base.trim_end_matches('/').to_owned(), http, auth: None }
    }

    /// Sends `token` as a bearer token on writes (a server with `--auth-token-file`).
    pub fn with_auth(mut self, token: Option<String>) -> StorageClient {
        self.auth = token.map(Arc::from);
        self
    }

    async fn answer(url: String, resp: Result<reqwest::Response, reqwest::Error>) -> Result<Answer, ClientError> {
        let resp = resp.map_err(|source| ClientError::Transport { url: url.clone(), source })?;
        let status = resp.status().as_u16();
        let body = resp.json().await.map_err(|source| ClientError::Decode { url, source })?;
        Ok(Answer { status, body })
    }

    /// `POST /v1/storage/write`.
    pub async fn write(&self, w: &Write<'_>) -> Result<Answer, ClientError> {
        let body = WriteBody {
            resource_id: w.resource_id.to_owned(),
            fencing_token: w.token,
            write_payload: WritePayload {
                file_path: w.file_path.to_owned(),
                mutation_type: w.mutation,
                bytes: Some(BASE64.encode(w.bytes)),
            },
            lock_id: w.lock_id.map(str::to_owned),
            sequence: w.sequence,
            fencing_proof: w.proof.map(str::to_owned),
        };
        let url = format!("{}/v1/storage/write", self.base);
        let resp = super::authorize(self.http.post(&url), self.auth.as_ref()).json(&body).send().await;
        Self::answer(url, resp).await
    }

    /// `POST /v1/storage/write` with a raw JSON body (for malformed-input tests).
    pub async fn write_raw(&self, body: &serde_json::Value) -> Result<Answer, ClientError> {
        let url = format!("{}/v1/storage/write", self.base);
        let resp = super::authorize(self.http.post(&url), self.auth.as_ref()).json(body).send().await;
        Self::answer(url, resp).await
    }

    /// `GET /v1/storage/read`.
    pub async fn read(&self, resource_id: &str, file_path: &str) -> Result<Answer, ClientError> {
        let url = format!("{}/v1/storage/read", self.base);
        let resp = self.http.get(&url).query(&[("resource_id", resource_id), ("file_path", file_path)]).send().await;
        Self::answer(url, resp).await
    }

    /// `POST /v1/admin/fences/reset` (needs the server's bearer token).
    pub async fn reset_fence(&self, body: &crate::wire::storage::ResetBody) -> Result<Answer, ClientError> {
        let url = format!("{}/v1/admin/fences/reset", self.base);
        let resp = super::authorize(self.http.post(&url), self.auth.as_ref()).json(body).send().await;
        Self::answer(url, resp).await
    }

    /// `GET /v1/storage/fence`.
    pub async fn fence(&self, resource_id: &str) -> Result<Answer, ClientError> {
        let url = format!("{}/v1/storage/fence", self.base);
        let resp = self.http.get(&url).query(&[("resource_id", resource_id)]).send().await;
        Self::answer(url, resp).await
    }
}
