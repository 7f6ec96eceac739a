//! Signed writes: the shared proof vectors (`tests/vectors/proofs/*.json`)
//! through the native guard and the component on both call paths, the
//! vectors' own bytes checked against the signer, and a guard serving
//! several verifiers in turn.
//!
//! `FENCING_WRITE_PROOF_VECTORS=1` fills in each key's `material` and each
//! proof's `hex` from its secret and description instead of checking them.

use fencing_runtime::key_text::{self, hex};
use fencing_runtime::proof::{Algorithm, ProofRejection, SignedRejection, Signer, VerifierKey};
use fencing_runtime::{
    Admission, CallPath, Fence, Guard, NativeGuard, Policy, Rejection, Sequencer, SignedDecision, Verifier, WasmGuard,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/proofs")
}

fn unhex(text: &str) -> Vec<u8> {
    key_text::unhex(text).expect("hex")
}

fn algorithm(v: &Value) -> Algorithm {
    key_text::algorithm(v.as_str().expect("an algorithm name")).unwrap()
}

fn signer(keys: &Value, name: &str) -> Signer {
    let k = &keys[name];
    let id = k["id"].as_u64().expect("id") as u32;
    Signer::new(id, algorithm(&k["algorithm"]), &unhex(k["secret"].as_str().expect("secret"))).expect("a secret")
}

/// The proof a case describes: made by `signer` for `lock` and `token`, then `change`d.
fn made(keys: &Value, p: &Value) -> Vec<u8> {
    let mut proof = match p["signer"].as_str() {
        Some(name) => signer(keys, name).prove(p["lock"].as_str().unwrap(), p["token"].as_u64().unwrap()),
        None => Vec::new(),
    };
    match p["change"].as_str() {
        None | Some("empty") => {}
        Some("truncate") => drop(proof.pop()),
        Some("flip-last-bit") => *proof.last_mut().unwrap() ^= 1,
        Some("version-2") => proof[0] = 2,
        Some("header-only") => proof.truncate(5),
        Some("key-id-7") => proof[1..5].copy_from_slice(&7u32.to_be_bytes()),
        Some(other) => panic!("unknown change {other}"),
    }
    proof
}

fn fence(v: &Value) -> Option<Fence> {
    (!v.is_null()).then(|| Fence {
        lock: v["lock"].as_str().unwrap().into(),
        high_water: v["high_water"].as_u64().unwrap(),
        sequence: v["sequence"].as_u64(),
    })
}

fn expected(e: &Value) -> SignedDecision {
    let n = |k: &str| e[k].as_u64().unwrap();
    let fence = |r| Err(SignedRejection::Fence(r));
    let proof = |r| Err(SignedRejection::Proof(r));
    match e["verdict"].as_str().unwrap() {
        "admitted" => Ok(Admission {
            high_water: n("high_water"),
            sequence: e["sequence"].as_u64(),
            new_term: e["new_term"].as_bool().unwrap(),
        }),
        "invalid_token" => fence(Rejection::InvalidToken),
        "wrong_lock" => fence(Rejection::WrongLock),
        "stale_token" => fence(Rejection::StaleToken { presented: n("presented"), high_water: n("high_water") }),
        "proof_missing" => proof(ProofRejection::Missing),
        "proof_malformed" => proof(ProofRejection::Malformed),
        "proof_bad" => proof(ProofRejection::BadProof),
        "proof_unknown_key" => proof(ProofRejection::UnknownKey { key_id: n("key_id") as u32 }),
        other => panic!("unknown verdict {other}"),
    }
}

fn guards() -> Vec<(&'static str, Box<dyn Guard>)> {
    vec![
        ("native", Box::new(NativeGuard)),
        ("wasm-direct", Box::new(WasmGuard::embedded(None).unwrap())),
        ("wasm-component", Box::new(WasmGuard::embedded_on(None, CallPath::Component).unwrap())),
    ]
}

