//! Differential target: arbitrary (fence, sequencer, policy), and batches and
//! token streams, decided by the native rules and by the `fencing:guard`
//! component under wasmtime (`WasmGuard`). The verdicts must be identical, and
//! the component must never fail (trap, time out) on any input.

#![no_main]

use arbitrary::Arbitrary;
use fencing_rules::{BatchWrite, Fence, Policy, Sequencer};
use fencing_runtime::{Guard, NativeGuard, WasmGuard};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// Lock names: mostly a few shared ones (so locks match), sometimes arbitrary.
#[derive(Arbitrary, Debug)]
enum Lock {
    A,
    B,
    Empty,
    Other(String),
}

impl Lock {
    fn name(&self) -> String {
        match self {
            Lock::A => "storage:a".into(),
            Lock::B => "storage:b".into(),
            Lock::Empty => String::new(),
            Lock::Other(s) => s.clone(),
        }
    }
}

/// A token: arbitrary, or near the fence's high-water so equal/adjacent cases are common.
#[derive(Arbitrary, Debug)]
enum Token {
    Raw(u64),
    Near(i8),
}

impl Token {
    fn value(&self, high_water: u64) -> u64 {
        match self {
            Token::Raw(t) => *t,
            Token::Near(d) => high_water.wrapping_add(*d as i64 as u64),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Input {
    One { fence: Option<(Lock, u64, Option<u64>)>, lock: Lock, token: Token, sequence: Option<u64>, strict: bool },
    Batch { fence: Option<(Lock, u64, Option<u64>)>, lock: Lock, writes: Vec<(Token, Option<u64>)>, strict: bool },
    Stream { high_water: u64, tokens: Vec<Token>, strict: bool },
}

fn policy(strict: bool) -> Policy {
    if strict { Policy::StrictlyIncreasing } else { Policy::NonDecreasing }
}

fn fence(f: &Option<(Lock, u64, Option<u64>)>) -> Option<Fence> {
    f.as_ref().map(|(lock, high_water, sequence)| Fence {
        lock: lock.name(),
        high_water: *high_water,
        sequence: *sequence,
    })
}

fn wasm() -> &'static WasmGuard {
    static GUARD: OnceLock<WasmGuard> = OnceLock::new();
    GUARD.get_or_init(|| WasmGuard::embedded(None).expect("embedded component loads"))
}

fuzz_target!(|input: Input| {
    let native = NativeGuard;
    match input {
        Input::One { fence: f, lock, token, sequence, strict } => {
            let current = fence(&f);
            let hw = current.as_ref().map_or(0, |c| c.high_water);
            let presented = Sequencer { lock: lock.name(), token: token.value(hw), sequence };
            let n = native.admit(current.as_ref(), &presented, policy(strict));
            let w = wasm().admit(current.as_ref(), &presented, policy(strict));
            assert_eq!(n, w, "admit({current:?}, {presented:?}, strict={strict})");
        }
        Input::Batch { fence: f, lock, writes, strict } => {
            let current = fence(&f);
            let hw = current.as_ref().map_or(0, |c| c.high_water);
            let writes: Vec<BatchWrite> =
                writes.iter().map(|(t, s)| BatchWrite { token: t.value(hw), sequence: *s }).collect();
            let n = native.admit_batch(current.as_ref(), &lock.name(), &writes, policy(strict));
            let w = wasm().admit_batch(current.as_ref(), &lock.name(), &writes, policy(strict));
            assert_eq!(n, w, "admit_batch({current:?}, {writes:?}, strict={strict})");
        }
        Input::Stream { high_water, tokens, strict } => {
            let tokens: Vec<u64> = tokens.iter().map(|t| t.value(high_water)).collect();
            let n = native.admit_stream(high_water, &tokens, policy(strict));
            let w = wasm().admit_stream(high_water, &tokens, policy(strict));
            assert_eq!(n, w, "admit_stream({high_water}, {tokens:?}, strict={strict})");
        }
    }
});
