//! The generation clock: the durable upper bound on every fencing token
//! issued, and the longest lease ever granted.
//!
//! Invariants:
//! - every token the embedded service hands out is strictly below the
//!   `ceiling` stored on disk at that moment (the service reserves a range
//!   durably before using it), so after a crash the service restarts above
//!   the stored ceiling and never reissues or goes below a token;
//! - `max_lease_ms` on disk is at least every lease duration granted, so after
//!   a crash the service can wait out every lease that might still be running;
//! - both values only grow; the file is replaced atomically (write to a
//!   temporary file, fsync, rename, fsync the directory), so a crash leaves
//!   either the old or the new state, never a torn one. A file that does not
//!   parse stops the service rather than restarting tokens from zero.
//! - one clock per data directory: an exclusive file lock (`locks-clock.lock`)
//!   is held while the clock is open, so two services can never interleave
//!   writes and lower each other's ceiling.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// File name of the clock inside the data directory.
pub const CLOCK_FILE: &str = "locks-clock";

/// What the clock stores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockState {
    /// No token at or above this value has been issued.
    pub ceiling: u64,
    /// No lease longer than this has been granted.
    pub max_lease_ms: u64,
}

/// Why the clock could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    /// `cause` is not a `#[source]`: the message carries it, once.
    #[error("generation clock {path}: {cause}{}", no_space_hint(cause))]
    Io { path: PathBuf, cause: std::io::Error },
    #[error("{path} is locked: another lock service uses this data directory")]
    InUse { path: PathBuf },
    #[error("the token ceiling {ceiling} cannot be raised by {by}: it would pass 2^64-1")]
    Overflow { ceiling: u64, by: u64 },
    #[error("generation clock {path} is corrupt ({detail}); refusing to restart tokens")]
    Corrupt { path: PathBuf, detail: String },
}

/// What to do when the clock cannot be written because the disk is full.
fn no_space_hint(e: &std::io::Error) -> &'static str {
    if fencing_base::is_out_of_space(e) {
        "; the lock service makes its token generation durable before granting anything, \
         so it cannot start on a full disk: free some space and start it again"
    } else {
        ""
    }
}

/// The durable clock; `None` directory means memory only (tests, `--data-dir` absent).
pub struct GenerationClock {
    dir: Option<PathBuf>,
    /// Held open (and locked) for the clock's lifetime.
    _lock: Option<fs::File>,
    durable: Mutex<ClockState>,
}

impl GenerationClock {
    /// Opens (or creates) the clock in `dir`, returning it and the state left by the previous run.
    pub fn open(dir: Option<&Path>) -> Result<(GenerationClock, ClockState), ClockError> {
        let (previous, lock) = match dir {
            None => (ClockState::default(), None),
            Some(dir) => {
                fs::create_dir_all(dir).map_err(|cause| ClockError::Io { path: dir.to_path_buf(), cause })?;
                let lock = lock_dir(dir)?;
                // A temporary file is only ever the part of a write that had not
                // been renamed over the state yet: never the state itself.
                let tmp = dir.join(format!("{CLOCK_FILE}.tmp"));
                remove_leftover(&tmp).map_err(|cause| ClockError::Io { path: tmp, cause })?;
                (read_state(&dir.join(CLOCK_FILE))?, Some(lock))
            }
        };
        let clock = GenerationClock { dir: dir.map(Path::to_path_buf), _lock: lock, durable: Mutex::new(previous) };
        Ok((clock, previous))
    }

    /// The state known to be on disk.
    pub fn durable(&self) -> ClockState {
        *self.durable.lock().expect("clock mutex")
    }

    /// Makes `ceiling` and `max_lease_ms` durable (each only grows). Returns the durable state.
    ///
    /// Concurrent callers serialize; a caller whose values are already durable returns at once.
    pub fn advance(&self, ceiling: u64, max_lease_ms: u64) -> Result<ClockState, ClockError> {
        let mut durable = self.durable.lock().expect("clock mutex");
        let next =
            ClockState { ceiling: durable.ceiling.max(ceiling), max_lease_ms: durable.max_lease_ms.max(max_lease_ms) };
        if next == *durable {
            return Ok(next);
        }
        if let Some(dir) = &self.dir {
            write_state(dir, next)?;
        }
        *durable = next;
        Ok(next)
    }
}

/// Raises the ceiling stored in `dir` (no service may have it open): to
/// `previous + by`, or to at least `to`. Returns the previous and the new state.
pub fn bump(dir: &Path, bump: Bump) -> Result<(ClockState, ClockState), ClockError> {
    let path = dir.join(CLOCK_FILE);
    if !path.exists() {
        return Err(ClockError::Io {
            path,
            cause: std::io::Error::new(std::io::ErrorKind::NotFound, "no lock service has used this data directory"),
        });
    }
    let (clock, previous) = GenerationClock::open(Some(dir))?;
    let ceiling = match bump {
        Bump::By(n) => {
            previous.ceiling.checked_add(n).ok_or(ClockError::Overflow { ceiling: previous.ceiling, by: n })?
        }
        Bump::To(n) => previous.ceiling.max(n),
    };
    let now = clock.advance(ceiling, 0)?;
    Ok((previous, now))
}

/// Writes a new clock in `dir`, where the clock is lost but the lease
/// journal shows a lock service ran (no service may have it open): the
/// ceiling `ceiling` (above every token handed out, as the operator knows
/// from the storage), and the longest lease a lease may have,
/// [`MAX_LEASE_MS`](crate::MAX_LEASE_MS), since the lost clock's is
/// unknown. Refuses a directory that has a clock.
pub fn recreate(dir: &Path, ceiling: u64) -> Result<ClockState, ClockError> {
    let (clock, _) = GenerationClock::open(Some(dir))?;
    let path = dir.join(CLOCK_FILE);
    if path.exists() {
        return Err(ClockError::Io {
            path,
            cause: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "the clock exists: raise it with --by or --to",
            ),
        });
    }
    clock.advance(ceiling, crate::MAX_LEASE_MS)
}

