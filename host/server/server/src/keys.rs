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
//! Invariant: a file that loads is complete and checked (ids distinct, each
//! key a key of its algorithm), so a server never starts with half a keyring.

use fencing_runtime::proof::{Algorithm, KeyError, Signer, VerifierKey};
use fencing_runtime::{Verifier, key_text};
use std::path::Path;

/// Why a key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} line {line}: {message}")]
    Line { path: String, line: usize, message: String },
    #[error("{path}: {message}")]
    File { path: String, message: String },
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
    let file = |message: String| KeyFileError::File { path: path.into(), message };
    let mut keys = parse_lines(path, text)?;
    if keys.len() != 1 {
        return Err(file(format!("holds {} keys; a signing file holds exactly one", keys.len())));
    }
    let (id, algorithm, secret) = keys.pop().expect("one key");
    Signer::new(id, algorithm, &secret).ok_or_else(|| {
        file(match algorithm {
            Algorithm::Ed25519 => format!("an ed25519 secret is 32 bytes, not {}", secret.len()),
            Algorithm::HmacSha256 => format!("an hmac-sha256 secret is 32 to 64 bytes, not {}", secret.len()),
        })
    })
}

fn read(path: &Path) -> Result<String, KeyFileError> {
    std::fs::read_to_string(path).map_err(|source| KeyFileError::Io { path: path.display().to_string(), source })
}

/// Loads `--verify-keys`.
pub fn load_verifier(path: &Path) -> Result<Verifier, KeyFileError> {
    let keys = parse_verifier_keys(&path.display().to_string(), &read(path)?)?;
    Verifier::new(keys).map_err(|e| KeyFileError::File { path: path.display().to_string(), message: e.to_string() })
}

/// Loads `--signing-key`.
pub fn load_signer(path: &Path) -> Result<Signer, KeyFileError> {
    parse_signing_key(&path.display().to_string(), &read(path)?)
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
}
