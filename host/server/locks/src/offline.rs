//! What operators do on a stopped lock service's directory (the clock's
//! lock, `locks-clock.lock`, is held throughout, so a running service
//! refuses them):
//! - when the lease journal is lost or cannot be read (`fencing admin
//!   recover-leases`), and after a restore (`fencing admin bump-tokens`):
//!   replace it with a journal that holds no lease and makes the next start
//!   grant no lock until the longest lease ever granted has run out, as a
//!   new leader waits out its predecessor's leases. Tokens are untouched:
//!   they come from the clock, which only grows;
//! - the lowest token the service can still hand out, and the leases it
//!   holds ([`lock_tokens`]): what `fencing admin drop-floors` folds the
//!   storage's floors under.

use super::clock::{CLOCK_FILE, ClockError, GenerationClock};
use super::journal::{JOURNAL_FILE, Journal, JournalError};
use std::path::{Path, PathBuf};

/// What a recovery did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Recovered {
    /// Where the journal that could not be trusted was kept (`None`: there was none).
    pub journal_kept_as: Option<PathBuf>,
    /// How long the next start grants no lock (the longest lease ever granted).
    pub first_grant_waits_ms: u64,
}

/// Why a recovery could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Clock(#[from] ClockError),
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Refused(String),
    #[error("{path}: {cause}")]
    Io { path: PathBuf, cause: std::io::Error },
}

/// Recovers a lost or unreadable journal in `dir`: keeps it aside
/// (`locks-leases.unreadable-<unix seconds>`) and writes the waiting one.
/// Refuses a directory whose clock is missing (no lock service ran here, or
/// its clock is lost: `bump-tokens` comes first) and one whose journal reads
/// back whole (nothing to recover: its leases would be thrown away).
pub fn recover_leases(dir: &Path) -> Result<Recovered, RecoverError> {
    if !dir.join(CLOCK_FILE).exists() {
        return Err(RecoverError::Refused(format!(
            "{}: no generation clock (locks-clock) here: either no lock service ran in this directory, or its \
             clock is lost too (then recreate it first: fencing admin bump-tokens --to <TOKEN> --keep-leases)",
            dir.display()
        )));
    }
    let (clock, previous) = GenerationClock::open(Some(dir))?;
    let journal = dir.join(JOURNAL_FILE);
    if journal.exists() && Journal::reads_whole(dir)? {
        return Err(RecoverError::Refused(format!(
            "{}: the lease journal reads back whole; nothing to recover (its leases are restored at the next start)",
            journal.display()
        )));
    }
    let kept = keep_aside(&journal)?;
    Journal::write_recovery(dir, previous.max_lease_ms)?;
    drop(clock);
    Ok(Recovered { journal_kept_as: kept, first_grant_waits_ms: previous.max_lease_ms })
}

/// Replaces the journal in `dir`, whatever it holds, with the waiting one
/// (after a restore, its leases are the backup's, not today's).
pub fn replace_leases(dir: &Path) -> Result<Recovered, RecoverError> {
    let (clock, previous) = GenerationClock::open(Some(dir))?;
    Journal::write_recovery(dir, previous.max_lease_ms)?;
    drop(clock);
    Ok(Recovered { journal_kept_as: None, first_grant_waits_ms: previous.max_lease_ms })
}

/// The tokens of the stopped service in `dir`: the lowest it can still hand
/// out (every grant after a start is above the clock's ceiling), and the
/// leases its journal holds, which the next start restores with their
/// tokens. Refuses a journal that does not read back whole, and a directory
/// with no clock.
pub fn lock_tokens(dir: &Path) -> Result<LockTokens, RecoverError> {
    if !dir.join(CLOCK_FILE).exists() {
        return Err(RecoverError::Refused(format!("{}: no lock service's clock (locks-clock) here", dir.display())));
    }
    let (clock, previous) = GenerationClock::open(Some(dir))?;
    let leases = Journal::leases_in(dir)?;
    drop(clock);
    Ok(LockTokens {
        next_grant: previous.ceiling.saturating_add(1),
        held: leases.into_iter().map(|l| (l.name.to_string(), l.token)).collect(),
    })
}

/// What [`lock_tokens`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockTokens {
    /// Every token the service hands out from its next start on is at least this.
    pub next_grant: u64,
    /// The leases its journal holds (restored at the next start): lock and token.
    pub held: Vec<(String, u64)>,
}

/// Renames `journal` out of the way, if it exists; where to.
fn keep_aside(journal: &Path) -> Result<Option<PathBuf>, RecoverError> {
    if !journal.exists() {
        return Ok(None);
    }
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut kept = journal.with_file_name(format!("{JOURNAL_FILE}.unreadable-{secs}"));
    let mut n = 1;
    while kept.exists() {
        kept = journal.with_file_name(format!("{JOURNAL_FILE}.unreadable-{secs}-{n}"));
        n += 1;
    }
    std::fs::rename(journal, &kept).map_err(|cause| RecoverError::Io { path: journal.to_path_buf(), cause })?;
    Ok(Some(kept))
}
