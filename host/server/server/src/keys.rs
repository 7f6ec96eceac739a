//! Key files for signed tokens: what `fencing admin keygen` writes, what
//! `--signing-key` (the lock service) and `--verify-keys` (the storage) read.
//!
//! Format: one key per line, `<id> <algorithm> <hex>`: a decimal key id
//! (u32), `ed25519` or `hmac-sha256`, and the key bytes in hex. Blank lines
//! and lines starting with `#` are ignored (`fencing_runtime::key_text` reads
//! them, as every host reads keys). A signing file holds exactly one
//! key, its secret (an Ed25519 seed, 32 bytes, or an HMAC secret, 32 to 64
//! bytes); a verify file holds one or more verifier keys (Ed25519 public
//! keys, or the HMAC secrets), several during a rotation.
//!
//! Invariants, each checked before a server starts (`fencing serve` exits 2
//! naming the file and the problem):
//! - a file that loads is complete and checked (ids distinct, each key a key
//!   of its algorithm), so a server never starts with half a keyring;
//! - no key is degenerate: an Ed25519 verify key is the canonical encoding
//!   of a point that is not of small order (a weak key would take proofs
//!   made without any secret), and a secret (an Ed25519 seed, an HMAC
//!   secret) is not a run of a few repeated bytes;
//! - a secret is in a file only its owner can read (`secrets.rs`): the
//!   signing file always, a verify file whenever it holds an HMAC secret
//!   (which makes proofs as well as it checks them); a verify file of
//!   public keys may be read by anyone, never written by others;
//! - a signing file is not a verify file: a `.pub` name, or the header
//!   `fencing admin keygen` writes into verify files, is refused as a
//!   signing key (an Ed25519 public key is 32 bytes, like a seed, and would
//!   sign with a key nobody checks);
//! - in a process that signs and checks ([`check_pair`]), the signing key's
//!   verifier key is in the verify file, or every honest write would be
//!   refused `proof_bad`.

use crate::secrets::{SecretFileError, check_not_writable_by_others, check_private};
use fencing_runtime::proof::{Algorithm, KeyError, Signer, VerifierKey};
use fencing_runtime::{Verifier, key_text};
use std::path::Path;

/// The first line `fencing admin keygen` writes into a signing file.
pub const SIGNING_HEADER: &str = "# fencing signing key (secret; --signing-key): <id> <algorithm> <hex>";
/// The first line it writes into a verify file of public keys.
pub const VERIFY_HEADER: &str = "# fencing verify keys (public; --verify-keys): <id> <algorithm> <hex>";

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} line {line}: {message}")]
    Line { path: String, line: usize, message: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error(transparent)]
    Secret(#[from] SecretFileError),
}

fn file_error(path: &Path, message: impl Into<String>) -> KeyFileError {
    KeyFileError::File { path: path.display().to_string(), message: message.into() }
}

fn parse_lines(path: &str, text: &str) -> Result<Vec<key_text::KeyFields>, KeyFileError> {
    let keys = key_text::parse_keys(text).map_err(|(line, message)| KeyFileError::Line {
        path: path.into(),
        line,
        message,
    })?;
    Ok(keys.into_iter().map(|(_, key)| key).collect())
}

/// The keys of a verify file, checked as a [`Verifier`] checks them.
pub fn parse_verifier_keys(path: &str, text: &str) -> Result<Vec<VerifierKey>, KeyFileError> {
    let keys: Vec<VerifierKey> = parse_lines(path, text)?
        .into_iter()
        .map(|(id, algorithm, material)| VerifierKey { id, algorithm, material })
        .collect();
    let file = |message: String| KeyFileError::File { path: path.into(), message };
    match fencing_runtime::proof::Keyring::new(&keys) {
        Ok(_) => Ok(keys),
        Err(KeyError::NoKeys) => Err(file("holds no key".into())),
        Err(e) => Err(file(e.to_string())),
    }
}

/// The one key of a signing file.
pub fn parse_signing_key(path: &str, text: &str) -> Result<Signer, KeyFileError> {
    parse_signing_key_with_secret(path, text).map(|(signer, _)| signer)
}

