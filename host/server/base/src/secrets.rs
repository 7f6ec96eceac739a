//! Files that hold secrets: the writers' bearer token (`--auth-token-file`),
//! the operators' tokens (`--admin-token-file`), a signing key
//! (`--signing-key`) and a verify file holding HMAC secrets
//! (`--verify-keys`).
//!
//! Invariants, checked before the server starts (each failure names the
//! file, the problem and the fix; `fencing serve` exits 2):
//! - a secret file is readable and writable by its owner only: a file group
//!   or others can read leaks the secret to every local account, and one
//!   they can write lets them replace it. A file of public keys
//!   (Ed25519 verify keys) may be read by anyone, never written by others;
//! - a bearer token is at least [`MIN_TOKEN_CHARS`] characters, so that a
//!   token guessed or mistyped as `x` protects nothing is refused at start
//!   rather than discovered in production;
//! - a presented secret is compared in time that depends only on the
//!   configured one ([`constant_time_eq`]).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Shortest bearer token a server accepts, in characters (printable ASCII):
/// about 96 bits from a random generator's letters and digits.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Why a secret file cannot be used, with its path and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct SecretFileError {
    pub path: String,
    pub problem: String,
}

impl SecretFileError {
    pub fn new(path: &Path, problem: impl Into<String>) -> SecretFileError {
        SecretFileError { path: path.display().to_string(), problem: problem.into() }
    }
}

/// Refuses `path`, holding `what` (a secret), when group or others may read or write it.
pub fn check_private(path: &Path, what: &str) -> Result<(), SecretFileError> {
    let mode = mode(path)?;
    if mode & 0o066 != 0 {
        return Err(SecretFileError::new(
            path,
            format!(
                "holds {what} and is {} by group or others (mode {mode:03o}); \
                 anyone on this machine could use it. Make it the owner's only: chmod 600 {}",
                access(mode, 0o044, 0o022),
                shell_quote(path)
            ),
        ));
    }
    Ok(())
}

/// Refuses `path`, holding public keys, when group or others may write it
/// (they could add a key of their own and forge every proof).
pub fn check_not_writable_by_others(path: &Path, what: &str) -> Result<(), SecretFileError> {
    let mode = mode(path)?;
    if mode & 0o022 != 0 {
        return Err(SecretFileError::new(
            path,
            format!(
                "holds {what} and is writable by group or others (mode {mode:03o}): anyone could add a key \
                 and forge proofs. Fix: chmod go-w {}",
                shell_quote(path)
            ),
        ));
    }
    Ok(())
}

/// Refuses a bearer token shorter than [`MIN_TOKEN_CHARS`].
pub fn check_token_length(path: &Path, token: &str) -> Result<(), SecretFileError> {
    let chars = token.chars().count();
    if chars < MIN_TOKEN_CHARS {
        return Err(SecretFileError::new(
            path,
            format!(
                "the token is {chars} characters; a bearer token must be at least {MIN_TOKEN_CHARS} \
                 (make one with: openssl rand -hex 16)"
            ),
        ));
    }
    Ok(())
}

/// Compares a presented secret with the expected one in time that depends only
/// on `expected.len()`: every byte of `expected` is visited and differences are
/// OR-ed together, with no early exit on the first mismatch. A length mismatch
/// is folded into the result instead of returning early. `black_box` keeps the
/// optimizer from turning the loop back into a short-circuiting compare.
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = u64::from(presented.len() != expected.len());
    for (i, &e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(!e);
        diff |= u64::from(std::hint::black_box(p ^ e));
    }
    std::hint::black_box(diff) == 0
}

fn mode(path: &Path) -> Result<u32, SecretFileError> {
    std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o777)
        .map_err(|e| SecretFileError::new(path, format!("cannot read its permissions: {e}")))
}

fn access(mode: u32, read: u32, write: u32) -> &'static str {
    match (mode & read != 0, mode & write != 0) {
        (true, true) => "readable and writable",
        (true, false) => "readable",
        _ => "writable",
    }
}

/// `path` as one shell word, for a fix the operator can paste.
pub fn shell_quote(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:@,".contains(&b)) {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, mode: u32) -> std::path::PathBuf {
        let path = dir.join(format!("f{mode:o}"));
        std::fs::write(&path, "x").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn only_the_owner_may_read_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_private(&file(dir.path(), 0o600), "a token"), Ok(()));
        assert_eq!(check_private(&file(dir.path(), 0o400), "a token"), Ok(()));
        for mode in [0o640, 0o604, 0o644, 0o620, 0o666] {
            let e = check_private(&file(dir.path(), mode), "a token").unwrap_err();
            assert!(e.to_string().contains("chmod 600"), "{mode:o}: {e}");
            assert!(e.to_string().contains(&format!("mode {mode:03o}")), "{mode:o}: {e}");
        }
        // Public keys may be read by anyone, never written.
        assert_eq!(check_not_writable_by_others(&file(dir.path(), 0o644), "keys"), Ok(()));
        assert!(check_not_writable_by_others(&file(dir.path(), 0o664), "keys").is_err());
        assert!(check_private(&dir.path().join("missing"), "a token").is_err());
    }

    #[test]
    fn tokens_have_a_minimum_length_and_paths_are_quoted_for_the_shell() {
        let p = Path::new("t");
        assert!(check_token_length(p, "x").unwrap_err().to_string().contains("1 characters"));
        assert!(check_token_length(p, &"x".repeat(MIN_TOKEN_CHARS - 1)).is_err());
        assert_eq!(check_token_length(p, &"x".repeat(MIN_TOKEN_CHARS)), Ok(()));
        assert_eq!(shell_quote(Path::new("/etc/fencing/token")), "/etc/fencing/token");
        assert_eq!(shell_quote(Path::new("my token's")), r"'my token'\''s'");
    }
}
