//! Proofs that the lock service granted a token, written once.
//!
//! A fencing token alone shows only a number: a client allowed to write can
//! present the high-water mark + 1 and shut the real holder out. With signing
//! on, the lock service attaches a proof to every grant, and the check admits
//! a write only if its proof was made by a key the storage trusts for exactly
//! that lock and token.
//!
//! A proof is `[1][key id: u32, big-endian][tag]`: the format version, the
//! id of the key that made it, and the tag over the message
//! `"fencing-proof-v1\0" || key id (4 bytes BE) || token (8 bytes BE) ||
//! lock name (its UTF-8 bytes, to the end)`. The tag is an Ed25519 signature
//! (64 bytes, checked with `verify_strict`) or an HMAC-SHA256 (32 bytes,
//! compared in constant time), as the key's [`Algorithm`] says.
//!
//! A [`Keyring`] holds the keys a verifier trusts (several at once, by id,
//! so keys can be rotated) and remembers the proofs it has verified for each
//! (lock, token): a later write under the same token with byte-identical
//! proof bytes is admitted by a comparison, not a second verification. The
//! memory only ever holds proofs that verified under the current keys, so
//! the answer is the same as verifying every time; installing keys empties
//! it.
//!
//! The functions are pure: no clocks, no I/O, no randomness (a [`Signer`]
//! is made from secret bytes its caller drew).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The format version, the proof's first byte.
pub const VERSION: u8 = 1;
/// What every signed message begins with, so a proof can be nothing else.
pub const DOMAIN: &[u8] = b"fencing-proof-v1\0";
/// The most keys one keyring holds.
pub const MAX_KEYS: usize = 64;
/// Bytes of an HMAC key: at least 32 (256 bits), at most 64 (one SHA-256 block).
pub const HMAC_KEY_BYTES: core::ops::RangeInclusive<usize> = 32..=64;
/// Verified proofs a keyring remembers before it starts over.
const REMEMBERED: usize = 4096;

/// How a key makes and checks tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
pub enum Algorithm {
    /// Ed25519: the lock service signs with a private key; verifiers hold
    /// only the 32-byte public key and cannot make proofs.
    Ed25519,
    /// HMAC-SHA256: one shared secret of 32 to 64 bytes; every verifier
    /// holding it could also make proofs.
    HmacSha256,
}

impl Algorithm {
    /// Bytes of a tag made with this algorithm.
    pub fn tag_len(self) -> usize {
        match self {
            Algorithm::Ed25519 => 64,
            Algorithm::HmacSha256 => 32,
        }
    }

    /// The name in key files and on command lines (`ed25519`, `hmac-sha256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ed25519 => "ed25519",
            Algorithm::HmacSha256 => "hmac-sha256",
        }
    }
}

/// One key a verifier trusts: the public key (Ed25519) or the shared secret (HMAC).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct VerifierKey {
    /// The id proofs name it by.
    pub id: u32,
    /// How it checks tags.
    pub algorithm: Algorithm,
    /// 32 bytes of Ed25519 public key, or 32 to 64 bytes of HMAC secret.
    pub material: Vec<u8>,
}

/// Why a set of keys cannot be installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// No key at all: a verifier with no key would refuse every proof.
    NoKeys,
    /// More than [`MAX_KEYS`] keys.
    TooMany,
    /// Two keys with this id.
    DuplicateId(u32),
    /// This key's material is not a key of its algorithm (an Ed25519 public
    /// key that is not 32 bytes or not a curve point; an HMAC secret outside
    /// [`HMAC_KEY_BYTES`]).
    BadKey(u32),
}

/// Why a proof does not show that the lock service granted this token for this lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "reason"))]
pub enum ProofRejection {
    /// No keys are installed: signing is on but the verifier was given none.
    NoKeys,
    /// The write carried no proof.
    Missing,
    /// Not a proof of this format: another version, too short, or a tag of
    /// the wrong length for its key.
    Malformed,
    /// The proof names a key this verifier does not hold (never trusted, or retired).
    UnknownKey {
        /// The key id the proof names.
        key_id: u32,
    },
    /// The tag does not verify for this lock and token under the named key:
    /// made up, or made for another lock or token.
    BadProof,
}

impl ProofRejection {
    /// The verdict code of this rejection (`rules::code::PROOF_*`).
    pub fn code(self) -> u8 {
        use crate::rules::code;
        match self {
            ProofRejection::NoKeys => code::PROOF_NO_KEYS,
            ProofRejection::Missing => code::PROOF_MISSING,
            ProofRejection::Malformed => code::PROOF_MALFORMED,
            ProofRejection::UnknownKey { .. } => code::PROOF_UNKNOWN_KEY,
            ProofRejection::BadProof => code::PROOF_BAD,
        }
    }