fn parse_signing_key_with_secret(path: &str, text: &str) -> Result<(Signer, Vec<u8>), KeyFileError> {
    let file = |message: String| KeyFileError::File { path: path.into(), message };
    let mut keys = parse_lines(path, text)?;
    if keys.len() != 1 {
        return Err(file(format!("holds {} keys; a signing file holds exactly one", keys.len())));
    }
    let (id, algorithm, secret) = keys.pop().expect("one key");
    let signer = Signer::new(id, algorithm, &secret).ok_or_else(|| {
        file(match algorithm {
            Algorithm::Ed25519 => format!("an ed25519 secret is 32 bytes, not {}", secret.len()),
            Algorithm::HmacSha256 => format!("an hmac-sha256 secret is 32 to 64 bytes, not {}", secret.len()),
        })
    })?;
    Ok((signer, secret))
}

fn read(path: &Path) -> Result<String, KeyFileError> {
    std::fs::read_to_string(path).map_err(|source| KeyFileError::Io { path: path.display().to_string(), source })
}

/// Loads `--verify-keys`: the keys, checked one by one (see the module's invariants).
pub fn load_verifier_keys(path: &Path) -> Result<Vec<VerifierKey>, KeyFileError> {
    let keys = parse_verifier_keys(&path.display().to_string(), &read(path)?)?;
    if keys.iter().any(|k| k.algorithm == Algorithm::HmacSha256) {
        check_private(path, "an HMAC secret (whoever reads it can make proofs)")?;
    } else {
        check_not_writable_by_others(path, "the keys that decide which proofs hold")?;
    }
    for key in &keys {
        if let Some(problem) = degenerate_verifier(key) {
            return Err(file_error(path, format!("key {}: {problem}", key.id)));
        }
    }
    Ok(keys)
}

/// The [`Verifier`] of keys [`load_verifier_keys`] read from `path`.
pub fn verifier(path: &Path, keys: Vec<VerifierKey>) -> Result<Verifier, KeyFileError> {
    Verifier::new(keys).map_err(|e| file_error(path, e.to_string()))
}

/// Loads `--verify-keys`.
pub fn load_verifier(path: &Path) -> Result<Verifier, KeyFileError> {
    verifier(path, load_verifier_keys(path)?)
}

/// Loads `--signing-key` (see the module's invariants).
pub fn load_signer(path: &Path) -> Result<Signer, KeyFileError> {
    if path.extension().is_some_and(|e| e == "pub") {
        return Err(file_error(
            path,
            "a .pub file holds verify keys (the storage's --verify-keys), not a signing key: give the file \
             `fencing admin keygen --out` wrote, without .pub",
        ));
    }
    let text = read(path)?;
    if text.lines().next().is_some_and(|l| l.trim_end() == VERIFY_HEADER) {
        return Err(file_error(path, "holds verify keys (its first line says so), not a signing key"));
    }
    check_private(path, "a signing key (whoever reads it can make proofs)")?;
    let (signer, secret) = parse_signing_key_with_secret(&path.display().to_string(), &text)?;
    if let Some(problem) = degenerate_secret(&secret) {
        return Err(file_error(path, problem));
    }
    Ok(signer)
}

/// Refuses a signing key whose verifier key is not among `verify` (one
/// process that signs its grants and checks its writes): every honest
/// write would be refused `proof_bad` or `proof_unknown_key`.
pub fn check_pair(
    signer: &Signer,
    signing: &Path,
    verify: &[VerifierKey],
    verify_path: &Path,
) -> Result<(), KeyFileError> {
    let own = signer.verifier_key();
    if verify.contains(&own) {
        return Ok(());
    }
    let message = match verify.iter().find(|k| k.id == own.id) {
        Some(other) if other.algorithm != own.algorithm => format!(
            "key {} is {} in {}, but this signing key is {}: writes would be refused proof_bad",
            own.id,
            other.algorithm.name(),
            verify_path.display(),
            own.algorithm.name()
        ),
        Some(_) => format!(
            "{} holds another key under this signing key's id {}: every write this server signs would be refused \
             proof_bad. Give --verify-keys the file keygen wrote beside this key (for Ed25519 its .pub)",
            verify_path.display(),
            own.id
        ),
        None => format!(
            "no key in {} checks this signing key (id {}): every write this server signs would be refused \
             proof_unknown_key. Add its verify key there (for Ed25519 the .pub keygen wrote beside it)",
            verify_path.display(),
            own.id
        ),
    };
    Err(file_error(signing, message))
}

