//! `fencing admin keygen`: a key pair (or an HMAC secret) for signed tokens.
//!
//! Writes `OUT` (the lock service's `--signing-key`, mode 0600) and
//! `OUT.pub` (the storage's `--verify-keys`; append it to the verify file
//! during a rotation). Neither file is ever overwritten.

use anyhow::Context;
use fencing_runtime::proof::{Algorithm, Signer};
use fencing_server::keys;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The algorithm on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum KeyAlgorithm {
    /// Ed25519: verifiers hold only the public key and cannot make proofs (recommended).
    Ed25519,
    /// HMAC-SHA256: one shared secret; every verifier holding it could also make proofs.
    HmacSha256,
}

impl From<KeyAlgorithm> for Algorithm {
    fn from(a: KeyAlgorithm) -> Algorithm {
        match a {
            KeyAlgorithm::Ed25519 => Algorithm::Ed25519,
            KeyAlgorithm::HmacSha256 => Algorithm::HmacSha256,
        }
    }
}

/// Generates the key and writes both files; what to print.
pub fn keygen(id: u32, algorithm: KeyAlgorithm, out: &Path) -> anyhow::Result<serde_json::Value> {
    let public = PathBuf::from(format!("{}.pub", out.display()));
    for path in [out, public.as_path()] {
        if path.exists() {
            return Err(super::usage(format!("{} exists; keys are never overwritten", path.display())));
        }
    }
    let algorithm = Algorithm::from(algorithm);
    let secret: [u8; 32] = rand::random();
    let signer = Signer::new(id, algorithm, &secret).expect("32 bytes suit both algorithms");
    let verifier = signer.verifier_key();
    write_new(out, &keys::line(id, algorithm, &secret), 0o600)?;
    write_new(&public, &keys::line(id, algorithm, &verifier.material), 0o644)?;
    Ok(serde_json::json!({
        "key_id": id,
        "algorithm": algorithm.name(),
        "signing_key": out,
        "verify_keys": public,
        "next": format!(
            "fencing serve --signing-key {} on the lock service; --verify-keys {} on the storage",
            out.display(),
            public.display()
        ),
    }))
}

fn write_new(path: &Path, line: &str, mode: u32) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    writeln!(file, "# fencing key, written by `fencing admin keygen`: <id> <algorithm> <hex>\n{line}")
        .and_then(|()| file.sync_all())
        .with_context(|| format!("write {}", path.display()))
}
