//! `fencing admin keygen`: a key pair (or an HMAC secret) for signed tokens.
//!
//! Writes `OUT` (the lock service's `--signing-key`, mode 0600) and, for
//! Ed25519, `OUT.pub` (the storage's `--verify-keys`, the public key; append
//! it to the verify file during a rotation). HMAC has nothing public: the
//! secret that makes proofs is the one that checks them, so no `.pub` is
//! written, and the storage's `--verify-keys` is a copy of `OUT`, kept 0600
//! like it. No file is ever overwritten.

use anyhow::Context;
use fencing_runtime::proof::{Algorithm, Signer};
use fencing_server::keys;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
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

/// Generates the key and writes its files; what to print.
pub fn keygen(id: u32, algorithm: KeyAlgorithm, out: &Path) -> anyhow::Result<serde_json::Value> {
    let algorithm = Algorithm::from(algorithm);
    let public = match algorithm {
        Algorithm::Ed25519 => Some(PathBuf::from(format!("{}.pub", out.display()))),
        Algorithm::HmacSha256 => None,
    };
    for path in std::iter::once(out).chain(public.as_deref()) {
        if path.exists() {
            return Err(super::usage(format!("{} exists; keys are never overwritten", path.display())));
        }
    }
    let secret: [u8; 32] = rand::random();
    let signer = Signer::new(id, algorithm, &secret).expect("32 bytes suit both algorithms");
    let verifier = signer.verifier_key();
    write_new(out, keys::SIGNING_HEADER, &keys::line(id, algorithm, &secret), 0o600)?;
    let (verify_keys, next) = match &public {
        Some(public) => {
            write_new(public, keys::VERIFY_HEADER, &keys::line(id, algorithm, &verifier.material), 0o644)?;
            let next = format!(
                "fencing serve --signing-key {} on the lock service; --verify-keys {} on the storage",
                out.display(),
                public.display()
            );
            (public.clone(), next)
        }
        None => {
            let next = format!(
                "fencing serve --signing-key {0} on the lock service; --verify-keys {0} on the storage: an HMAC \
                 secret signs and checks, so copy it to the storage as a file only its owner can read (0600)",
                out.display()
            );
            (out.to_path_buf(), next)
        }
    };
    Ok(serde_json::json!({
        "key_id": id,
        "algorithm": algorithm.name(),
        "signing_key": out,
        "verify_keys": verify_keys,
        "next": next,
    }))
}

fn write_new(path: &Path, header: &str, line: &str, mode: u32) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    // The mode a file is created with is masked by the umask; set it exactly.
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .and_then(|()| writeln!(file, "{header}\n{line}"))
        .and_then(|()| file.sync_all())
        .with_context(|| format!("write {}", path.display()))
}
