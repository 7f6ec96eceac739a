//! The shared test vectors (`tests/vectors/*.json`): their types, loading, and
//! running one case through any [`Guard`].
//!
//! The files speak the vocabulary of the rules, not of the WIT encoding: a
//! verdict is `{"verdict": "<reason>", ...evidence}` with the same snake_case
//! reasons as [`Rejection::reason`](crate::guard::Rejection::reason), and a
//! stream verdict is one of those names. The same JSON is read by the Python
//! and Node runners, so the format is documented in `tests/vectors/README.md`.
//!
//! Invariants: every case in a directory has a unique, non-empty name; every
//! u64 is a JSON integer in `0..=u64::MAX` (anything else is a load error, never
//! a silent truncation); an observed outcome is converted into the same
//! representation as the expectation, so "passes" is plain equality.

use crate::guard::{
    Admission, BatchOutcome, BatchWrite, Decision, Fence, Guard, GuardFailure, Policy, Rejection, Sequencer,
    StreamOutcome, Verdict,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a vector directory or file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum VectorError {
    /// The directory or a file could not be read.
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A file is not JSON of the expected top-level shape.
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    /// One case is malformed.
    #[error("{}: case #{index} ({name}): {message}", path.display())]
    Case { path: PathBuf, index: usize, name: String, message: String },
    /// Two cases share a name.
    #[error("duplicate case name {name:?} in {} and {}", first.display(), second.display())]
    Duplicate { name: String, first: PathBuf, second: PathBuf },
    /// The directory holds no `*.json` file.
    #[error("{}: no *.json vector files", dir.display())]
    Empty { dir: PathBuf },
}

/// The policy under which a case is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicySpec {
    NonDecreasing,
    StrictlyIncreasing,
}

impl From<PolicySpec> for Policy {
    fn from(p: PolicySpec) -> Policy {
        match p {
            PolicySpec::NonDecreasing => Policy::NonDecreasing,
            PolicySpec::StrictlyIncreasing => Policy::StrictlyIncreasing,
        }
    }
}

/// A stored fence. A missing `sequence` means none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FenceSpec {
    pub lock: String,
    pub high_water: u64,
    #[serde(default)]
    pub sequence: Option<u64>,
}

/// A presented sequencer. A missing `sequence` means none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SequencerSpec {
    pub lock: String,
    pub token: u64,
    #[serde(default)]
    pub sequence: Option<u64>,
}

/// One write of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteSpec {
    pub token: u64,
    #[serde(default)]
    pub sequence: Option<u64>,
}

/// The numeric fence left after a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FenceStateSpec {
    pub high_water: u64,
    #[serde(default)]
    pub sequence: Option<u64>,
}

/// The verdict on one write, with its evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case", deny_unknown_fields)]
pub enum VerdictSpec {
    Admitted {
        high_water: u64,
        #[serde(default)]
        sequence: Option<u64>,
        new_term: bool,
    },
    InvalidToken,
    WrongLock,
    StaleToken {
        presented: u64,
        high_water: u64,
    },
    TokenReused {
        presented: u64,
        high_water: u64,
    },
    SequenceRegressed {
        token: u64,
        #[serde(default)]
        presented: Option<u64>,
        last: u64,
    },
}

/// The outcome of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    pub verdicts: Vec<VerdictSpec>,
    pub fence: Option<FenceStateSpec>,
}

/// A compact stream verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamVerdictSpec {
    Admitted,
    InvalidToken,
    StaleToken,
    TokenReused,
}

/// The outcome of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub verdicts: Vec<StreamVerdictSpec>,
    pub high_water: u64,
}

/// One named case: its inputs and the expected outcome.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Case {
    /// One call of `admit`.
    Admit { name: String, policy: PolicySpec, fence: Option<FenceSpec>, sequencer: SequencerSpec, expect: VerdictSpec },
    /// One call of `admit-batch`.
    Batch {
        name: String,
        policy: PolicySpec,
        fence: Option<FenceSpec>,
        lock: String,
        writes: Vec<WriteSpec>,
        expect: BatchSpec,
    },
    /// One call of `admit-stream`.
    Stream { name: String, policy: PolicySpec, high_water: u64, tokens: Vec<u64>, expect: StreamSpec },
}

/// An outcome in the vectors' vocabulary: what a case expects or what a guard answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Admit(VerdictSpec),
    Batch(BatchSpec),
    Stream(StreamSpec),
}

impl Case {
    /// The case's unique name.
    pub fn name(&self) -> &str {
        match self {
            Case::Admit { name, .. } | Case::Batch { name, .. } | Case::Stream { name, .. } => name,
        }
    }

