//! Acquiring a lock: the loop that grants a free lock to the head of its
//! queue, re-grants a held lease to the holder that presents it, or waits
//! (first come, first served) until the request's deadline, and answers a
//! grant only once the journal holds it.

use super::EmbeddedLocks;
use super::state::ceil_ms;
use crate::journal::{Change, Durable, JournalError};
use crate::table::Shard;
use crate::{Acquired, LockError, ValidAcquire};
use fencing_api::wire::locks::{AcquireRequest, Grant, HeldReason, Refusal};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

impl EmbeddedLocks {
    pub(super) async fn acquire_inner(&self, req: ValidAcquire) -> Result<Acquired, LockError> {
        let presented = req.lock_token.as_deref().and_then(crate::parse_lease_id);
        if presented.is_some() && !self.inner.cfg.reentrant {
            return Err(LockError::invalid("lock_token", "re-entry is not enabled on this server (--reentrant)"));
        }
        let req = req.into_inner();
        let inner = &self.inner;
        inner.ensure_lease_durable(req.lease_duration_ms)?;
        let deadline = Instant::now() + Duration::from_millis(req.wait_ms.unwrap_or(0));
        let mut queued: Option<WaiterGuard> = None;
        loop {
            let now = Instant::now();
            if inner.held.load(Ordering::Acquire) >= inner.cfg.max_held {
                inner.sweep_all(now);
            }
            let step = {
                let mut shard = inner.shard(&req.resource_id);
                let counts = inner.counts();
                shard.sweep_some(now, &counts);
                if now >= inner.grace_until {
                    shard.entry(&req.resource_id, inner.base);
                    let free = shard.settle(&req.resource_id, now, &counts);
                    let entry = shard.get_mut(&req.resource_id).expect("entry created above");
                    let my_turn = match &queued {
                        Some(w) => entry.waiters.front().map(|(id, _)| *id) == Some(w.id),
                        None => entry.waiters.is_empty(),
                    };
                    if free && my_turn {
                        let (grant, durable) = inner.grant(&mut shard, &req, queued.is_some(), now)?;
                        AcquireStep::Granted(grant, durable)
                    } else if let (Some(h), Some(id)) = (&entry.holder, presented)
                        && h.lease == id
                    {
                        let (grant, durable) = inner.regrant(&mut shard, &req, now);
                        AcquireStep::Regranted(grant, durable)
                    } else {
                        let remaining = entry.holder.as_ref().map(|h| h.expires - now).unwrap_or_default();
                        self.wait_or_refuse(&mut shard, &req, &mut queued, HeldReason::Held, remaining, now, deadline)
                    }
                } else {
                    let remaining = inner.grace_until - now;
                    self.wait_or_refuse(
                        &mut shard,
                        &req,
                        &mut queued,
                        HeldReason::GracePeriod,
                        remaining,
                        now,
                        deadline,
                    )
                }
            };
            let (wake_at, notify) = match step {
                AcquireStep::Granted(grant, durable) => {
                    drop(queued);
                    return self.await_grant(grant, durable).await.map(Acquired::Granted);
                }
                AcquireStep::Regranted(grant, durable) => {
                    return await_durable(durable).await.map(|()| Acquired::Granted(grant));
                }
                AcquireStep::Refused(refusal) => return Ok(Acquired::Refused(refusal)),
                AcquireStep::Wait(wake_at, notify) => (wake_at, notify),
            };
            let sleep = tokio::time::sleep_until(wake_at.max(now + Duration::from_millis(1)).into());
            match notify {
                Some(n) => {
                    tokio::select! {
                        _ = n.notified() => {}
                        _ = sleep => {}
                    }
                }
                None => sleep.await,
            }
        }
    }

    /// Refuses `req` once its deadline has passed; otherwise queues it (on a
    /// held lock) and says until when to wait.
    #[allow(clippy::too_many_arguments)]
    fn wait_or_refuse(
        &self,
        shard: &mut Shard,
        req: &AcquireRequest,
        queued: &mut Option<WaiterGuard>,
        reason: HeldReason,
        remaining: Duration,
        now: Instant,
        deadline: Instant,
    ) -> AcquireStep {
        if now >= deadline {
            self.inner.metrics.contention.inc();
            shard.note_idle(&req.resource_id);
            return AcquireStep::Refused(Refusal {
                resource_id: req.resource_id.clone(),
                lock_acquired: false,
                reason,
                remaining_lease_ms: ceil_ms(remaining),
            });
        }
        if queued.is_none() && reason == HeldReason::Held {
            let id = self.inner.next_waiter.fetch_add(1, Ordering::Relaxed);
            let notify = Arc::new(Notify::new());
            let entry = shard.get_mut(&req.resource_id).expect("entry created by the caller");
            entry.waiters.push_back((id, notify.clone()));
            *queued = Some(WaiterGuard { locks: self.clone(), resource_id: req.resource_id.clone(), id, notify });
        }
        let notify = queued.as_ref().map(|w| w.notify.clone());
        AcquireStep::Wait((now + remaining).min(deadline), notify)
    }

    /// Answers a grant once the journal holds it; if it cannot, undoes the
    /// grant (unless the lease already changed) and reports the backend unavailable.
    async fn await_grant(&self, grant: Grant, durable: Option<Durable>) -> Result<Grant, LockError> {
        let Err(e) = await_durable(durable).await else { return Ok(grant) };
        let lease = crate::parse_lease_id(&grant.lock_token).expect("the service formatted it");
        let inner = &self.inner;
        let mut shard = inner.shard(&grant.resource_id);
        if shard.get_mut(&grant.resource_id).and_then(|e| e.holder.as_ref()).is_some_and(|h| h.lease == lease) {
            shard.unhold(&grant.resource_id, &inner.counts());
            if let Some(j) = &inner.journal {
                j.append_unacknowledged(Change::Release { name: grant.resource_id.as_str().into(), lease });
            }
        }
        tracing::error!(error = %e, lock = ?grant.resource_id, "grant undone: the lease journal could not hold it");
        Err(e)
    }
}

/// What one pass of the acquisition loop decided, acted on outside the shard's mutex.
pub(super) enum AcquireStep {
    Granted(Grant, Option<Durable>),
    Regranted(Grant, Option<Durable>),
    Refused(Refusal),
    Wait(Instant, Option<Arc<Notify>>),
}

pub(super) async fn await_durable(durable: Option<Durable>) -> Result<(), LockError> {
    let Some(durable) = durable else { return Ok(()) };
    match durable.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(LockError::Unavailable(e.to_string())),
        Err(_) => Err(LockError::Unavailable(JournalError::Stopped.to_string())),
    }
}

/// A place in a lock's wait queue; leaving (grant, timeout, or the caller going away) frees it.
struct WaiterGuard {
    locks: EmbeddedLocks,
    resource_id: String,
    id: u64,
    notify: Arc<Notify>,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut shard = self.locks.inner.shard(&self.resource_id);
        if let Some(entry) = shard.get_mut(&self.resource_id) {
            let was_head = entry.waiters.front().map(|(id, _)| *id) == Some(self.id);
            entry.waiters.retain(|(id, _)| *id != self.id);
            if was_head {
                entry.wake_head();
            }
            shard.note_idle(&self.resource_id);
        }
    }
}
