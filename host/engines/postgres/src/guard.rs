//! The backend's guard.
//!
//! A backend builds its guard the first time a write needs a decision, never
//! in `_PG_init`: the postmaster may load the library before forking, and a
//! Wasm engine (its ticker thread, its code memory) must not be forked. The
//! guard is kept for the life of the backend and rebuilt when
//! `fencing.plugin_path` or `fencing.cache_dir` changes; a plugin that cannot
//! be loaded is remembered as such, so every decision under that setting
//! fails closed quickly instead of recompiling.
//!
//! Engine choices for a process that belongs to PostgreSQL
//! ([`accept::host_guard`]): wasmtime installs no signal handler
//! (linear memory is bounds-checked in code, so a fault in the backend stays
//! PostgreSQL's to handle), compiles on the calling thread, and reserves
//! only the memory limit per instance. The one thread a guard starts is its
//! epoch ticker, which blocks every signal and never calls into PostgreSQL.

use crate::{args, settings};
use fencing_runtime::{Admission, Fence, Guard, Policy, Sequencer, Verifier, WasmGuard, accept, key_text};
use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;

/// What a guard was built from.
#[derive(Clone, PartialEq, Eq)]
struct Source {
    plugin_path: Option<String>,
    cache_dir: Option<String>,
}

struct Built {
    source: Source,
    /// The guard, or why it could not be built.
    guard: Result<WasmGuard, String>,
}

thread_local! {
    /// PostgreSQL runs a backend's SQL on one thread; this is that thread's guard.
    static GUARD: RefCell<Option<Built>> = const { RefCell::new(None) };
    /// Component calls made by this backend, and the nanoseconds spent in them.
    static STATS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The verifier built from `fencing.verify_keys`, and the text it was built from.
    static VERIFIER: RefCell<Option<(String, Rc<Verifier>)>> = const { RefCell::new(None) };
}

/// The component's decision, or why there is none (`reason: message`, with
/// the reasons of `GuardFailure::reason` and `guard_unavailable`). A refusal
/// is its reason's name: a rule's, or while `fencing.verify_keys` is set a
/// proof's (`proof_missing`, `proof_malformed`, `proof_unknown_key`,
/// `proof_bad`), checked against `fencing.proof` before the fence.
pub fn decide(
    current: Option<&Fence>,
    presented: &Sequencer,
    policy: Policy,
) -> Result<Result<Admission, &'static str>, String> {
    let verifier = verifier()?;
    // The proof is read only where it is checked.
    let proof = match verifier {
        Some(_) => args::setting_proof(settings::get(&settings::PROOF)),
        None => Vec::new(),
    };
    let decided = with_guard(|g| {
        let started = std::time::Instant::now();
        let decided = g
            .admit_with_keys(verifier.as_deref(), current, presented, &proof, policy)
            .map(|d| d.map_err(|refused| refused.reason()));
        let nanos = started.elapsed().as_nanos() as u64;
        STATS.with(|s| s.set((s.get().0 + 1, s.get().1 + nanos)));
        decided
    });
    match decided {
        Err(unavailable) => Err(format!("guard_unavailable: {unavailable}")),
        Ok(Err(failure)) => Err(format!("{}: {failure}", failure.reason())),
        Ok(Ok(decision)) => Ok(decision),
    }
}

/// The verifier of `fencing.verify_keys` (`None` when unset), built once per
/// value of the setting; keys that cannot be read are a guard failure.
fn verifier() -> Result<Option<Rc<Verifier>>, String> {
    let Some(text) = settings::get(&settings::VERIFY_KEYS) else { return Ok(None) };
    VERIFIER.with(|slot| {
        let mut slot = slot.borrow_mut();
        if let Some((built_from, verifier)) = slot.as_ref()
            && *built_from == text
        {
            return Ok(Some(verifier.clone()));
        }
        let keys = key_text::parse_verifier_keys(&text)
            .map_err(|(line, e)| format!("verify_keys: fencing.verify_keys line {line}: {e}"))?;
        let verifier = Rc::new(Verifier::new(keys).map_err(|e| format!("verify_keys: fencing.verify_keys: {e}"))?);
        *slot = Some((text, verifier.clone()));
        Ok(Some(verifier))
    })
}

/// This backend's component calls and the nanoseconds spent inside them.
pub fn stats() -> (u64, u64) {
    STATS.with(Cell::get)
}

/// Runs `f` with the backend's guard for the current settings, or returns
/// why there is none.
pub fn with_guard<R>(f: impl FnOnce(&WasmGuard) -> R) -> Result<R, String> {
    let source =
        Source { plugin_path: settings::get(&settings::PLUGIN_PATH), cache_dir: settings::get(&settings::CACHE_DIR) };
    GUARD.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_none_or(|b| b.source != source) {
            // Drop the old guard (and stop its ticker) before building the new one.
            *slot = None;
            *slot = Some(Built { guard: build(&source), source });
        }
        match &slot.as_ref().expect("built above").guard {
            Ok(guard) => Ok(f(guard)),
            Err(why) => Err(why.clone()),
        }
    })
}

fn build(source: &Source) -> Result<WasmGuard, String> {
    let cache = source.cache_dir.as_deref().map(Path::new);
    accept::host_guard(source.plugin_path.as_deref().map(Path::new), cache).map_err(|e| e.to_string())
}