    /// The rejection a proof code stands for, its evidence taken from the
    /// proof it was given for; `None` for any other code, or an unknown-key
    /// code for bytes that name no key.
    pub fn from_code(c: u8, proof: &[u8]) -> Option<ProofRejection> {
        use crate::rules::code;
        Some(match c {
            code::PROOF_NO_KEYS => ProofRejection::NoKeys,
            code::PROOF_MISSING => ProofRejection::Missing,
            code::PROOF_MALFORMED => ProofRejection::Malformed,
            code::PROOF_UNKNOWN_KEY => ProofRejection::UnknownKey { key_id: split(proof).ok()?.0 },
            code::PROOF_BAD => ProofRejection::BadProof,
            _ => return None,
        })
    }
}

/// A write's verdict under signing: its proof is checked first, then the fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedRejection {
    /// The proof does not show the lock service granted the token.
    Proof(ProofRejection),
    /// The proof holds, and the fence refuses the write.
    Fence(crate::rules::Rejection),
}

impl SignedRejection {
    /// The stable snake_case reason of the proof's or the fence's refusal.
    pub fn reason(&self) -> &'static str {
        match self {
            SignedRejection::Proof(r) => r.reason(),
            SignedRejection::Fence(r) => r.reason(),
        }
    }
}

/// Verifies the proof under `keys` (`None`: none installed), then decides the
/// write exactly as [`crate::rules::admit`]: the one composition every host runs.
pub fn admit_signed(
    keys: Option<&mut Keyring>,
    current: Option<&crate::rules::Fence>,
    presented: &crate::rules::Sequencer,
    proof: &[u8],
    policy: crate::rules::Policy,
) -> Result<crate::rules::Admission, SignedRejection> {
    let keys = keys.ok_or(SignedRejection::Proof(ProofRejection::NoKeys))?;
    keys.verify(&presented.lock, presented.token, proof).map_err(SignedRejection::Proof)?;
    crate::rules::admit(current, presented, policy).map_err(SignedRejection::Fence)
}

impl core::fmt::Display for KeyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyError::NoKeys => f.write_str("no verifier keys given"),
            KeyError::TooMany => write!(f, "more than {MAX_KEYS} verifier keys"),
            KeyError::DuplicateId(id) => write!(f, "two verifier keys have id {id}"),
            KeyError::BadKey(id) => write!(f, "verifier key {id} is not a key of its algorithm"),
        }
    }
}

impl core::error::Error for KeyError {}

impl core::fmt::Display for ProofRejection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ProofRejection::NoKeys => f.write_str("no verifier keys are installed"),
            ProofRejection::Missing => f.write_str("the write carries no proof"),
            ProofRejection::Malformed => f.write_str("the proof is not of this format"),
            ProofRejection::UnknownKey { key_id } => write!(f, "the proof names key {key_id}, which is not trusted"),
            ProofRejection::BadProof => f.write_str("the proof was not made for this lock and token by its key"),
        }
    }
}

impl core::error::Error for ProofRejection {}

impl ProofRejection {
    /// Stable snake_case reason, for HTTP bodies, SQL errors, metrics and logs.
    pub fn reason(self) -> &'static str {
        match self {
            ProofRejection::NoKeys => "proof_no_keys",
            ProofRejection::Missing => "proof_missing",
            ProofRejection::Malformed => "proof_malformed",
            ProofRejection::UnknownKey { .. } => "proof_unknown_key",
            ProofRejection::BadProof => "proof_bad",
        }
    }
}

/// A key installed in a keyring, parsed once.
enum Checker {
    Ed25519(VerifyingKey),
    Hmac(Vec<u8>),
}

/// The keys a verifier trusts, and the proofs it has verified.
pub struct Keyring {
    keys: Vec<(u32, Checker)>,
    /// token -> (lock, proof bytes) verified under the current keys.
    verified: BTreeMap<u64, Vec<(String, Vec<u8>)>>,
    remembered: usize,
}

impl Keyring {
    /// Parses `keys`, refusing an empty set, too many, duplicate ids and bad material.
    pub fn new(keys: &[VerifierKey]) -> Result<Keyring, KeyError> {
        if keys.is_empty() {
            return Err(KeyError::NoKeys);
        }
        if keys.len() > MAX_KEYS {
            return Err(KeyError::TooMany);
        }
        let mut parsed: Vec<(u32, Checker)> = Vec::with_capacity(keys.len());
        for key in keys {
            if parsed.iter().any(|(id, _)| *id == key.id) {
                return Err(KeyError::DuplicateId(key.id));
            }
            parsed.push((key.id, Checker::parse(key).ok_or(KeyError::BadKey(key.id))?));
        }
        Ok(Keyring { keys: parsed, verified: BTreeMap::new(), remembered: 0 })
    }

