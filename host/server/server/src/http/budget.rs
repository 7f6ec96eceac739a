//! Requests that hold their connection for long, and the room always kept
//! for the rest.
//!
//! Most requests leave the service within milliseconds. Three kinds can keep
//! a connection, and a descriptor or two, far longer; a client that makes
//! many of them could fill `--max-connections` with work that never ends, so
//! each is bounded here:
//! - a **slow body**, still arriving [`SLOW_AFTER`] after the request began,
//!   takes a *long-hold* slot; every body must also keep to
//!   `--body-min-rate` on average after a grace of `--body-timeout`
//!   (408 `body_timeout` otherwise), so its total time is bounded, not only
//!   its stalls;
//! - a **waiting acquisition** (`wait_ms` above 0) takes a long-hold slot and
//!   one of its client address's `--max-waiting-per-client`;
//! - a **spooled body** takes a spool slot for its temporary file, so every
//!   descriptor a connection can hold is counted (`fencing serve` keeps the
//!   slots and the connection cap together under the open-file limit), and
//!   one of its client address's `--max-spooling-per-client`; a spooled body
//!   that is also slow holds a *slow spool* slot, of which there are three
//!   quarters of the spool slots.
//!
//! Long-hold slots are three quarters of the connection cap, slow spool
//! slots three quarters of the spool slots: the last quarter of each is left
//! to requests that finish quickly, so clients trickling large bodies (from
//! however many addresses) never hold every spool slot, and one address
//! never holds more than its allowance. A request that finds no slot is
//! answered 503 at once (`server_busy`, or `too_many_waiting` naming
//! `wait_ms`), never queued behind the ones holding them.

use super::ApiError;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The code of a 503 for a request that found no slot for its body.
pub(super) const SERVER_BUSY: &str = "server_busy";

/// The code of the 408 for a body that stalled (slower than the minimum
/// rate): the rest was never read.
pub(super) const BODY_TIMEOUT: &str = "body_timeout";

/// A body still arriving this long after its request began is a slow body.
pub const SLOW_AFTER: Duration = Duration::from_secs(1);

/// The bounds, shared by every connection of one server.
pub struct Budget {
    long_holds: Arc<Semaphore>,
    spools: Arc<Semaphore>,
    slow_spools: Arc<Semaphore>,
    waiting: Mutex<HashMap<IpAddr, usize>>,
    max_waiting_per_client: usize,
    spooling: Mutex<HashMap<IpAddr, usize>>,
    max_spooling_per_client: usize,
    body_min_rate: u64,
    body_grace: Duration,
}

/// The long-hold slots for a connection cap: three quarters of it, at least one.
pub fn long_hold_slots(max_connections: usize) -> usize {
    (max_connections - max_connections / 4).max(1)
}

/// Default `--max-spooling-per-client`: spooled bodies one client address may send at once.
pub const DEFAULT_MAX_SPOOLING_PER_CLIENT: usize = 16;

impl Budget {
    /// A budget for `max_connections` connections, `spool_files` spooled
    /// bodies at once, at most `max_waiting_per_client` waiting acquisitions
    /// and [`DEFAULT_MAX_SPOOLING_PER_CLIENT`] spooled bodies per client
    /// address, bodies at `body_min_rate` bytes per second after `body_grace`.
    pub fn new(
        max_connections: usize,
        spool_files: usize,
        max_waiting_per_client: usize,
        body_min_rate: u64,
        body_grace: Duration,
    ) -> Budget {
        let spool_files = spool_files.max(1);
        Budget {
            long_holds: Arc::new(Semaphore::new(long_hold_slots(max_connections))),
            spools: Arc::new(Semaphore::new(spool_files)),
            slow_spools: Arc::new(Semaphore::new(long_hold_slots(spool_files))),
            waiting: Mutex::new(HashMap::new()),
            max_waiting_per_client,
            spooling: Mutex::new(HashMap::new()),
            max_spooling_per_client: DEFAULT_MAX_SPOOLING_PER_CLIENT,
            body_min_rate,
            body_grace,
        }
    }

    /// The same budget with at most `n` spooled bodies per client address.
    pub fn with_max_spooling_per_client(mut self, n: usize) -> Budget {
        self.max_spooling_per_client = n.max(1);
        self
    }
}

/// One request's client and the budget it draws on (a request extension
/// the connection adds; absent when the router is served some other way,
/// and then nothing is bounded here).
#[derive(Clone)]
pub struct Peer {
    budget: Arc<Budget>,
    ip: IpAddr,
}

