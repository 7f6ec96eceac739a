//! Every shared vector (`tests/vectors/*.json`) through the native guard and
//! through the embedded component; the vectors' coverage of the rules; the
//! loader's errors; and the exit codes of `fencing check`.

use fencing_cli::vectors::{self, Case, VectorError, VerdictSpec};
use fencing_runtime::{CallPath, Guard, NativeGuard, Verdict, WasmGuard};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn vector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/vectors")
}

fn all_cases() -> Vec<Case> {
    let files = vectors::load_dir(&vector_dir()).expect("vectors load");
    files.into_iter().flat_map(|f| f.cases).collect()
}

/// Runs every case through `guard`; returns the names of those that differ from the expectation.
fn failures(guard: &dyn Guard) -> Vec<String> {
    all_cases()
        .iter()
        .filter_map(|case| match case.run(guard) {
            Ok(outcome) if outcome == case.expected() => None,
            Ok(outcome) => Some(format!("{}: got {outcome:?}, expected {:?}", case.name(), case.expected())),
            Err(failure) => Some(format!("{}: guard failed: {failure}", case.name())),
        })
        .collect()
}

#[test]
fn every_vector_passes_natively() {
    let failed = failures(&NativeGuard);
    assert!(failed.is_empty(), "native failures:\n{}", failed.join("\n"));
}

#[test]
fn every_vector_passes_through_the_component_on_both_paths() {
    let guard = WasmGuard::embedded(None).expect("embedded guard");
    assert_eq!(guard.call_path(), CallPath::Direct);
    let failed = failures(&guard);
    assert!(failed.is_empty(), "wasm (direct path) failures:\n{}", failed.join("\n"));

    let guard = WasmGuard::embedded_on(None, CallPath::Component).expect("component-path guard");
    assert_eq!(guard.call_path(), CallPath::Component);
    let failed = failures(&guard);
    assert!(failed.is_empty(), "wasm (component path) failures:\n{}", failed.join("\n"));
}

const MAX: u64 = u64::MAX;

/// The vectors must exercise every rule, kind, policy and boundary, so that a
/// host passing them has been tested on each.
#[test]
fn vectors_cover_every_rule_and_boundary() {
    let cases = all_cases();
    assert!(cases.len() >= 60, "only {} cases", cases.len());

    let mut kinds = BTreeSet::new();
    let mut policies = BTreeSet::new();
    let mut verdicts = BTreeSet::new();
    let mut stream_verdicts = BTreeSet::new();
    let mut numbers = BTreeSet::new();
    let mut first_writes = [false; 2]; // [unsequenced, sequenced] with no fence
    let mut new_term = [false; 2]; // admitted with new_term [false, true]
    for case in &cases {
        kinds.insert(case.kind());
        let mut note_verdict = |v: &VerdictSpec| {
            verdicts.insert(v.name());
            if let Some(a) = v.admitted() {
                new_term[a.new_term as usize] = true;
                numbers.insert(a.high_water);
            }
        };
        match case {
            Case::Admit { policy, fence, sequencer, expect, .. } => {
                policies.insert(format!("{policy:?}"));
                note_verdict(expect);
                numbers.insert(sequencer.token);
                if fence.is_none() && expect.admitted().is_some() {
                    first_writes[sequencer.sequence.is_some() as usize] = true;
                }
            }
            Case::Batch { policy, expect, writes, .. } => {
                policies.insert(format!("{policy:?}"));
                expect.verdicts.iter().for_each(&mut note_verdict);
                numbers.extend(writes.iter().map(|w| w.token));
            }
            Case::Stream { policy, expect, tokens, .. } => {
                policies.insert(format!("{policy:?}"));
                stream_verdicts.extend(expect.verdicts.iter().copied());
                numbers.extend(tokens.iter().copied());
            }
        }
    }
    assert_eq!(kinds, BTreeSet::from(["admit", "batch", "stream"]));
    assert_eq!(policies.len(), 2, "{policies:?}");
    for v in ["admitted", "invalid_token", "wrong_lock", "stale_token", "token_reused", "sequence_regressed"] {
        assert!(verdicts.contains(v), "no case expects {v}: {verdicts:?}");
    }
    for v in [Verdict::Admitted, Verdict::InvalidToken, Verdict::StaleToken, Verdict::TokenReused] {
        assert!(stream_verdicts.contains(&v), "no stream case expects {v:?}");
    }
    assert_eq!(first_writes, [true, true], "first writes with and without a sequence");
    assert_eq!(new_term, [true, true], "admissions with new_term false and true");
    for n in [0, 1, MAX - 1, MAX, 1 << 53, (1 << 53) + 1, 1 << 63, 1 << 32] {
        assert!(numbers.contains(&n), "no token {n} in the vectors");
    }
}