#[test]
fn every_guard_agrees_with_the_proof_vectors() {
    let write = std::env::var_os("FENCING_WRITE_PROOF_VECTORS").is_some();
    let guards = guards();
    let mut checked = 0;
    for entry in std::fs::read_dir(dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let keys = file["keys"].clone();
        for (name, key) in file["keys"].as_object_mut().unwrap() {
            let material = hex(&signer(&keys, name).verifier_key().material);
            if write {
                key["material"] = material.into();
            } else {
                assert_eq!(key["material"].as_str(), Some(material.as_str()), "{}: key {name}", path.display());
            }
        }
        let keys = file["keys"].clone();
        for case in file["cases"].as_array_mut().unwrap() {
            let name = case["name"].as_str().unwrap().to_owned();
            let proof = made(&keys, &case["proof"]);
            if write {
                case["proof"]["hex"] = hex(&proof).into();
            } else {
                assert_eq!(case["proof"]["hex"].as_str(), Some(hex(&proof).as_str()), "{name}: proof bytes");
            }
            let verifier_keys: Vec<VerifierKey> = case["verifier"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| {
                    let k = &keys[k.as_str().unwrap()];
                    VerifierKey {
                        id: k["id"].as_u64().unwrap() as u32,
                        algorithm: algorithm(&k["algorithm"]),
                        material: unhex(k["material"].as_str().unwrap()),
                    }
                })
                .collect();
            let verifier = Verifier::new(verifier_keys).unwrap();
            let s = &case["sequencer"];
            let presented = Sequencer {
                lock: s["lock"].as_str().unwrap().into(),
                token: s["token"].as_u64().unwrap(),
                sequence: s["sequence"].as_u64(),
            };
            let policy: Policy = case["policy"].as_str().unwrap().replace('_', "-").parse().unwrap();
            let want = expected(&case["expect"]);
            for (guard, g) in &guards {
                let got = g.admit_signed(&verifier, fence(&case["fence"]).as_ref(), &presented, &proof, policy);
                assert_eq!(got.as_ref(), Ok(&want), "{name} on {guard}");
            }
            checked += 1;
        }
        if write {
            std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap() + "\n").unwrap();
        }
    }
    assert!(checked >= 20, "{checked} cases");
}

/// One guard, several verifiers in turn (a Wasm worker installs each one's
/// keys when it changes), and a remembered proof that still refuses a
/// changed byte.
#[test]
fn a_guard_follows_each_verifier_and_remembers_only_exact_proofs() {
    let old = Signer::new(1, Algorithm::Ed25519, &[1; 32]).unwrap();
    let new = Signer::new(2, Algorithm::HmacSha256, &[2; 48]).unwrap();
    let both = Verifier::new(vec![old.verifier_key(), new.verifier_key()]).unwrap();
    let only_new = Verifier::new(vec![new.verifier_key()]).unwrap();
    let presented = Sequencer { lock: "orders".into(), token: 34, sequence: None };
    let proof = old.prove("orders", 34);
    let mut flipped = proof.clone();
    flipped[20] ^= 0x40;
    for (name, g) in guards() {
        for _ in 0..3 {
            let admitted = g.admit_signed(&both, None, &presented, &proof, Policy::NonDecreasing).unwrap();
            assert!(admitted.is_ok(), "{name}: {admitted:?}");
            let retired = g.admit_signed(&only_new, None, &presented, &proof, Policy::NonDecreasing).unwrap();
            assert_eq!(retired, Err(SignedRejection::Proof(ProofRejection::UnknownKey { key_id: 1 })), "{name}");
            let changed = g.admit_signed(&both, None, &presented, &flipped, Policy::NonDecreasing).unwrap();
            assert_eq!(changed, Err(SignedRejection::Proof(ProofRejection::BadProof)), "{name}");
        }
        let by_new = new.prove("orders", 35);
        let next = Sequencer { token: 35, ..presented.clone() };
        let stored = Fence { lock: "orders".into(), high_water: 35, sequence: None };
        assert!(g.admit_signed(&only_new, None, &next, &by_new, Policy::NonDecreasing).unwrap().is_ok(), "{name}");
        // The GC-pause story, signed: the paused holder's proof is real, its token stale.
        let paused = g.admit_signed(&both, Some(&stored), &presented, &proof, Policy::NonDecreasing).unwrap();
        let stale = Rejection::StaleToken { presented: 34, high_water: 35 };
        assert_eq!(paused, Err(SignedRejection::Fence(stale)), "{name}");
    }
}

/// `admit_with_keys`: with keys, the signed decision; without, the unsigned
/// one (the proof unread), its refusals as fence refusals.
#[test]
fn admit_with_keys_is_signed_only_with_a_verifier() {
    let signer = Signer::new(3, Algorithm::HmacSha256, &[3; 32]).unwrap();
    let keys = Verifier::new(vec![signer.verifier_key()]).unwrap();
    let stored = Fence { lock: "orders".into(), high_water: 35, sequence: None };
    let forged = Sequencer { lock: "orders".into(), token: 36, sequence: None };
    let stale = Sequencer { token: 34, ..forged.clone() };
    let p = Policy::NonDecreasing;
    for (name, g) in guards() {
        let signed = g.admit_with_keys(Some(&keys), Some(&stored), &forged, b"", p).unwrap();
        assert_eq!(signed, Err(SignedRejection::Proof(ProofRejection::Missing)), "{name}");
        let unsigned = g.admit_with_keys(None, Some(&stored), &forged, b"not a proof", p).unwrap();
        assert_eq!(unsigned, g.admit(Some(&stored), &forged, p).unwrap().map_err(SignedRejection::Fence), "{name}");
        assert!(unsigned.is_ok(), "{name}: without keys the number alone decides");
        let late = g.admit_with_keys(None, Some(&stored), &stale, b"", p).unwrap();
        let refused = Rejection::StaleToken { presented: 34, high_water: 35 };
        assert_eq!(late, Err(SignedRejection::Fence(refused)), "{name}");
    }
}
