//! A chore of the syncer that keeps failing (a sync on a failing disk, a
//! rewrite on a full one), reported without flooding the log: the first
//! failure is logged, then at most one line per [`REPORT_EVERY`] saying how
//! many failed since the last, and the success that ends the run is logged
//! too. The syncer retries a sync within `IDLE_SYNC` (2 ms), so an unbounded
//! log would write hundreds of lines a second for as long as the disk fails.

use std::time::{Duration, Instant};

/// At most one log line per this long while a chore keeps failing.
pub(super) const REPORT_EVERY: Duration = Duration::from_secs(10);

/// The failures of one chore since its last success.
#[derive(Debug, Default)]
pub(super) struct Failures {
    /// Failures since the last success.
    run: u64,
    /// Failures since the last one logged.
    unlogged: u64,
    last_logged: Option<Instant>,
    last_failed: Option<Instant>,
}

impl Failures {
    /// Counts a failure at `now`. `Some(n)`: log it now, saying that `n`
    /// failures before it went unlogged; `None`: stay quiet.
    pub(super) fn failed(&mut self, now: Instant) -> Option<u64> {
        self.run += 1;
        self.last_failed = Some(now);
        let due = self.last_logged.is_none_or(|at| now.duration_since(at) >= REPORT_EVERY);
        if due {
            self.last_logged = Some(now);
            Some(std::mem::take(&mut self.unlogged))
        } else {
            self.unlogged += 1;
            None
        }
    }

    /// Counts a success: `Some(n)` if it ends a run of `n` failures (log
    /// the recovery), `None` if nothing was failing.
    pub(super) fn succeeded(&mut self) -> Option<u64> {
        let run = self.run;
        *self = Failures::default();
        (run > 0).then_some(run)
    }

    /// Whether a chore that may wait should be tried at `now`: always while
    /// it succeeds, and no sooner than `backoff` after its last failure.
    pub(super) fn due(&self, now: Instant, backoff: Duration) -> bool {
        self.last_failed.is_none_or(|at| now.duration_since(at) >= backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_logs_its_first_then_one_line_per_period_and_its_end() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        assert_eq!(f.succeeded(), None, "nothing was failing");
        assert_eq!(f.failed(t0), Some(0), "the first failure is logged");
        // A retry every 2 ms for just under a period: all quiet.
        let mut quiet = 0;
        let mut at = t0;
        while at + Duration::from_millis(2) < t0 + REPORT_EVERY {
            at += Duration::from_millis(2);
            if f.failed(at).is_none() {
                quiet += 1;
            }
        }
        assert_eq!(quiet, 4_999);
        // The first failure a period after the last line reports the quiet ones.
        assert_eq!(f.failed(t0 + REPORT_EVERY), Some(4_999));
        assert_eq!(f.failed(t0 + REPORT_EVERY + Duration::from_millis(2)), None);
        assert_eq!(f.succeeded(), Some(5_002), "the recovery names the whole run");
        // A new run starts afresh: its first failure is logged at once.
        assert_eq!(f.failed(t0 + REPORT_EVERY + Duration::from_millis(4)), Some(0));
    }

    #[test]
    fn a_failed_chore_waits_out_its_backoff() {
        let mut f = Failures::default();
        let t0 = Instant::now();
        let backoff = Duration::from_secs(1);
        assert!(f.due(t0, backoff), "never failed");
        f.failed(t0);
        assert!(!f.due(t0 + backoff / 2, backoff));
        assert!(f.due(t0 + backoff, backoff));
        f.succeeded();
        assert!(f.due(t0, backoff), "a success ends the backoff");
    }
}
