//! What a lease's holder does with it (renew, release) and what anyone may
//! ask of a lock (its status), each under the lock's shard mutex once
//! expiry is settled.

use super::EmbeddedLocks;
use super::acquire::await_durable;
use super::state::ceil_ms;
use crate::LockError;
use crate::journal::Change;
use crate::table::Shard;
use fencing_api::wire::locks::{LeaseRef, Released, Renewed, Status};
use std::time::{Duration, Instant};

impl EmbeddedLocks {
    pub(super) fn renew_inner(&self, lease: LeaseRef) -> Result<Renewed, LockError> {
        let inner = &self.inner;
        let (token, lease_ms) = self.with_lease(&lease, |shard, name, id, now| {
            let entry = shard.get_mut(name).expect("with_lease found the entry");
            let h = entry.holder.as_mut().expect("with_lease found the holder");
            h.expires = now + Duration::from_millis(h.lease_ms);
            inner.metrics.renewals.inc();
            if let Some(j) = &inner.journal {
                j.append_unacknowledged(Change::Renew { name: name.into(), lease: id, lease_ms: h.lease_ms });
            }
            (h.token, h.lease_ms)
        })?;
        Ok(Renewed {
            resource_id: lease.resource_id,
            renewed: true,
            fencing_token: token,
            lease_duration_ms: lease_ms,
            fencing_proof: None,
        })
    }

    pub(super) async fn release_inner(&self, lease: LeaseRef) -> Result<Released, LockError> {
        let inner = &self.inner;
        let (token, durable) = self.with_lease(&lease, |shard, name, id, _| {
            let h = shard.unhold(name, &inner.counts()).expect("with_lease found the holder");
            inner.metrics.releases.inc();
            let durable =
                inner.journal.as_ref().map(|j| j.append_written(Change::Release { name: name.into(), lease: id }));
            (h.token, durable)
        })?;
        await_durable(durable).await?;
        Ok(Released { resource_id: lease.resource_id, released: true, fencing_token: token })
    }

    /// Runs `f` on the shard of the lock `lease` names, under its mutex, once
    /// expiry is settled and `lease` is known to hold it (the entry exists
    /// and its holder's lease is `lease`'s id, passed to `f`).
    ///
    /// Errors: `lease` fails [`crate::validate_lease`]; `LeaseExpired` when it is
    /// the lock's most recently expired lease; `WrongLease` when the lock is
    /// unknown or any other lease (or none) holds it.
    fn with_lease<T>(
        &self,
        lease: &LeaseRef,
        f: impl FnOnce(&mut Shard, &str, u128, Instant) -> T,
    ) -> Result<T, LockError> {
        let id = crate::validate_lease(lease)?;
        let inner = &self.inner;
        let now = Instant::now();
        let name = lease.resource_id.as_str();
        let mut shard = inner.shard(name);
        let counts = inner.counts();
        shard.sweep_some(now, &counts);
        shard.settle(name, now, &counts);
        let entry = shard.get_mut(name).ok_or(LockError::WrongLease)?;
        if entry.holder.as_ref().is_some_and(|h| h.lease == id) {
            Ok(f(&mut shard, name, id, now))
        } else if entry.expired_lease == Some(id) {
            Err(LockError::LeaseExpired)
        } else {
            Err(LockError::WrongLease)
        }
    }

    pub(super) fn status_inner(&self, resource_id: String) -> Result<Status, LockError> {
        crate::validate_name("resource_id", &resource_id)?;
        let inner = &self.inner;
        let now = Instant::now();
        let mut shard = inner.shard(&resource_id);
        shard.settle(&resource_id, now, &inner.counts());
        let mut status = Status {
            resource_id: resource_id.clone(),
            held: false,
            client_id: None,
            fencing_token: None,
            remaining_ms: None,
            waiters: 0,
        };
        if let Some(entry) = shard.get_mut(&resource_id) {
            status.waiters = entry.waiters.len() as u64;
            if let Some(h) = &entry.holder {
                status.held = true;
                status.client_id = Some(h.client_id.clone());
                status.fencing_token = Some(h.token);
                status.remaining_ms = Some(ceil_ms(h.expires - now));
            }
        }
        Ok(status)
    }
}
