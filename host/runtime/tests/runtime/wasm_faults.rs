//! Fault handling of the Wasm guard, proved with a deliberately misbehaving
//! component (`tests/plugins/misbehaving`): an infinite loop, a trap and a
//! memory hog each fail the call closed with their own `GuardFailure`, the
//! failed instance is discarded and the next call on the same guard succeeds;
//! concurrent calls stay correct; and a hot swap under load loses no call and
//! no state (the fence lives in the caller, not the plugin).

use fencing_runtime::{
    Admission, CallPath, EngineOptions, Fence, Guard, GuardFailure, NativeGuard, Plugin, Policy, Rejection, Sequencer,
    WasmGuard, WasmLimits, plugin,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "../../../../tests/plugins/misbehaving/for_tests.rs"]
mod misbehaving_plugin;
use misbehaving_plugin::misbehaving;

fn limits() -> WasmLimits {
    WasmLimits { memory_bytes: 8 << 20, deadline: Duration::from_millis(50), ..WasmLimits::default() }
}

/// The misbehaving plugin, called on `path`.
fn guard_on(path: CallPath) -> WasmGuard {
    guard_in(path, EngineOptions::default())
}

/// The misbehaving plugin, called on `path` by an engine built with `options`.
fn guard_in(path: CallPath, options: EngineOptions) -> WasmGuard {
    let engine = WasmGuard::engine_with(&limits(), options).expect("engine");
    let plugin = Plugin::from_file(&engine, misbehaving(), None).expect("load misbehaving plugin");
    let g = WasmGuard::with_path(engine, plugin, limits(), path).expect("guard");
    assert_eq!(g.call_path(), path, "the misbehaving plugin has the direct-call shape");
    g
}

fn guard() -> WasmGuard {
    guard_on(CallPath::Direct)
}

fn seq(lock: &str, token: u64) -> Sequencer {
    Sequencer { lock: lock.into(), token, sequence: None }
}

fn fence(lock: &str, high_water: u64) -> Fence {
    Fence { lock: lock.into(), high_water, sequence: None }
}

/// Normal calls decide correctly.
fn assert_healthy(g: &WasmGuard) {
    let f = fence("orders", 10);
    assert_eq!(
        g.admit(Some(&f), &seq("orders", 11), Policy::NonDecreasing).unwrap(),
        Ok(Admission { high_water: 11, sequence: None, new_term: true })
    );
    assert_eq!(
        g.admit(Some(&f), &seq("orders", 9), Policy::NonDecreasing).unwrap(),
        Err(Rejection::StaleToken { presented: 9, high_water: 10 })
    );
}

/// Runs one misbehaving call on each call path and checks the failure, the
/// discard and recovery.
fn fails_then_recovers(lock: &str, expect: impl Fn(&GuardFailure) -> bool) {
    for path in [CallPath::Direct, CallPath::Component] {
        fails_then_recovers_on(path, lock, &expect);
    }
}

fn fails_then_recovers_on(path: CallPath, lock: &str, expect: &impl Fn(&GuardFailure) -> bool) {
    let g = guard_on(path);
    assert_healthy(&g);
    let before = g.instances_created();
    let failure = g.admit(Some(&fence(lock, 1)), &seq(lock, 2), Policy::NonDecreasing).unwrap_err();
    assert!(expect(&failure), "`{lock}` on {path:?} failed with {failure:?}");
    assert_eq!(g.failures(), 1);
    // The pool held one worker, which failed: the next call must build a new instance.
    assert_healthy(&g);
    assert_eq!(g.instances_created(), before + 1, "the failed instance was reused");
    // Batch calls misbehave the same way and fail closed too.
    let failure = g.admit_batch(None, lock, &[], Policy::NonDecreasing).unwrap_err();
    assert!(expect(&failure), "batch under `{lock}` on {path:?} failed with {failure:?}");
    assert_eq!(g.failures(), 2);
    assert_healthy(&g);
    assert_eq!(g.instances_created(), before + 2);
}

#[test]
fn infinite_loop_times_out() {
    fails_then_recovers("loop", |f| *f == GuardFailure::Timeout);
}

#[test]
fn trap_fails_closed() {
    fails_then_recovers("trap", |f| matches!(f, GuardFailure::Trap(m) if m.contains("unreachable")));
}