    /// `admit`, `batch` or `stream`.
    pub fn kind(&self) -> &'static str {
        match self {
            Case::Admit { .. } => "admit",
            Case::Batch { .. } => "batch",
            Case::Stream { .. } => "stream",
        }
    }

    /// What the case expects.
    pub fn expected(&self) -> Outcome {
        match self {
            Case::Admit { expect, .. } => Outcome::Admit(*expect),
            Case::Batch { expect, .. } => Outcome::Batch(expect.clone()),
            Case::Stream { expect, .. } => Outcome::Stream(expect.clone()),
        }
    }

    /// Runs the case's inputs through `guard`.
    pub fn run(&self, guard: &dyn Guard) -> Result<Outcome, GuardFailure> {
        match self {
            Case::Admit { policy, fence, sequencer, .. } => {
                let fence = fence.as_ref().map(to_fence);
                let presented =
                    Sequencer { lock: sequencer.lock.clone(), token: sequencer.token, sequence: sequencer.sequence };
                let decision = guard.admit(fence.as_ref(), &presented, (*policy).into())?;
                Ok(Outcome::Admit(verdict_of(&decision)))
            }
            Case::Batch { policy, fence, lock, writes, .. } => {
                let fence = fence.as_ref().map(to_fence);
                let writes: Vec<BatchWrite> =
                    writes.iter().map(|w| BatchWrite { token: w.token, sequence: w.sequence }).collect();
                let outcome = guard.admit_batch(fence.as_ref(), lock, &writes, (*policy).into())?;
                Ok(Outcome::Batch(batch_of(&outcome)))
            }
            Case::Stream { policy, high_water, tokens, .. } => {
                let outcome = guard.admit_stream(*high_water, tokens, (*policy).into())?;
                Ok(Outcome::Stream(stream_of(&outcome)))
            }
        }
    }
}

fn to_fence(f: &FenceSpec) -> Fence {
    Fence { lock: f.lock.clone(), high_water: f.high_water, sequence: f.sequence }
}

/// A decision in the vectors' vocabulary.
pub fn verdict_of(decision: &Decision) -> VerdictSpec {
    match *decision {
        Ok(Admission { high_water, sequence, new_term }) => VerdictSpec::Admitted { high_water, sequence, new_term },
        Err(Rejection::InvalidToken) => VerdictSpec::InvalidToken,
        Err(Rejection::WrongLock) => VerdictSpec::WrongLock,
        Err(Rejection::StaleToken { presented, high_water }) => VerdictSpec::StaleToken { presented, high_water },
        Err(Rejection::TokenReused { presented, high_water }) => VerdictSpec::TokenReused { presented, high_water },
        Err(Rejection::SequenceRegressed { token, presented, last }) => {
            VerdictSpec::SequenceRegressed { token, presented, last }
        }
    }
}

/// A batch outcome in the vectors' vocabulary.
pub fn batch_of(outcome: &BatchOutcome) -> BatchSpec {
    BatchSpec {
        verdicts: outcome.verdicts.iter().map(verdict_of).collect(),
        fence: outcome.fence.map(|f| FenceStateSpec { high_water: f.high_water, sequence: f.sequence }),
    }
}

/// A stream outcome in the vectors' vocabulary.
pub fn stream_of(outcome: &StreamOutcome) -> StreamSpec {
    let verdicts = outcome
        .verdicts
        .iter()
        .map(|v| match v {
            Verdict::Admitted => StreamVerdictSpec::Admitted,
            Verdict::InvalidToken => StreamVerdictSpec::InvalidToken,
            Verdict::StaleToken => StreamVerdictSpec::StaleToken,
            Verdict::TokenReused => StreamVerdictSpec::TokenReused,
        })
        .collect();
    StreamSpec { verdicts, high_water: outcome.high_water }
}

/// One vector file.
#[derive(Debug, Clone)]
pub struct VectorFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its free-text description.
    pub description: String,
    /// Its cases, in file order.
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    description: String,
    cases: Vec<serde_json::Value>,
}

/// Parses one vector file's text; `path` only names it in errors.
pub fn parse_file(path: &Path, text: &str) -> Result<VectorFile, VectorError> {
    let raw: RawFile = serde_json::from_str(text)
        .map_err(|e| VectorError::File { path: path.to_path_buf(), message: e.to_string() })?;
    let mut cases = Vec::with_capacity(raw.cases.len());
    for (index, value) in raw.cases.into_iter().enumerate() {
        let name = value.get("name").and_then(|n| n.as_str()).unwrap_or("<unnamed>").to_string();
        let case_error =
            |message: String| VectorError::Case { path: path.to_path_buf(), index, name: name.clone(), message };
        let case: Case = serde_path_to_error::deserialize(value).map_err(|e| {
            let at = e.path().to_string();
            let err = e.into_inner();
            case_error(if at == "." { err.to_string() } else { format!("at {at}: {err}") })
        })?;
        if case.name().is_empty() {
            return Err(case_error("name is empty".into()));
        }
        cases.push(case);
    }
    Ok(VectorFile { path: path.to_path_buf(), description: raw.description, cases })
}

/// Loads every `*.json` file of `dir`, sorted by file name, and checks that
/// case names are unique across them.
pub fn load_dir(dir: &Path) -> Result<Vec<VectorFile>, VectorError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VectorError::Io { path, source }
    };
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let path = entry.map_err(io(dir))?.path();
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(VectorError::Empty { dir: dir.to_path_buf() });
    }
    paths.sort();
    let mut files = Vec::with_capacity(paths.len());
    let mut seen: HashMap<String, PathBuf> = HashMap::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        let file = parse_file(&path, &text)?;
        for case in &file.cases {
            if let Some(first) = seen.insert(case.name().to_string(), path.clone()) {
                return Err(VectorError::Duplicate { name: case.name().to_string(), first, second: path });
            }
        }
        files.push(file);
    }
    Ok(files)
}
