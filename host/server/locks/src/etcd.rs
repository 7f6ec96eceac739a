//! The etcd backend: the same API with state in an etcd cluster.
//!
//! One acquisition = one etcd lease (TTL = the lease rounded up to whole
//! seconds, at least two seconds) plus a transaction that creates the
//! key `/fencing/locks/<resource_id>` only if it does not exist, attached to
//! that lease. The key's value records the 128-bit lease id, the client id
//! and the etcd lease. Renew sends one keep-alive for the etcd lease; release
//! revokes it (deleting the key); expiry is etcd's.
//!
//! Invariant: the fencing token is the key's `create_revision`, i.e. the
//! revision of the creating transaction. etcd revisions are assigned by the
//! Raft log and never go backwards, across leader changes and restarts, so
//! every grant's token is greater than all earlier tokens of every lock.
//!
//! Differences from the embedded backend: waiting (`wait_ms`) polls and is not
//! FIFO; lease durations have one-second granularity (rounded up, and the
//! answer reports the effective duration); a lease id is recognized as
//! "expired" (rather than "wrong") only by the server instance that granted it.

use super::metrics::LockMetrics;
use super::{Acquired, BoxFuture, LockError, LockService, ValidAcquire};
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use fencing_api::wire::locks::{Grant, HeldReason, LeaseRef, Refusal, Released, Renewed, Status};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Shortest etcd lease used: a one-second lease can expire between its grant and the
/// transaction that attaches the key on a loaded machine.
const MIN_TTL_SECS: u64 = 2;
const PREFIX: &str = "/fencing/locks/";
/// Poll interval while waiting for a held lock.
const POLL: Duration = Duration::from_millis(20);
/// Bound on the lease ids remembered to report "expired" instead of "wrong".
const REMEMBER: usize = 100_000;

#[derive(Debug, Serialize, Deserialize)]
struct KeyValue {
    lock_token: String,
    client_id: String,
    lease_ms: u64,
}

/// Lock service on etcd.
pub struct EtcdLocks {
    client: Client,
    metrics: LockMetrics,
    /// lock_token -> etcd lease id, for leases this instance granted.
    granted: Mutex<HashMap<u128, i64>>,
}

fn unavailable(e: etcd_client::Error) -> LockError {
    LockError::Unavailable(e.to_string())
}

fn key(resource_id: &str) -> String {
    format!("{PREFIX}{resource_id}")
}

