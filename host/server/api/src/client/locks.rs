//! HTTP client for the lock API, and [`HeldLock`], the lease-keeping handle
//! that writers take their fencing token from.
//!
//! [`HeldLock`] invariants:
//! - the lease's validity is measured on the local monotonic clock from the
//!   moment the acquire (or renew) request was *sent*, less a margin for clock
//!   rate differences, so the local view never outlives the server's lease;
//! - it renews in the background every `renew_fraction` of the lease;
//! - [`HeldLock::token`] returns `None` from the moment a renewal is refused
//!   or the lease may have expired (renewals failing in transport past the
//!   local validity), so a writer cannot knowingly present a token it no
//!   longer holds. A pause after the writer read the token is what the
//!   storage fence is for.

use crate::wire::locks::Acquired;
use crate::wire::locks::{AcquireRequest, Grant, LeaseRef, Refusal, Released, Renewed, Status};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a lock API call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("request to lock service failed: {0}")]
    Transport(#[from] reqwest::Error),
    /// The service answered with an error body.
    #[error("lock service answered {status} {code}: {message}")]
    Api { status: u16, code: String, message: String, field: Option<String> },
    #[error("unexpected answer from lock service: {0}")]
    Decode(String),
}

impl ClientError {
    /// True for answers that mean the request itself was bad (HTTP 400, 413, 415).
    pub fn is_bad_input(&self) -> bool {
        matches!(self, ClientError::Api { status: 400 | 413 | 415, .. })
    }
}

/// A client of one lock service (`http://host:port`). Clones share the connection pool.
#[derive(Clone)]
pub struct LockClient {
    http: reqwest::Client,
    base: String,
    auth: Option<Arc<str>>,
}

impl LockClient {
    /// A client of the service at `base` (e.g. `http://127.0.0.1:7070`).
    pub fn new(base: impl Into<String>) -> LockClient {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(330))
            .tcp_nodelay(true)
            .build()
            .expect("reqwest client without TLS builds");
        LockClient { http, base: base.into().trim_end_matches('/').to_string(), auth: None }
    }

    /// Sends `token` as a bearer token on acquire, renew and release (a server with `--auth-token-file`).
    pub fn with_auth(mut self, token: Option<String>) -> LockClient {
        self.auth = token.map(Arc::from);
        self
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        super::authorize(self.http.post(format!("{}{path}", self.base)), self.auth.as_ref())
    }

    /// Acquires, or reports the lock held (HTTP 409).
    pub async fn acquire(&self, req: &AcquireRequest) -> Result<Acquired, ClientError> {
        let resp = self.post("/v1/locks/acquire").json(req).send().await?;
        if resp.status() == reqwest::StatusCode::CONFLICT {
            let bytes = resp.bytes().await?;
            return serde_json::from_slice::<Refusal>(&bytes)
                .map(Acquired::Refused)
                .map_err(|e| ClientError::Decode(e.to_string()));
        }
        decode::<Grant>(resp).await.map(Acquired::Granted)
    }

    /// Extends the lease.
    pub async fn renew(&self, resource_id: &str, lock_token: &str) -> Result<Renewed, ClientError> {
        let body = LeaseRef { resource_id: resource_id.into(), lock_token: lock_token.into() };
        decode(self.post("/v1/locks/renew").json(&body).send().await?).await
    }

    /// Frees the lock.
    pub async fn release(&self, resource_id: &str, lock_token: &str) -> Result<Released, ClientError> {
        let body = LeaseRef { resource_id: resource_id.into(), lock_token: lock_token.into() };
        decode(self.post("/v1/locks/release").json(&body).send().await?).await
    }

    /// Who holds the lock.
    pub async fn status(&self, resource_id: &str) -> Result<Status, ClientError> {
        let url = format!("{}/v1/locks/status", self.base);
        decode(self.http.get(url).query(&[("resource_id", resource_id)]).send().await?).await
    }
}