#[test]
fn memory_hog_runs_out_of_memory() {
    fails_then_recovers("hog", |f| *f == GuardFailure::OutOfMemory);
}

#[test]
fn an_answer_outside_the_contract_fails_closed() {
    // Token 2 against a fence at 1 cannot be stale: on the direct path the
    // code is impossible for the inputs, on the component path the evidence
    // is not the inputs'. Either way the call fails and its worker is dropped.
    for (path, why) in [(CallPath::Direct, "impossible"), (CallPath::Component, "evidence")] {
        let g = guard_on(path);
        assert_healthy(&g);
        let before = g.instances_created();
        let failure = g.admit(Some(&fence("lie", 1)), &seq("lie", 2), Policy::NonDecreasing).unwrap_err();
        assert!(
            matches!(&failure, GuardFailure::Trap(m) if m.contains("contract") && m.contains(why)),
            "{path:?}: {failure:?}"
        );
        assert_eq!(g.failures(), 1, "{path:?}");
        assert_healthy(&g);
        assert_eq!(g.instances_created(), before + 1, "{path:?}: the lying instance was reused");
        // The same answer where it is the rules' own passes: 3 against 5 is stale.
        let truth = g.admit(Some(&fence("lie", 5)), &seq("lie", 3), Policy::NonDecreasing).unwrap();
        assert_eq!(truth, Err(Rejection::StaleToken { presented: 3, high_water: 5 }), "{path:?}");
        assert_eq!(g.failures(), 1, "{path:?}");
    }
}

#[test]
fn failure_reasons_are_distinct() {
    let g = guard();
    let reasons: Vec<&str> = ["loop", "trap", "hog"]
        .iter()
        .map(|l| g.admit(None, &seq(l, 1), Policy::NonDecreasing).unwrap_err().reason())
        .collect();
    assert_eq!(reasons, ["guard_timeout", "guard_trap", "guard_out_of_memory"]);
    assert_eq!(g.failures(), 3);
    assert_healthy(&g);
}

/// Without signal handlers (a host inside a database backend), bounds are
/// checked explicitly: the same faults fail the same way and the guard recovers.
#[test]
fn shared_process_engine_fails_closed_too() {
    for path in [CallPath::Direct, CallPath::Component] {
        let g = guard_in(path, EngineOptions::shared_process());
        assert_healthy(&g);
        let reasons: Vec<&str> = ["loop", "trap", "hog"]
            .iter()
            .map(|l| g.admit(None, &seq(l, 1), Policy::NonDecreasing).unwrap_err().reason())
            .collect();
        assert_eq!(reasons, ["guard_timeout", "guard_trap", "guard_out_of_memory"], "{path:?}");
        assert_healthy(&g);
    }
}

/// The epoch ticker blocks every signal, so a host's handlers (a database
/// backend's SIGINT, SIGTERM, SIGUSR1 ...) always run on the host's threads.
#[cfg(target_os = "linux")]
#[test]
fn ticker_thread_blocks_every_signal() {
    let blocked = |status: &str| -> u64 {
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).expect("SigBlk line");
        u64::from_str_radix(mask.trim(), 16).unwrap()
    };
    let _g = guard_in(CallPath::Direct, EngineOptions::shared_process());
    // A new thread runs with every signal blocked until its start routine
    // restores the inherited mask, and names itself then: wait for the name.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let ticker = loop {
        let found = std::fs::read_dir("/proc/self/task").unwrap().find_map(|t| {
            let status = std::fs::read_to_string(t.ok()?.path().join("status")).ok()?;
            status.lines().any(|l| l == "Name:\tguard-epoch").then_some(status)
        });
        match found {
            Some(status) => break status,
            None if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            None => panic!("no running guard-epoch thread"),
        }
    };
    // Every standard signal but SIGKILL and SIGSTOP (which cannot be blocked).
    let standard = ((1u64 << 31) - 1) & !((1 << (9 - 1)) | (1 << (19 - 1)));
    assert_eq!(blocked(&ticker) & standard, standard, "the ticker thread takes signals");
    // The caller's own mask is restored after the spawn.
    let own = blocked(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
    assert_eq!(own & standard, 0, "signals left blocked on the caller");
}

