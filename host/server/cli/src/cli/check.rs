//! `fencing check --vectors DIR [--plugin FILE]`: runs every shared vector
//! through the native guard and the Wasm guard and reports, per file and in
//! total, how many cases each got right and how many the two agree on.
//!
//! `fencing check --random N --out FILE [--seed S]` instead writes N random
//! cases in the vector format, expecting the native rules' verdicts, for the
//! hosts in other languages to run (`vectors/random.rs`).
//!
//! Exit codes: 0 when both guards match every expectation; 1 when any case
//! fails or the guards disagree; 2 when the vectors or the plugin cannot be
//! read or are invalid.

use crate::vectors::{self, Case, Outcome};
use anyhow::Context;
use clap::Args;
use fencing_runtime::{Guard, GuardFailure, NativeGuard, WasmGuard};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Directory of `*.json` vector files.
    #[arg(long, default_value = "tests/vectors")]
    vectors: PathBuf,
    /// Run this component file instead of the embedded guard.
    #[arg(long)]
    plugin: Option<PathBuf>,
    /// Write this many random cases, expecting the native rules' verdicts, to
    /// `--out` instead of checking (1 to 10,000,000).
    #[arg(long, requires = "out", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    random: Option<u64>,
    /// Where `--random` writes its vector file.
    #[arg(long, requires = "random")]
    out: Option<PathBuf>,
    /// Seed of `--random` (the same seed writes the same cases).
    #[arg(long, default_value_t = 1, requires = "random")]
    seed: u64,
}

/// Totals over a set of cases.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    cases: usize,
    native: usize,
    wasm: usize,
    agree: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.cases += other.cases;
        self.native += other.native;
        self.wasm += other.wasm;
        self.agree += other.agree;
    }

    fn all_pass(&self) -> bool {
        self.native == self.cases && self.wasm == self.cases && self.agree == self.cases
    }

    fn line(&self) -> String {
        let n = self.cases;
        format!("{n} cases, native {}/{n}, wasm {}/{n}, agreement {}/{n}", self.native, self.wasm, self.agree)
    }
}

pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    if let (Some(count), Some(out)) = (args.random, &args.out) {
        let json = vectors::random::file_json(count as usize, args.seed);
        let text = serde_json::to_string_pretty(&json).context("encode the random cases")?;
        std::fs::write(out, text + "\n").with_context(|| format!("write {}", out.display()))?;
        println!("check: wrote {count} random cases (seed {}) to {}", args.seed, out.display());
        return Ok(ExitCode::SUCCESS);
    }
    let files = vectors::load_dir(&args.vectors).map_err(|e| super::usage(format!("invalid vectors: {e}")))?;
    let wasm = match &args.plugin {
        Some(path) => WasmGuard::from_file(path, None)
            .map_err(|e| super::usage(format!("cannot load plugin {}: {e}", path.display())))?,
        None => WasmGuard::embedded(None).context("load the embedded guard")?,
    };
    let native = NativeGuard;
    let mut total = Tally::default();
    for file in &files {
        let mut tally = Tally::default();
        let mut problems = Vec::new();
        for case in &file.cases {
            let (t, problem) = check_case(case, &native, &wasm);
            tally.add(t);
            problems.extend(problem);
        }
        let name =
            file.path.file_name().map_or_else(|| file.path.display().to_string(), |n| n.to_string_lossy().into());
        println!("{name}: {}", tally.line());
        for p in problems {
            println!("  {p}");
        }
        total.add(tally);
    }
    println!("check: {}", total.line());
    Ok(if total.all_pass() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Runs one case through both guards; returns its tally and, when anything is
/// off, a description naming the case, the expectation and both answers.
fn check_case(case: &Case, native: &dyn Guard, wasm: &dyn Guard) -> (Tally, Option<String>) {
    let expected = case.expected();
    let from_native = case.run(native);
    let from_wasm = case.run(wasm);
    let ok = |r: &Result<Outcome, GuardFailure>| r.as_ref().is_ok_and(|o| *o == expected);
    let agree = matches!((&from_native, &from_wasm), (Ok(a), Ok(b)) if a == b);
    let tally =
        Tally { cases: 1, native: ok(&from_native) as usize, wasm: ok(&from_wasm) as usize, agree: agree as usize };
    if ok(&from_native) && ok(&from_wasm) {
        return (tally, None);
    }
    let show = |r: &Result<Outcome, GuardFailure>| match r {
        Ok(o) => serde_json::to_string(o).unwrap_or_else(|e| format!("<{e}>")),
        Err(f) => format!("failure {} ({f})", f.reason()),
    };
    let expected_json = serde_json::to_string(&expected).unwrap_or_else(|e| format!("<{e}>"));
    let problem = format!(
        "FAIL {} ({}): expected {expected_json}\n    native: {}\n    wasm:   {}",
        case.name(),
        case.kind(),
        show(&from_native),
        show(&from_wasm)
    );
    (tally, Some(problem))
}