/// A slot held until dropped.
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

/// A spooled body's slots, given back when dropped: a spool slot, its
/// address's allowance, and a slow spool slot once the body is slow.
pub struct SpoolSlot {
    peer: Peer,
    _permit: OwnedSemaphorePermit,
    slow: Option<OwnedSemaphorePermit>,
}

impl SpoolSlot {
    /// The body is slow as well as spooled: it takes a slow spool slot, or
    /// 503 `server_busy` (the last quarter is kept for bodies that arrive quickly).
    pub fn now_slow(&mut self) -> Result<(), ApiError> {
        if self.slow.is_none() {
            let permit = self.peer.budget.slow_spools.clone().try_acquire_owned().map_err(|_| {
                busy(
                    "too many large request bodies are arriving slowly; the rest of the server's room for large \
                     bodies is kept for ones that arrive quickly",
                )
            })?;
            self.slow = Some(permit);
        }
        Ok(())
    }
}

impl Drop for SpoolSlot {
    fn drop(&mut self) {
        release(&self.peer.budget.spooling, self.peer.ip);
    }
}

/// Gives back one of `ip`'s places in `counts`.
fn release(counts: &Mutex<HashMap<IpAddr, usize>>, ip: IpAddr) {
    let mut counts = counts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(n) = counts.get_mut(&ip) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&ip);
        }
    }
}

/// A waiting acquisition's slots, given back when dropped.
pub struct WaitSlot {
    peer: Peer,
    _permit: OwnedSemaphorePermit,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        release(&self.peer.budget.waiting, self.peer.ip);
    }
}

impl Peer {
    /// `ip`'s requests, drawing on `budget`.
    pub fn new(budget: Arc<Budget>, ip: IpAddr) -> Peer {
        Peer { budget, ip }
    }

    /// The client's address.
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The moment a body that began at `start` and has `received` bytes so
    /// far falls below the minimum rate.
    pub fn body_deadline(&self, start: Instant, received: usize) -> Instant {
        let rate = self.budget.body_min_rate.max(1);
        let earned = Duration::from_secs_f64(received as f64 / rate as f64);
        start + self.budget.body_grace + earned
    }

    /// The 408 for a body below the minimum rate.
    pub fn too_slow(&self) -> ApiError {
        let message = format!(
            "the request body arrived slower than the server's minimum of {} bytes per second \
             (--body-min-rate, after --body-timeout)",
            self.budget.body_min_rate
        );
        ApiError::new(StatusCode::REQUEST_TIMEOUT, BODY_TIMEOUT, message).with_field("body")
    }

    /// A long-hold slot for a slow body, or 503 `server_busy`.
    pub fn slow_body(&self) -> Result<Slot, ApiError> {
        let permit = self.budget.long_holds.clone().try_acquire_owned().map_err(|_| {
            busy("too many requests are sending their bodies slowly; the rest of the server's connections are kept for quick requests")
        })?;
        Ok(Slot { _permit: permit })
    }

    /// The slots for a body's temporary file (a slow body's too, when
    /// `slow`), or 503 `server_busy`: none free, or this address already
    /// sends `--max-spooling-per-client` spooled bodies.
    pub fn spool(&self, slow: bool) -> Result<SpoolSlot, ApiError> {
        let mut spooling = self.budget.spooling.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = spooling.get(&self.ip).copied().unwrap_or(0);
        if mine >= self.budget.max_spooling_per_client {
            return Err(busy(&format!(
                "this client already sends {mine} large request bodies at once (--max-spooling-per-client); \
                 retry when one has finished"
            )));
        }
        let permit = self
            .budget
            .spools
            .clone()
            .try_acquire_owned()
            .map_err(|_| busy("too many large request bodies are being received at once"))?;
        *spooling.entry(self.ip).or_insert(0) += 1;
        drop(spooling);
        let mut slot = SpoolSlot { peer: self.clone(), _permit: permit, slow: None };
        if slow {
            slot.now_slow()?;
        }
        Ok(slot)
    }

    /// Slots for an acquisition that waits, or 503 `too_many_waiting`.
    pub fn wait(&self) -> Result<WaitSlot, ApiError> {
        let refuse = |message: String| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_waiting", message).with_field("wait_ms")
        };
        let mut waiting = self.budget.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mine = waiting.get(&self.ip).copied().unwrap_or(0);
        if mine >= self.budget.max_waiting_per_client {
            return Err(refuse(format!(
                "this client already has {mine} acquisitions waiting (--max-waiting-per-client); \
                 retry without wait_ms or later"
            )));
        }
        let permit = self.budget.long_holds.clone().try_acquire_owned().map_err(|_| {
            refuse("the server has as many long requests waiting as it allows; retry without wait_ms or later".into())
        })?;
        *waiting.entry(self.ip).or_insert(0) += 1;
        drop(waiting);
        Ok(WaitSlot { peer: self.clone(), _permit: permit })
    }
}