#[test]
fn concurrent_calls_stay_correct_among_failures() {
    let g = Arc::new(guard());
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut checked = 0u64;
                for i in 0..400u64 {
                    if t == 0 && i % 50 == 0 {
                        // One thread keeps killing its instance.
                        let f = g.admit(None, &seq("trap", 1), Policy::NonDecreasing).unwrap_err();
                        assert!(matches!(f, GuardFailure::Trap(_)));
                        continue;
                    }
                    let lock = format!("lock-{}", (t + i) % 5);
                    let bound = if i % 7 == 0 { "other".to_owned() } else { lock.clone() };
                    let stored = Fence { lock: bound, high_water: 100 + i % 13, sequence: Some(i % 3) };
                    let policy = if i % 2 == 0 { Policy::NonDecreasing } else { Policy::StrictlyIncreasing };
                    let sequence = if i % 5 == 0 { None } else { Some(i % 4) };
                    let s = Sequencer { lock, token: 95 + i % 23, sequence };
                    let wasm = g.admit(Some(&stored), &s, policy).expect("normal call must not fail");
                    let native = NativeGuard.admit(Some(&stored), &s, policy).unwrap();
                    assert_eq!(wasm, native, "{stored:?} {s:?} {policy:?}");
                    checked += 1;
                }
                checked
            })
        })
        .collect();
    let checked: u64 = threads.into_iter().map(|t| t.join().expect("caller thread panicked")).sum();
    assert_eq!(checked, 5 * 400 + 392);
    assert_eq!(g.failures(), 8);
}

#[test]
fn hot_swap_under_load_loses_no_call_and_no_state() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = dir.path().join("embedded.wasm");
    std::fs::write(&embedded, plugin::EMBEDDED).unwrap();
    // A generous deadline: this test is about swaps, and a loaded machine may
    // preempt a caller mid-call while a swap compiles.
    let limits = WasmLimits { deadline: Duration::from_secs(5), ..WasmLimits::default() };
    let g = Arc::new(WasmGuard::from_file_with(&embedded, None, limits).unwrap());
    let first = g.info().sha256;
    // The state: one fence held by the test, advanced only through admissions.
    let stored = Arc::new(Mutex::new(fence("orders", 1)));
    let stop = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicU64::new(0));
    let callers: Vec<_> = (0..3)
        .map(|_| {
            let (g, stored, stop, calls) = (g.clone(), stored.clone(), stop.clone(), calls.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut f = stored.lock().unwrap();
                    let hw = f.high_water;
                    // An advancing write, then a replay of the previous token.
                    let admitted = g.admit(Some(&f), &seq("orders", hw + 1), Policy::StrictlyIncreasing);
                    let a = admitted.expect("no call may fail during a swap").expect("advancing token admitted");
                    f.high_water = a.high_water;
                    let replay = g.admit(Some(&f), &seq("orders", hw), Policy::StrictlyIncreasing).unwrap();
                    assert_eq!(replay, Err(Rejection::StaleToken { presented: hw, high_water: hw + 1 }));
                    calls.fetch_add(2, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut swapped_in = Vec::new();
    for i in 0..10 {
        std::thread::sleep(Duration::from_millis(20));
        let next = if i % 2 == 0 { misbehaving() } else { embedded.as_path() };
        swapped_in.push(g.swap_file(next, None).expect("swap").sha256);
        assert_eq!(g.info().sha256, *swapped_in.last().unwrap());
    }
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    for c in callers {
        c.join().expect("caller thread panicked");
    }
    assert_ne!(swapped_in[0], first, "the swap switched to the other plugin");
    assert_eq!(g.failures(), 0);
    assert_eq!(g.info().sha256, first, "ten swaps end on the first plugin");
    let hw = stored.lock().unwrap().high_water;
    assert_eq!(hw, 1 + calls.load(Ordering::Relaxed) / 2, "every admitted token advanced the fence once");
    assert!(hw > 10, "callers made progress across the swaps");
    // The state survived every swap: the fence still refuses its own last token.
    let f = stored.lock().unwrap().clone();
    assert_eq!(
        g.admit(Some(&f), &seq("orders", hw), Policy::StrictlyIncreasing).unwrap(),
        Err(Rejection::TokenReused { presented: hw, high_water: hw })
    );
}
