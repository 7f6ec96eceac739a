//! The shared test vectors (`tests/vectors/*.json`): their types, loading, and
//! running one case through any [`Guard`].
//!
//! The files speak the vocabulary of the rules, not of the WIT encoding: the
//! inputs and outcomes are the rule types themselves (their serde form: field
//! names as in Rust, policies and stream verdicts in snake_case), and a
//! verdict is `{"verdict": "<reason>", ...evidence}` with the same snake_case
//! reasons as [`Rejection::reason`]. The same JSON is read by the Python
//! and Node runners, so the format is documented in `tests/vectors/README.md`.
//!
//! Invariants: every case in a directory has a unique, non-empty name; every
//! u64 is a JSON integer in `0..=u64::MAX` (anything else is a load error, never
//! a silent truncation); an observed outcome is converted into the same
//! representation as the expectation, so "passes" is plain equality.
//!
//! `random.rs` writes random cases in the same format, with the native
//! rules' verdicts as expectations, for hosts in other languages to compare
//! against.

use fencing_runtime::{
    Admission, BatchWrite, Decision, Fence, FenceState, Guard, GuardFailure, Policy, Rejection, Sequencer,
    StreamOutcome,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub mod random;

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

/// A decision as the vectors write it: an admission is
/// `{"verdict": "admitted", ...its fields}`, a rejection is the rule type's
/// own form, tagged by `verdict` with its [`Rejection::reason`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictSpec(pub Decision);

impl VerdictSpec {
    /// Whether the decision admits the write.
    pub fn admitted(&self) -> Option<&Admission> {
        self.0.as_ref().ok()
    }

    /// The verdict's name: `admitted` or the rejection's reason.
    pub fn name(&self) -> &'static str {
        match &self.0 {
            Ok(_) => "admitted",
            Err(r) => r.reason(),
        }
    }
}

impl Serialize for VerdictSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Admitted<'a> {
            verdict: &'static str,
            #[serde(flatten)]
            admission: &'a Admission,
        }
        match &self.0 {
            Ok(admission) => Admitted { verdict: "admitted", admission }.serialize(s),
            Err(rejection) => rejection.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for VerdictSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = serde_json::Value::deserialize(d)?;
        let decision = match value.get("verdict").and_then(|v| v.as_str()) {
            Some("admitted") => {
                value.as_object_mut().map(|o| o.remove("verdict"));
                Ok(Admission::deserialize(value).map_err(D::Error::custom)?)
            }
            _ => Err(Rejection::deserialize(value).map_err(D::Error::custom)?),
        };
        Ok(VerdictSpec(decision))
    }
}

/// The outcome of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchSpec {
    /// One verdict per write.
    pub verdicts: Vec<VerdictSpec>,
    /// The fence after the batch.
    pub fence: Option<FenceState>,
}

/// One named case: its inputs and the expected outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Case {
    /// One call of `admit`.
    Admit { name: String, policy: Policy, fence: Option<Fence>, sequencer: Sequencer, expect: VerdictSpec },
    /// One call of `admit-batch`.
    Batch {
        name: String,
        policy: Policy,
        fence: Option<Fence>,
        lock: String,
        writes: Vec<BatchWrite>,
        expect: BatchSpec,
    },
    /// One call of `admit-stream`.
    Stream { name: String, policy: Policy, high_water: u64, tokens: Vec<u64>, expect: StreamOutcome },
}

/// An outcome in the vectors' vocabulary: what a case expects or what a guard answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Outcome {
    Admit(VerdictSpec),
    Batch(BatchSpec),
    Stream(StreamOutcome),
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
            Case::Admit { expect, .. } => Outcome::Admit(expect.clone()),
            Case::Batch { expect, .. } => Outcome::Batch(expect.clone()),
            Case::Stream { expect, .. } => Outcome::Stream(expect.clone()),
        }
    }

    /// Runs the case's inputs through `guard`.
    pub fn run(&self, guard: &dyn Guard) -> Result<Outcome, GuardFailure> {
        Ok(match self {
            Case::Admit { policy, fence, sequencer, .. } => {
                Outcome::Admit(VerdictSpec(guard.admit(fence.as_ref(), sequencer, *policy)?))
            }
            Case::Batch { policy, fence, lock, writes, .. } => {
                let outcome = guard.admit_batch(fence.as_ref(), lock, writes, *policy)?;
                Outcome::Batch(BatchSpec {
                    verdicts: outcome.verdicts.into_iter().map(VerdictSpec).collect(),
                    fence: outcome.fence,
                })
            }
            Case::Stream { policy, high_water, tokens, .. } => {
                Outcome::Stream(guard.admit_stream(*high_water, tokens, *policy)?)
            }
        })
    }
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