impl EtcdLocks {
    /// Connects to the cluster (loopback endpoints like `http://127.0.0.1:2379`).
    pub async fn connect(endpoints: &[String], metrics: LockMetrics) -> Result<EtcdLocks, etcd_client::Error> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(2))
            .with_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        let mut client = Client::connect(endpoints, Some(opts)).await?;
        client.status().await?;
        Ok(EtcdLocks { client, metrics, granted: Mutex::new(HashMap::new()) })
    }

    async fn acquire_inner(&self, req: ValidAcquire) -> Result<Acquired, LockError> {
        if req.lock_token.is_some() {
            return Err(LockError::invalid("lock_token", "re-entry is only supported by --locks embedded --reentrant"));
        }
        let req = req.into_inner();
        let mut c = self.client.clone();
        let ttl = req.lease_duration_ms.div_ceil(1000).max(MIN_TTL_SECS) as i64;
        let lease = super::new_lease_id();
        let k = key(&req.resource_id);
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms.unwrap_or(0));
        loop {
            // A fresh etcd lease per attempt: one granted before a long wait could expire during it.
            let grant = c.lease_grant(ttl, None).await.map_err(unavailable)?;
            let (etcd_lease, lease_ms) = (grant.id(), grant.ttl() as u64 * 1000);
            let value = serde_json::to_string(&KeyValue {
                lock_token: super::format_lease_id(lease),
                client_id: req.client_id.clone(),
                lease_ms,
            })
            .expect("plain struct serializes");
            let txn = Txn::new()
                .when([Compare::version(k.clone(), CompareOp::Equal, 0)])
                .and_then([TxnOp::put(k.clone(), value, Some(PutOptions::new().with_lease(etcd_lease)))])
                .or_else([TxnOp::get(k.clone(), None)]);
            let resp = match c.txn(txn).await {
                Ok(r) => r,
                Err(e) => {
                    let _ = c.lease_revoke(etcd_lease).await;
                    return Err(unavailable(e));
                }
            };
            if resp.succeeded() {
                // The creating transaction's revision is the key's create_revision.
                let token = resp.header().map(|h| h.revision()).unwrap_or_default() as u64;
                self.remember(lease, etcd_lease);
                self.metrics.acquisitions.inc();
                self.metrics.record_token(&req.resource_id, token);
                return Ok(Acquired::Granted(Grant {
                    resource_id: req.resource_id,
                    lock_acquired: true,
                    lock_token: super::format_lease_id(lease),
                    fencing_token: token,
                    lease_duration_ms: lease_ms,
                    acquired_at: super::rfc3339_now(),
                    fencing_proof: None,
                }));
            }
            let _ = c.lease_revoke(etcd_lease).await;
            let holder_lease = resp.op_responses().into_iter().find_map(|op| match op {
                TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.lease()),
                _ => None,
            });
            if Instant::now() >= deadline {
                let remaining_ms = match holder_lease {
                    Some(id) if id != 0 => match c.lease_time_to_live(id, None).await {
                        Ok(t) if t.ttl() > 0 => t.ttl() as u64 * 1000,
                        _ => 0,
                    },
                    _ => 0,
                };
                self.metrics.contention.inc();
                return Ok(Acquired::Refused(Refusal {
                    resource_id: req.resource_id,
                    lock_acquired: false,
                    reason: HeldReason::Held,
                    remaining_lease_ms: remaining_ms,
                }));
            }
            // Poll cheaply until the key is gone or the wait ends, then try again.
            loop {
                tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
                let gone = c.get(k.clone(), None).await.map(|g| g.kvs().is_empty()).unwrap_or(false);
                if gone || Instant::now() >= deadline {
                    break;
                }
            }
        }
    }

    fn remember(&self, lease: u128, etcd_lease: i64) {
        let mut g = self.granted.lock().expect("etcd granted map");
        if g.len() >= REMEMBER {
            g.clear();
        }
        g.insert(lease, etcd_lease);
    }

    /// The current holder's value and etcd lease, if `lease` is the lock's current lease.
    async fn find(&self, lease: &LeaseRef) -> Result<(u128, i64, KeyValue, u64), LockError> {
        let id = super::validate_lease(lease)?;
        let mut c = self.client.clone();
        let got = c.get(key(&lease.resource_id), None).await.map_err(unavailable)?;
        if let Some(kv) = got.kvs().first()
            && let Ok(v) = serde_json::from_slice::<KeyValue>(kv.value())
            && v.lock_token == lease.lock_token
        {
            return Ok((id, kv.lease(), v, kv.create_revision() as u64));
        }
        if self.granted.lock().expect("etcd granted map").contains_key(&id) {
            self.metrics.expiries.inc();
            return Err(LockError::LeaseExpired);
        }
        Err(LockError::WrongLease)
    }

    async fn renew_inner(&self, lease: LeaseRef) -> Result<Renewed, LockError> {
        let (_, etcd_lease, v, token) = self.find(&lease).await?;
        let mut c = self.client.clone();
        let (mut keeper, mut stream) = c.lease_keep_alive(etcd_lease).await.map_err(unavailable)?;
        keeper.keep_alive().await.map_err(unavailable)?;
        let answer = stream.message().await.map_err(unavailable)?;
        match answer {
            Some(r) if r.ttl() > 0 => {
                self.metrics.renewals.inc();
                Ok(Renewed {
                    resource_id: lease.resource_id,
                    renewed: true,
                    fencing_token: token,
                    lease_duration_ms: v.lease_ms,
                    fencing_proof: None,
                })
            }
            _ => Err(LockError::LeaseExpired),
        }
    }

    async fn release_inner(&self, lease: LeaseRef) -> Result<Released, LockError> {
        let (id, etcd_lease, _, token) = self.find(&lease).await?;
        let mut c = self.client.clone();
        c.lease_revoke(etcd_lease).await.map_err(unavailable)?;
        self.granted.lock().expect("etcd granted map").remove(&id);
        self.metrics.releases.inc();
        Ok(Released { resource_id: lease.resource_id, released: true, fencing_token: token })
    }

    async fn status_inner(&self, resource_id: String) -> Result<Status, LockError> {
        super::validate_name("resource_id", &resource_id)?;
        let mut c = self.client.clone();
        let got = c.get(key(&resource_id), None).await.map_err(unavailable)?;
        let mut status =
            Status { resource_id, held: false, client_id: None, fencing_token: None, remaining_ms: None, waiters: 0 };
        if let Some(kv) = got.kvs().first() {
            let v: Option<KeyValue> = serde_json::from_slice(kv.value()).ok();
            let ttl = c.lease_time_to_live(kv.lease(), None).await.map_err(unavailable)?.ttl();
            status.held = ttl > 0;
            status.client_id = v.map(|v| v.client_id);
            status.fencing_token = Some(kv.create_revision() as u64);
            status.remaining_ms = Some(ttl.max(0) as u64 * 1000);
        }
        Ok(status)
    }
}

impl LockService for EtcdLocks {
    fn acquire(&self, req: ValidAcquire) -> BoxFuture<'_, Result<Acquired, LockError>> {
        Box::pin(self.acquire_inner(req))
    }
    fn renew(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Renewed, LockError>> {
        Box::pin(self.renew_inner(lease))
    }
    fn release(&self, lease: LeaseRef) -> BoxFuture<'_, Result<Released, LockError>> {
        Box::pin(self.release_inner(lease))
    }
    fn status(&self, resource_id: String) -> BoxFuture<'_, Result<Status, LockError>> {
        Box::pin(self.status_inner(resource_id))
    }
    fn backend(&self) -> &'static str {
        "etcd"
    }
}