#[test]
fn loader_names_the_file_and_case_of_a_bad_value() {
    let text = r#"{"cases": [
        {"name": "ok", "kind": "stream", "policy": "non_decreasing", "high_water": 0, "tokens": [],
         "expect": {"verdicts": [], "high_water": 0}},
        {"name": "too-big", "kind": "stream", "policy": "non_decreasing", "high_water": 18446744073709551616,
         "tokens": [], "expect": {"verdicts": [], "high_water": 0}}]}"#;
    let err = vectors::parse_file(Path::new("dir/big.json"), text).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, VectorError::Case { index: 1, .. }), "{err:?}");
    assert!(msg.contains("dir/big.json") && msg.contains("too-big"), "{msg}");
}

#[test]
fn loader_rejects_unknown_fields_and_verdicts() {
    let unknown_field = r#"{"cases": [{"name": "typo", "kind": "admit", "policy": "non_decreasing", "fence": null,
        "sequencer": {"lock": "l", "token": 1, "sequense": 2},
        "expect": {"verdict": "admitted", "high_water": 1, "new_term": true}}]}"#;
    let msg = vectors::parse_file(Path::new("t.json"), unknown_field).unwrap_err().to_string();
    assert!(msg.contains("typo") && msg.contains("sequense"), "{msg}");

    let unknown_verdict = r#"{"cases": [{"name": "v", "kind": "admit", "policy": "non_decreasing", "fence": null,
        "sequencer": {"lock": "l", "token": 1}, "expect": {"verdict": "accepted"}}]}"#;
    let msg = vectors::parse_file(Path::new("t.json"), unknown_verdict).unwrap_err().to_string();
    assert!(msg.contains("accepted"), "{msg}");

    let not_json = vectors::parse_file(Path::new("broken.json"), "{\"cases\": [").unwrap_err();
    assert!(matches!(not_json, VectorError::File { .. }) && not_json.to_string().contains("broken.json"));
}

#[test]
fn loader_rejects_duplicate_names_and_empty_dirs() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(vectors::load_dir(dir.path()), Err(VectorError::Empty { .. })));
    let case = r#"{"cases": [{"name": "same", "kind": "stream", "policy": "strictly_increasing", "high_water": 1,
        "tokens": [2], "expect": {"verdicts": ["admitted"], "high_water": 2}}]}"#;
    std::fs::write(dir.path().join("a.json"), case).unwrap();
    assert_eq!(vectors::load_dir(dir.path()).unwrap().len(), 1);
    std::fs::write(dir.path().join("b.json"), case).unwrap();
    let err = vectors::load_dir(dir.path()).unwrap_err();
    assert!(matches!(err, VectorError::Duplicate { .. }), "{err:?}");
    assert!(err.to_string().contains("a.json") && err.to_string().contains("b.json"), "{err}");
}

fn fencing_check(dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fencing"))
        .args(["check", "--vectors"])
        .arg(dir)
        .env("FENCING_LOG", "warn")
        .output()
        .expect("run fencing");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn cli_check_reports_full_agreement() {
    let n = all_cases().len();
    let (code, stdout) = fencing_check(&vector_dir());
    assert_eq!(code, 0, "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(last, format!("check: {n} cases, native {n}/{n}, wasm {n}/{n}, agreement {n}/{n}"));
}

#[test]
fn cli_check_fails_on_a_wrong_expectation_and_exits_2_on_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let wrong = r#"{"cases": [{"name": "expects-reuse-under-default-policy", "kind": "admit",
        "policy": "non_decreasing", "fence": {"lock": "l", "high_water": 5}, "sequencer": {"lock": "l", "token": 5},
        "expect": {"verdict": "token_reused", "presented": 5, "high_water": 5}}]}"#;
    std::fs::write(dir.path().join("wrong.json"), wrong).unwrap();
    let (code, stdout) = fencing_check(dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("FAIL expects-reuse-under-default-policy"), "{stdout}");
    assert!(stdout.ends_with("check: 1 cases, native 0/1, wasm 0/1, agreement 1/1\n"), "{stdout}");

    std::fs::write(dir.path().join("wrong.json"), "[1, 2").unwrap();
    assert_eq!(fencing_check(dir.path()).0, 2);
    assert_eq!(fencing_check(&dir.path().join("missing")).0, 2);
}