fn busy(message: &str) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, SERVER_BUSY, message).with_field("body")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(budget: &Arc<Budget>, last: u8) -> Peer {
        Peer::new(budget.clone(), IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn a_quarter_of_the_cap_is_never_held_long() {
        assert_eq!(long_hold_slots(100), 75);
        assert_eq!(long_hold_slots(50), 38);
        assert_eq!(long_hold_slots(1), 1);
        let budget = Arc::new(Budget::new(8, 4, 100, 1024, Duration::from_secs(1)));
        let p = peer(&budget, 1);
        let held: Vec<_> = (0..6).map(|_| p.slow_body().expect("a slot")).collect();
        assert_eq!(p.slow_body().err().map(|e| e.code), Some("server_busy"));
        assert_eq!(p.wait().err().map(|e| e.code), Some("too_many_waiting"));
        drop(held);
        assert!(p.wait().is_ok());
    }

    #[test]
    fn waiting_acquisitions_are_bounded_per_client_address() {
        let budget = Arc::new(Budget::new(100, 4, 2, 1024, Duration::from_secs(1)));
        let (a, b) = (peer(&budget, 1), peer(&budget, 2));
        let first = a.wait().expect("first");
        let _second = a.wait().expect("second");
        let refused = a.wait().err().expect("a third is refused");
        assert_eq!((refused.code, refused.field.as_deref()), ("too_many_waiting", Some("wait_ms")));
        assert!(b.wait().is_ok(), "another address has its own allowance");
        drop(first);
        assert!(a.wait().is_ok(), "a finished wait gives its place back");
    }

    #[test]
    fn spool_slots_are_counted() {
        let budget = Arc::new(Budget::new(100, 2, 2, 1024, Duration::from_secs(1)));
        let (p, q) = (peer(&budget, 1), peer(&budget, 2));
        let _held = (p.spool(false).expect("one"), q.spool(false).expect("two"));
        assert_eq!(p.spool(false).err().map(|e| e.code), Some("server_busy"));
    }

    #[test]
    fn spooled_bodies_are_bounded_per_address_and_slow_ones_leave_a_quarter() {
        let budget = Arc::new(Budget::new(1000, 8, 2, 1024, Duration::from_secs(1)).with_max_spooling_per_client(3));
        let a = peer(&budget, 1);
        let mine: Vec<_> = (0..3).map(|_| a.spool(false).expect("within the address's allowance")).collect();
        let refused = a.spool(false).err().expect("a fourth from one address");
        assert!(refused.message.contains("--max-spooling-per-client"), "{}", refused.message);
        assert!(peer(&budget, 2).spool(false).is_ok(), "another address has its own allowance");
        drop(mine);
        assert!(a.spool(false).is_ok(), "a finished body gives its place back");
        // Slow spooled bodies from many addresses hold at most 6 of the 8 slots.
        let budget = Arc::new(Budget::new(1000, 8, 2, 1024, Duration::from_secs(1)));
        let mut slow = Vec::new();
        for last in 10..20 {
            let mut slot = peer(&budget, last).spool(false).ok();
            if let Some(s) = &mut slot
                && s.now_slow().is_ok()
            {
                slow.push(slot);
            }
        }
        assert_eq!(slow.len(), 6, "three quarters of the spool slots may be held slowly");
        let quick: Vec<_> =
            (30..32).map(|last| peer(&budget, last).spool(false).expect("kept for quick bodies")).collect();
        assert_eq!(quick.len(), 2);
        assert_eq!(peer(&budget, 40).spool(true).err().map(|e| e.code), Some("server_busy"));
    }

    #[test]
    fn the_body_deadline_moves_with_the_bytes_received() {
        let budget = Arc::new(Budget::new(100, 2, 2, 1000, Duration::from_secs(5)));
        let p = peer(&budget, 1);
        let start = Instant::now();
        assert_eq!(p.body_deadline(start, 0), start + Duration::from_secs(5));
        assert_eq!(p.body_deadline(start, 3000), start + Duration::from_secs(8));
    }
}