/// Why a verifier key would protect nothing, if it would not.
fn degenerate_verifier(key: &VerifierKey) -> Option<String> {
    match key.algorithm {
        Algorithm::HmacSha256 => degenerate_secret(&key.material),
        Algorithm::Ed25519 => {
            let bytes: &[u8; 32] = key.material.as_slice().try_into().ok()?;
            let Ok(public) = ed25519_dalek::VerifyingKey::from_bytes(bytes) else {
                return Some("is not an Ed25519 public key (no point has this encoding)".into());
            };
            if public.is_weak() {
                return Some(
                    "is a weak Ed25519 public key (a point of small order): proofs made without any secret \
                     would hold under it"
                        .into(),
                );
            }
            if public.to_edwards().compress().as_bytes() != bytes {
                return Some("is not the canonical encoding of an Ed25519 public key".into());
            }
            None
        }
    }
}

/// Why a secret is no secret, if it is not: a run of a few repeated bytes.
fn degenerate_secret(secret: &[u8]) -> Option<String> {
    let mut seen = [false; 256];
    secret.iter().for_each(|&b| seen[b as usize] = true);
    let distinct = seen.iter().filter(|&&s| s).count();
    (distinct < 8).then(|| {
        format!(
            "the key holds only {distinct} distinct byte values in {} bytes: not a random secret \
             (make one with `fencing admin keygen`)",
            secret.len()
        )
    })
}

