//! Random cases in the shared vector format, with the native rules' verdicts
//! as their expectations (`fencing check --random N --out FILE`).
//!
//! The Python and Node packages run such a file exactly like the hand-written
//! vectors, so every verdict they give is compared with the Rust rules, not
//! with a second implementation of them.
//!
//! The draw is biased toward the cases where hosts go wrong: numbers at the
//! edges of every integer type a host may use (2^31, 2^32, 2^53 for
//! JavaScript numbers, 2^63 for SQL bigints, 2^64-1), tokens and sequences
//! near the fence instead of anywhere, and lock names that differ only in
//! case, Unicode normalization or a NUL byte (names compare as bytes).

use super::{BatchSpec, Case, VerdictSpec};
use fencing_runtime::{BatchWrite, Fence, Guard, NativeGuard, Policy, Sequencer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Values at the edges of the integer types hosts use.
const EDGES: [u64; 14] = [
    0,
    1,
    2,
    (1 << 31) - 1,
    1 << 31,
    (1 << 32) - 1,
    1 << 32,
    (1 << 53) - 1,
    1 << 53,
    (1 << 53) + 1,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX - 1,
    u64::MAX,
];

/// Lock names that a host could wrongly treat as equal or mangle.
const LOCKS: [&str; 8] = [
    "locks/orders",
    "locks/Orders",
    "locks/invoices",
    "",
    "caf\u{e9}",
    "cafe\u{301}",
    "locks/with\u{0}nul",
    "\u{1F512}/emoji",
];

struct Draw(StdRng);

impl Draw {
    fn number(&mut self) -> u64 {
        match self.0.random_range(0..8) {
            0..=2 => self.0.random_range(0..8),
            3..=5 => EDGES[self.0.random_range(0..EDGES.len())],
            _ => self.0.random(),
        }
    }

    /// Equal to `base`, within two of it, or any number.
    fn near(&mut self, base: u64) -> u64 {
        match self.0.random_range(0..7) {
            0..=2 => base,
            3 | 4 => base.wrapping_add_signed(self.0.random_range(-2..=2)),
            _ => self.number(),
        }
    }

    fn lock(&mut self) -> String {
        LOCKS[self.0.random_range(0..LOCKS.len())].to_string()
    }

    fn policy(&mut self) -> Policy {
        if self.0.random() { Policy::NonDecreasing } else { Policy::StrictlyIncreasing }
    }

    fn fence(&mut self) -> Option<Fence> {
        (self.0.random_range(0..6) != 0).then(|| Fence {
            lock: self.lock(),
            high_water: self.number(),
            sequence: self.0.random_bool(0.5).then(|| self.number()),
        })
    }

    /// The fence's lock most of the time, another name sometimes.
    fn lock_for(&mut self, fence: Option<&Fence>) -> String {
        match fence {
            Some(f) if self.0.random_range(0..4) != 0 => f.lock.clone(),
            _ => self.lock(),
        }
    }

    fn case(&mut self, index: usize, guard: &NativeGuard) -> Case {
        let policy = self.policy();
        let fence = self.fence();
        let (hw, last) = fence.as_ref().map_or((1, 0), |f| (f.high_water, f.sequence.unwrap_or(0)));
        match self.0.random_range(0..10) {
            0..=5 => {
                let sequencer = Sequencer {
                    lock: self.lock_for(fence.as_ref()),
                    token: self.near(hw),
                    sequence: self.0.random_bool(0.6).then(|| self.near(last)),
                };
                let expect = VerdictSpec(guard.admit(fence.as_ref(), &sequencer, policy).expect("native rules decide"));
                Case::Admit { name: format!("random-{index}"), policy, fence, sequencer, expect }
            }
            6..=7 => {
                let lock = self.lock_for(fence.as_ref());
                let n = self.0.random_range(0..12);
                let writes: Vec<BatchWrite> = (0..n)
                    .map(|_| BatchWrite {
                        token: self.near(hw),
                        sequence: self.0.random_bool(0.6).then(|| self.0.random_range(0..6)),
                    })
                    .collect();
                let outcome = guard.admit_batch(fence.as_ref(), &lock, &writes, policy).expect("native rules decide");
                let expect = BatchSpec {
                    verdicts: outcome.verdicts.into_iter().map(VerdictSpec).collect(),
                    fence: outcome.fence,
                };
                Case::Batch { name: format!("random-{index}"), policy, fence, lock, writes, expect }
            }
            _ => {
                let high_water = if self.0.random_range(0..5) == 0 { 0 } else { hw };
                let n = self.0.random_range(0..12);
                let tokens: Vec<u64> = (0..n).map(|_| self.near(high_water)).collect();
                let expect = guard.admit_stream(high_water, &tokens, policy).expect("native rules decide");
                Case::Stream { name: format!("random-{index}"), policy, high_water, tokens, expect }
            }
        }
    }
}

/// `count` random cases drawn from `seed` (the same seed gives the same
/// cases), each expecting the native rules' verdict, as a vector file.
pub fn file_json(count: usize, seed: u64) -> serde_json::Value {
    let mut draw = Draw(StdRng::seed_from_u64(seed));
    let cases: Vec<Case> = (0..count).map(|i| draw.case(i, &NativeGuard)).collect();
    serde_json::json!({
        "description": format!("{count} random cases (seed {seed}); expectations are the native rules' verdicts"),
        "cases": cases,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::parse_file;
    use std::path::Path;

    #[test]
    fn a_random_file_parses_back_and_its_expectations_are_the_native_verdicts() {
        let text = serde_json::to_string(&file_json(2000, 7)).unwrap();
        let file = parse_file(Path::new("random.json"), &text).unwrap();
        assert_eq!(file.cases.len(), 2000);
        for case in &file.cases {
            assert_eq!(case.run(&NativeGuard).unwrap(), case.expected(), "{}", case.name());
        }
        let kinds = |k: &str| file.cases.iter().filter(|c| c.kind() == k).count();
        assert!(kinds("admit") > 0 && kinds("batch") > 0 && kinds("stream") > 0);
        let admitted =
            file.cases.iter().filter(|c| matches!(c, Case::Admit { expect, .. } if expect.admitted().is_some()));
        assert!(admitted.count() > 100, "the draw admits often enough to exercise fences being raised");
    }

    #[test]
    fn the_same_seed_gives_the_same_cases() {
        assert_eq!(file_json(300, 3), file_json(300, 3));
        assert_ne!(file_json(300, 3), file_json(300, 4));
    }
}