    /// Whether `proof` shows the lock service granted `token` for `lock`.
    pub fn verify(&mut self, lock: &str, token: u64, proof: &[u8]) -> Result<(), ProofRejection> {
        if self.seen(lock, token, proof) {
            return Ok(());
        }
        let (key_id, tag) = split(proof)?;
        let checker = self.keys.iter().find(|(id, _)| *id == key_id).map(|(_, c)| c);
        let checker = checker.ok_or(ProofRejection::UnknownKey { key_id })?;
        if tag.len() != checker.algorithm().tag_len() {
            return Err(ProofRejection::Malformed);
        }
        if !checker.verifies(&message(key_id, lock, token), tag) {
            return Err(ProofRejection::BadProof);
        }
        self.remember(lock, token, proof);
        Ok(())
    }

    /// Whether exactly these proof bytes were verified for this lock and token.
    fn seen(&self, lock: &str, token: u64, proof: &[u8]) -> bool {
        self.verified.get(&token).is_some_and(|entries| entries.iter().any(|(l, p)| l == lock && p == proof))
    }

    fn remember(&mut self, lock: &str, token: u64, proof: &[u8]) {
        if self.remembered >= REMEMBERED {
            self.verified.clear();
            self.remembered = 0;
        }
        self.verified.entry(token).or_default().push((String::from(lock), proof.to_vec()));
        self.remembered += 1;
    }
}

impl Checker {
    fn parse(key: &VerifierKey) -> Option<Checker> {
        match key.algorithm {
            Algorithm::Ed25519 => {
                let bytes: [u8; 32] = key.material.as_slice().try_into().ok()?;
                VerifyingKey::from_bytes(&bytes).ok().map(Checker::Ed25519)
            }
            Algorithm::HmacSha256 => {
                HMAC_KEY_BYTES.contains(&key.material.len()).then(|| Checker::Hmac(key.material.clone()))
            }
        }
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            Checker::Ed25519(_) => Algorithm::Ed25519,
            Checker::Hmac(_) => Algorithm::HmacSha256,
        }
    }

    fn verifies(&self, message: &[u8], tag: &[u8]) -> bool {
        match self {
            Checker::Ed25519(key) => {
                Signature::from_slice(tag).is_ok_and(|sig| key.verify_strict(message, &sig).is_ok())
            }
            Checker::Hmac(secret) => hmac(secret, message).verify_slice(tag).is_ok(),
        }
    }
}

/// The key id and tag of a proof of this format.
fn split(proof: &[u8]) -> Result<(u32, &[u8]), ProofRejection> {
    match proof {
        [] => Err(ProofRejection::Missing),
        [VERSION, a, b, c, d, tag @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), tag)),
        _ => Err(ProofRejection::Malformed),
    }
}

/// The message a proof's tag covers.
pub fn message(key_id: u32, lock: &str, token: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(DOMAIN.len() + 12 + lock.len());
    m.extend_from_slice(DOMAIN);
    m.extend_from_slice(&key_id.to_be_bytes());
    m.extend_from_slice(&token.to_be_bytes());
    m.extend_from_slice(lock.as_bytes());
    m
}

fn hmac(secret: &[u8], message: &[u8]) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(message);
    mac
}

/// What the lock service makes proofs with.
pub struct Signer {
    id: u32,
    secret: Secret,
}

enum Secret {
    Ed25519(Box<SigningKey>),
    Hmac(Vec<u8>),
}

impl Signer {
    /// A signer from secret bytes: an Ed25519 seed (exactly 32 bytes) or an
    /// HMAC secret ([`HMAC_KEY_BYTES`]). `None` for any other length.
    pub fn new(id: u32, algorithm: Algorithm, secret: &[u8]) -> Option<Signer> {
        let secret = match algorithm {
            Algorithm::Ed25519 => Secret::Ed25519(Box::new(SigningKey::from_bytes(secret.try_into().ok()?))),
            Algorithm::HmacSha256 => Secret::Hmac(HMAC_KEY_BYTES.contains(&secret.len()).then(|| secret.to_vec())?),
        };
        Some(Signer { id, secret })
    }

    /// The key a verifier installs to check this signer's proofs.
    pub fn verifier_key(&self) -> VerifierKey {
        let (algorithm, material) = match &self.secret {
            Secret::Ed25519(key) => (Algorithm::Ed25519, key.verifying_key().to_bytes().to_vec()),
            Secret::Hmac(secret) => (Algorithm::HmacSha256, secret.clone()),
        };
        VerifierKey { id: self.id, algorithm, material }
    }