async fn decode<T: DeserializeOwned>(resp: reqwest::Response) -> Result<T, ClientError> {
    let status = resp.status();
    let bytes = resp.bytes().await?;
    if status.is_success() {
        return serde_json::from_slice(&bytes).map_err(|e| ClientError::Decode(e.to_string()));
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let err = &v["error"];
    Err(ClientError::Api {
        status: status.as_u16(),
        code: err["code"].as_str().unwrap_or("unknown").to_string(),
        message: err["message"].as_str().unwrap_or_else(|| std::str::from_utf8(&bytes).unwrap_or("")).to_string(),
        field: err["field"].as_str().map(str::to_string),
    })
}

struct Current {
    token: u64,
    valid_until: Instant,
}

struct Shared {
    current: Mutex<Option<Current>>,
    lost: Mutex<Option<String>>,
}

impl Shared {
    fn drop_token(&self, why: String) {
        *self.current.lock().expect("held lock state") = None;
        let mut lost = self.lost.lock().expect("held lock state");
        lost.get_or_insert(why);
    }
}

/// A lease kept alive in the background; the source of the fencing token for writes.
pub struct HeldLock {
    client: LockClient,
    grant: Grant,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

/// Tuning of [`HeldLock`].
#[derive(Debug, Clone, Copy)]
pub struct KeepOptions {
    /// Renew after this fraction of the lease (default 1/3).
    pub renew_fraction: f64,
    /// Fraction of the lease subtracted from the local validity for clock-rate differences (default 5%).
    pub margin_fraction: f64,
}

impl Default for KeepOptions {
    fn default() -> Self {
        KeepOptions { renew_fraction: 1.0 / 3.0, margin_fraction: 0.05 }
    }
}

impl HeldLock {
    /// Acquires `req` and starts renewing; `Ok(Err(refusal))` when the lock is held by someone else.
    pub async fn acquire(
        client: LockClient,
        req: AcquireRequest,
        opts: KeepOptions,
    ) -> Result<Result<HeldLock, Refusal>, ClientError> {
        let sent = Instant::now();
        let grant = match client.acquire(&req).await? {
            Acquired::Granted(g) => g,
            Acquired::Refused(r) => return Ok(Err(r)),
        };
        let lease = Duration::from_millis(grant.lease_duration_ms);
        let valid = lease.mul_f64(1.0 - opts.margin_fraction.clamp(0.0, 0.9));
        let shared = Arc::new(Shared {
            current: Mutex::new(Some(Current { token: grant.fencing_token, valid_until: sent + valid })),
            lost: Mutex::new(None),
        });
        let every = lease.mul_f64(opts.renew_fraction.clamp(0.01, 0.9));
        let task = tokio::spawn(keep_alive(
            client.clone(),
            grant.resource_id.clone(),
            grant.lock_token.clone(),
            valid,
            every,
            shared.clone(),
        ));
        Ok(Ok(HeldLock { client, grant, shared, task }))
    }

    /// The fencing token, or `None` once the lease is lost or may have expired.
    pub fn token(&self) -> Option<u64> {
        let mut current = self.shared.current.lock().expect("held lock state");
        match &*current {
            Some(c) if Instant::now() < c.valid_until => Some(c.token),
            Some(_) => {
                *current = None;
                drop(current);
                self.shared.drop_token("the lease may have expired (no successful renewal in time)".into());
                None
            }
            None => None,
        }
    }

    /// Why the token was dropped, once it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.shared.lost.lock().expect("held lock state").clone()
    }

    /// The grant this handle was created from.
    pub fn grant(&self) -> &Grant {
        &self.grant
    }

    /// Stops renewing and releases the lease.
    pub async fn release(self) -> Result<Released, ClientError> {
        self.task.abort();
        self.shared.drop_token("released".into());
        self.client.release(&self.grant.resource_id, &self.grant.lock_token).await
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn keep_alive(
    client: LockClient,
    resource_id: String,
    lock_token: String,
    valid: Duration,
    every: Duration,
    shared: Arc<Shared>,
) {
    let mut next = Instant::now() + every;
    loop {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let deadline = match &*shared.current.lock().expect("held lock state") {
            Some(c) => c.valid_until,
            None => return,
        };
        if sent >= deadline {
            shared.drop_token("the lease may have expired before it could be renewed".into());
            return;
        }
        let attempt = tokio::time::timeout(deadline - sent, client.renew(&resource_id, &lock_token)).await;
        match attempt {
            Ok(Ok(_)) => {
                if let Some(c) = shared.current.lock().expect("held lock state").as_mut() {
                    c.valid_until = sent + valid;
                }
                next = sent + every;
            }
            Ok(Err(ClientError::Api { code, message, .. })) => {
                shared.drop_token(format!("renewal refused: {code}: {message}"));
                return;
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "lease renewal failed; retrying while the lease is still valid");
                next = Instant::now() + (every / 4).max(Duration::from_millis(5));
            }
            Err(_) => {
                shared.drop_token("renewal did not answer before the lease could expire".into());
                return;
            }
        }
    }
}