/// How [`bump`] moves the ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bump {
    By(u64),
    To(u64),
}

/// Takes the directory's exclusive lock, waiting up to two seconds for a previous owner to let go.
fn lock_dir(dir: &Path) -> Result<fs::File, ClockError> {
    let path = dir.join(format!("{CLOCK_FILE}.lock"));
    let io = |cause| ClockError::Io { path: path.clone(), cause };
    let file = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(io)?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(fs::TryLockError::WouldBlock) => {
                return Err(ClockError::InUse { path });
            }
            Err(fs::TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

fn read_state(path: &Path) -> Result<ClockState, ClockError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ClockState::default()),
        Err(cause) => return Err(ClockError::Io { path: path.to_path_buf(), cause }),
    };
    let corrupt = |detail: &str| ClockError::Corrupt { path: path.to_path_buf(), detail: detail.to_string() };
    let mut ceiling = None;
    let mut max_lease = None;
    for line in text.lines() {
        let (key, value) = line.split_once('=').ok_or_else(|| corrupt("line without '='"))?;
        let value: u64 = value.trim().parse().map_err(|_| corrupt("value is not a u64"))?;
        match key.trim() {
            "ceiling" => ceiling = Some(value),
            "max_lease_ms" => max_lease = Some(value),
            _ => return Err(corrupt("unknown key")),
        }
    }
    match (ceiling, max_lease) {
        (Some(ceiling), Some(max_lease_ms)) => Ok(ClockState { ceiling, max_lease_ms }),
        _ => Err(corrupt("missing ceiling or max_lease_ms")),
    }
}

/// Removes `path` if it exists.
fn remove_leftover(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn write_state(dir: &Path, state: ClockState) -> Result<(), ClockError> {
    let path = dir.join(CLOCK_FILE);
    let tmp = dir.join(format!("{CLOCK_FILE}.tmp"));
    let io = |cause| ClockError::Io { path: path.clone(), cause };
    let mut f = fs::File::create(&tmp).map_err(io)?;
    write!(f, "ceiling={}\nmax_lease_ms={}\n", state.ceiling, state.max_lease_ms).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    fs::rename(&tmp, &path).map_err(io)?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_survives_reopen_and_only_grows() {
        let dir = tempfile::tempdir().unwrap();
        let (clock, prev) = GenerationClock::open(Some(dir.path())).unwrap();
        assert_eq!(prev, ClockState::default());
        clock.advance(1000, 500).unwrap();
        clock.advance(10, 50).unwrap();
        assert_eq!(clock.durable(), ClockState { ceiling: 1000, max_lease_ms: 500 });
        assert!(matches!(GenerationClock::open(Some(dir.path())), Err(ClockError::InUse { .. })));
        drop(clock);
        let (_, prev) = GenerationClock::open(Some(dir.path())).unwrap();
        assert_eq!(prev, ClockState { ceiling: 1000, max_lease_ms: 500 });
    }

    #[test]
    fn a_temporary_file_left_by_a_failed_write_is_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let (clock, _) = GenerationClock::open(Some(dir.path())).unwrap();
        clock.advance(1000, 500).unwrap();
        drop(clock);
        let tmp = dir.path().join(format!("{CLOCK_FILE}.tmp"));
        fs::write(&tmp, "").unwrap();
        let (_, prev) = GenerationClock::open(Some(dir.path())).unwrap();
        assert!(!tmp.exists(), "the leftover is gone before anything is written");
        assert_eq!(prev, ClockState { ceiling: 1000, max_lease_ms: 500 }, "the state itself is kept");
    }

    #[test]
    fn bump_only_raises_the_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        assert!(bump(dir.path(), Bump::By(5)).is_err(), "nothing to bump in an unused directory");
        let (clock, _) = GenerationClock::open(Some(dir.path())).unwrap();
        clock.advance(1000, 500).unwrap();
        assert!(matches!(bump(dir.path(), Bump::By(5)), Err(ClockError::InUse { .. })));
        drop(clock);
        let (before, after) = bump(dir.path(), Bump::By(5)).unwrap();
        assert_eq!((before.ceiling, after.ceiling, after.max_lease_ms), (1000, 1005, 500));
        assert_eq!(bump(dir.path(), Bump::To(10)).unwrap().1.ceiling, 1005);
        assert_eq!(bump(dir.path(), Bump::To(5000)).unwrap().1.ceiling, 5000);
        assert!(matches!(bump(dir.path(), Bump::By(u64::MAX)), Err(ClockError::Overflow { .. })));
    }

    #[test]
    fn a_lost_clock_is_recreated_at_the_ceiling_given_and_an_existing_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let state = recreate(dir.path(), 5000).unwrap();
        assert_eq!(state, ClockState { ceiling: 5000, max_lease_ms: crate::MAX_LEASE_MS });
        assert!(recreate(dir.path(), 9000).is_err(), "a clock that exists is raised, never rewritten");
        let (_, prev) = GenerationClock::open(Some(dir.path())).unwrap();
        assert_eq!(prev.ceiling, 5000);
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(CLOCK_FILE), "ceiling=12\n").unwrap();
        assert!(matches!(GenerationClock::open(Some(dir.path())), Err(ClockError::Corrupt { .. })));
        fs::write(dir.path().join(CLOCK_FILE), "ceiling=x\nmax_lease_ms=1\n").unwrap();
        assert!(matches!(GenerationClock::open(Some(dir.path())), Err(ClockError::Corrupt { .. })));
    }
}