    /// The proof that `token` was granted for `lock`.
    pub fn prove(&self, lock: &str, token: u64) -> Vec<u8> {
        let message = message(self.id, lock, token);
        let mut proof = Vec::with_capacity(5 + 64);
        proof.push(VERSION);
        proof.extend_from_slice(&self.id.to_be_bytes());
        match &self.secret {
            Secret::Ed25519(key) => proof.extend_from_slice(&key.sign(&message).to_bytes()),
            Secret::Hmac(secret) => proof.extend_from_slice(&hmac(secret, &message).finalize().into_bytes()),
        }
        proof
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signers() -> [Signer; 2] {
        [
            Signer::new(7, Algorithm::Ed25519, &[7; 32]).unwrap(),
            Signer::new(9, Algorithm::HmacSha256, &[9; 32]).unwrap(),
        ]
    }

    #[test]
    fn a_proof_verifies_for_its_lock_and_token_only() {
        for signer in signers() {
            let mut keys = Keyring::new(&[signer.verifier_key()]).unwrap();
            let proof = signer.prove("orders", 34);
            assert_eq!(keys.verify("orders", 34, &proof), Ok(()));
            assert_eq!(keys.verify("orders", 34, &proof), Ok(()), "remembered");
            assert_eq!(keys.verify("orders", 35, &proof), Err(ProofRejection::BadProof));
            assert_eq!(keys.verify("order", 34, &proof), Err(ProofRejection::BadProof));
            assert_eq!(keys.verify("orders", 34, &[]), Err(ProofRejection::Missing));
            assert_eq!(keys.verify("orders", 34, &proof[..proof.len() - 1]), Err(ProofRejection::Malformed));
            assert_eq!(keys.verify("orders", 34, &proof[..4]), Err(ProofRejection::Malformed));
            let mut flipped = proof.clone();
            *flipped.last_mut().unwrap() ^= 1;
            assert_eq!(keys.verify("orders", 34, &flipped), Err(ProofRejection::BadProof), "not taken from memory");
            let mut other_version = proof.clone();
            other_version[0] = 2;
            assert_eq!(keys.verify("orders", 34, &other_version), Err(ProofRejection::Malformed));
        }
    }

    #[test]
    fn keys_are_named_by_id_and_checked_when_installed() {
        let [ed, mac] = signers();
        let mut keys = Keyring::new(&[mac.verifier_key()]).unwrap();
        assert_eq!(keys.verify("orders", 34, &ed.prove("orders", 34)), Err(ProofRejection::UnknownKey { key_id: 7 }));
        assert_eq!(Keyring::new(&[]).err(), Some(KeyError::NoKeys));
        let twice = [ed.verifier_key(), ed.verifier_key()];
        assert_eq!(Keyring::new(&twice).err(), Some(KeyError::DuplicateId(7)));
        let short = VerifierKey { id: 3, algorithm: Algorithm::HmacSha256, material: alloc::vec![1; 16] };
        assert_eq!(Keyring::new(&[short]).err(), Some(KeyError::BadKey(3)));
        let ed_key = |b: u8| VerifierKey { id: 4, algorithm: Algorithm::Ed25519, material: alloc::vec![b; 32] };
        let not_a_point = (0..=255).map(ed_key).find(|k| Keyring::new(core::slice::from_ref(k)).is_err());
        assert_eq!(
            Keyring::new(&[not_a_point.expect("some 32 equal bytes are no point")]).err(),
            Some(KeyError::BadKey(4))
        );
        let short = VerifierKey { material: alloc::vec![1; 31], ..ed.verifier_key() };
        assert_eq!(Keyring::new(&[short]).err(), Some(KeyError::BadKey(7)));
        let many: Vec<VerifierKey> = (0..=MAX_KEYS as u32).map(|id| VerifierKey { id, ..mac.verifier_key() }).collect();
        assert_eq!(Keyring::new(&many).err(), Some(KeyError::TooMany));
        assert!(Signer::new(1, Algorithm::Ed25519, &[0; 31]).is_none());
    }

    #[test]
    fn the_memory_starts_over_and_still_verifies() {
        let [_, mac] = signers();
        let mut keys = Keyring::new(&[mac.verifier_key()]).unwrap();
        for token in 1..=(REMEMBERED as u64 + 10) {
            assert_eq!(keys.verify("l", token, &mac.prove("l", token)), Ok(()));
        }
        assert_eq!(keys.remembered, 10, "started over once full");
        assert_eq!(keys.verify("l", 1, &mac.prove("l", 2)), Err(ProofRejection::BadProof));
        assert_eq!(keys.verify("l", 1, &mac.prove("l", 1)), Ok(()), "verified again once forgotten");
    }
}