/// A key file's line for `id`, `algorithm` and `bytes`.
pub fn line(id: u32, algorithm: Algorithm, bytes: &[u8]) -> String {
    format!("{id} {} {}", algorithm.name(), key_text::hex(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signing_file_and_its_verify_file_agree() {
        let signer =
            parse_signing_key("s", &format!("# made by keygen\n{}\n", line(3, Algorithm::Ed25519, &[5; 32]))).unwrap();
        let public = signer.verifier_key();
        let text = format!(
            "{}\n\n{}\n",
            line(3, public.algorithm, &public.material),
            line(4, Algorithm::HmacSha256, &[6; 32])
        );
        let keys = parse_verifier_keys("v", &text).unwrap();
        assert_eq!(keys[0], public);
        let mut ring = fencing_runtime::proof::Keyring::new(&keys).unwrap();
        assert_eq!(ring.verify("orders", 34, &signer.prove("orders", 34)), Ok(()));
    }

    #[test]
    fn bad_files_are_named_with_their_line() {
        let err = |r: Result<Vec<VerifierKey>, KeyFileError>| r.unwrap_err().to_string();
        assert_eq!(err(parse_verifier_keys("v", "")), "v: holds no key");
        assert!(err(parse_verifier_keys("v", "\n1 ed25519\n")).contains("v line 2: expected"));
        assert!(err(parse_verifier_keys("v", "x ed25519 00")).contains("key id \"x\""));
        assert!(err(parse_verifier_keys("v", "1 rsa 00")).contains("\"rsa\" is not ed25519"));
        assert!(err(parse_verifier_keys("v", "1 ed25519 0g")).contains("not hex"));
        assert!(err(parse_verifier_keys("v", &format!("1 hmac-sha256 {}", "ab".repeat(8)))).contains("key 1"));
        let twice = format!("{0}\n{0}\n", line(1, Algorithm::HmacSha256, &[1; 32]));
        assert!(err(parse_verifier_keys("v", &twice)).contains("two verifier keys have id 1"));
        let two =
            format!("{}\n{}\n", line(1, Algorithm::HmacSha256, &[1; 32]), line(2, Algorithm::HmacSha256, &[2; 32]));
        assert!(parse_signing_key("s", &two).err().unwrap().to_string().contains("exactly one"));
        let short = line(1, Algorithm::Ed25519, &[1; 16]);
        assert!(parse_signing_key("s", &short).err().unwrap().to_string().contains("32 bytes, not 16"));
    }

    fn private(dir: &Path, name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn random() -> [u8; 32] {
        rand::random()
    }

    #[test]
    fn mistakes_that_would_start_and_then_refuse_every_writer_are_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let err = |r: Result<Signer, KeyFileError>| r.err().map(|e| e.to_string()).unwrap_or_default();
        let seed = random();
        let signer = Signer::new(1, Algorithm::Ed25519, &seed).unwrap();
        let public = signer.verifier_key();
        let signing =
            private(dir.path(), "s.key", &format!("{SIGNING_HEADER}\n{}\n", line(1, Algorithm::Ed25519, &seed)), 0o600);
        let verify_text = format!("{VERIFY_HEADER}\n{}\n", line(1, Algorithm::Ed25519, &public.material));
        let verify = private(dir.path(), "s.key.pub", &verify_text, 0o644);
        assert!(load_signer(&signing).is_ok());
        assert!(load_verifier_keys(&verify).is_ok(), "public keys may be read by anyone");
        // A .pub given as the signing key: by its name, and by its header under another name.
        assert!(err(load_signer(&verify)).contains("a .pub file holds verify keys"));
        let renamed = private(dir.path(), "renamed", &verify_text, 0o600);
        assert!(err(load_signer(&renamed)).contains("holds verify keys"));
        // A signing key others can read.
        let loose = private(dir.path(), "loose.key", &line(1, Algorithm::Ed25519, &seed), 0o644);
        assert!(err(load_signer(&loose)).contains("chmod 600"));
        // A verify file others can write.
        let writable = private(dir.path(), "w.pub", &verify_text, 0o666);
        assert!(load_verifier_keys(&writable).err().unwrap().to_string().contains("chmod go-w"));
        // An HMAC secret as a verify key is a secret: private, and only there.
        let hmac = random();
        let shared = private(dir.path(), "hm.key", &line(2, Algorithm::HmacSha256, &hmac), 0o644);
        assert!(load_verifier_keys(&shared).err().unwrap().to_string().contains("HMAC secret"));
        // A signing key the verify file does not hold.
        let other = Signer::new(1, Algorithm::Ed25519, &random()).unwrap();
        let keys = load_verifier_keys(&verify).unwrap();
        assert!(check_pair(&signer, &signing, &keys, &verify).is_ok());
        let e = check_pair(&other, &signing, &keys, &verify).unwrap_err().to_string();
        assert!(e.contains("another key under this signing key's id 1"), "{e}");
        let third = Signer::new(9, Algorithm::Ed25519, &random()).unwrap();
        assert!(check_pair(&third, &signing, &keys, &verify).unwrap_err().to_string().contains("no key in"));
    }

    #[test]
    fn degenerate_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let verify = |hex_key: &str| {
            let path = private(dir.path(), "v.pub", &format!("1 ed25519 {hex_key}\n"), 0o644);
            load_verifier_keys(&path).err().map(|e| e.to_string()).unwrap_or_default()
        };
        assert!(verify(&"ff".repeat(32)).contains("key 1:"), "all ones");
        assert!(verify(&"00".repeat(32)).contains("weak"), "a point of small order");
        let identity = format!("01{}", "00".repeat(31));
        assert!(verify(&identity).contains("weak"), "the identity");
        let good = Signer::new(1, Algorithm::Ed25519, &random()).unwrap().verifier_key();
        assert_eq!(verify(&key_text::hex(&good.material)), "");
        let hmac = private(dir.path(), "h.key", &format!("1 hmac-sha256 {}\n", "ab".repeat(32)), 0o600);
        assert!(load_verifier_keys(&hmac).err().unwrap().to_string().contains("only 1 distinct byte"));
        let seed = private(dir.path(), "z.key", &format!("1 ed25519 {}\n", "00".repeat(32)), 0o600);
        assert!(load_signer(&seed).err().unwrap().to_string().contains("not a random secret"));
    }
}
