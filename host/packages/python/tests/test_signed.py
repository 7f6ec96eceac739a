"""Signed writes through `Guard.admit_signed`: every shared proof vector
(tests/vectors/proofs), keys the component refuses, and bad arguments."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fencing_guard import Admission, Fence, Guard, Keys, Reason, Rejection, Sequencer, VerifierKey
from fencing_guard.client import Client

from conftest import ROOT, load_cases

import json


def _proof_file() -> Path:
    base = Path(os.environ.get("FENCING_VECTORS", ROOT / "tests" / "vectors"))
    files = sorted((base / "proofs").glob("*.json"))
    assert files, f"no proof vectors in {base / 'proofs'}"
    return files[0]


def _keys(file: dict, names: list[str]) -> Keys:
    return Keys([VerifierKey(file["keys"][n]["id"], file["keys"][n]["algorithm"], bytes.fromhex(file["keys"][n]["material"])) for n in names])


def _fence(v):
    return None if v is None else Fence(v["lock"], v["high_water"], v.get("sequence"))


def _expected(e: dict):
    verdict = e["verdict"]
    if verdict == "admitted":
        return Admission(e["high_water"], e.get("sequence"), e["new_term"])
    if verdict == "stale_token":
        return Rejection(Reason.STALE_TOKEN, presented=e["presented"], high_water=e["high_water"])
    if verdict == "proof_unknown_key":
        return Rejection(Reason.PROOF_UNKNOWN_KEY, key_id=e["key_id"])
    return Rejection(Reason(verdict))


def test_every_proof_vector():
    file = json.loads(_proof_file().read_text())
    guard = Guard()
    for case in file["cases"]:
        s = case["sequencer"]
        got = guard.admit_signed(
            _fence(case["fence"]),
            Sequencer(s["lock"], s["token"], s.get("sequence")),
            bytes.fromhex(case["proof"]["hex"]),
            _keys(file, case["verifier"]),
            case["policy"].replace("_", "-"),
        )
        assert got == _expected(case["expect"]), case["name"]
    assert len(file["cases"]) >= 20


def test_a_remembered_proof_still_refuses_a_changed_byte():
    file = json.loads(_proof_file().read_text())
    case = next(c for c in file["cases"] if c["name"] == "signed-first-write-ed25519")
    keys, proof = _keys(file, case["verifier"]), bytes.fromhex(case["proof"]["hex"])
    s = case["sequencer"]
    presented = Sequencer(s["lock"], s["token"])
    guard = Guard()
    assert guard.admit_signed(None, presented, proof, keys).admitted
    assert guard.admit_signed(Fence(s["lock"], s["token"]), presented, proof, keys).admitted
    changed = proof[:-1] + bytes([proof[-1] ^ 1])
    assert guard.admit_signed(None, presented, changed, keys) == Rejection(Reason.PROOF_BAD)


def test_keys_the_component_refuses_and_bad_arguments():
    guard = Guard()
    presented = Sequencer("orders", 34)
    short = Keys([VerifierKey(3, "hmac-sha256", b"x" * 16)])
    with pytest.raises(ValueError, match="key 3 is not a key of its algorithm"):
        guard.admit_signed(None, presented, b"", short)
    twice = Keys([VerifierKey(1, "hmac-sha256", b"x" * 32), VerifierKey(1, "hmac-sha256", b"y" * 32)])
    with pytest.raises(ValueError, match="two keys have id 1"):
        guard.admit_signed(None, presented, b"", twice)
    with pytest.raises(ValueError, match="no keys given"):
        guard.admit_signed(None, presented, b"", Keys([]))
    with pytest.raises(ValueError, match="algorithm"):
        Keys([VerifierKey(1, "rsa", b"x" * 32)])
    with pytest.raises(TypeError, match="material"):
        Keys([VerifierKey(1, "ed25519", "not bytes")])
    good = Keys([VerifierKey(1, "hmac-sha256", b"k" * 32)])
    with pytest.raises(TypeError, match="proof"):
        guard.admit_signed(None, presented, "abc", good)
    with pytest.raises(TypeError, match="keys"):
        guard.admit_signed(None, presented, b"", [good])
    # After a refused set the guard still decides with good keys.
    assert guard.admit_signed(None, presented, b"", good) == Rejection(Reason.PROOF_MISSING)


def test_the_gc_pause_story_signed(signed_server):
    """Grants from a signing server, checked here with its public key; a forger
    is refused by the server and by this guard; the paused holder still loses."""
    base, public = signed_server
    line = next(l for l in public.read_text().splitlines() if l and not l.startswith("#"))
    ident, algorithm, material = line.split()
    keys = Keys([VerifierKey(int(ident), algorithm, bytes.fromhex(material))])
    client, guard = Client(base), Guard()
    a = client.acquire("orders", "a", 300)
    assert a.fencing_proof, "a signing server's grant carries a proof"
    presented = Sequencer("orders", a.fencing_token)
    assert guard.admit_signed(None, presented, bytes.fromhex(a.fencing_proof), keys).admitted
    assert client.write("orders", a.fencing_token, "/invoice", b"by a", proof=a.fencing_proof).accepted
    forged = Sequencer("orders", a.fencing_token + 1)
    assert guard.admit_signed(Fence("orders", a.fencing_token), forged, b"", keys).reason == Reason.PROOF_MISSING
    refused = client.write("orders", a.fencing_token + 1, "/invoice", b"forged")
    assert (refused.accepted, refused.reason) == (False, "proof_missing")
    time.sleep(0.4)  # A is paused past its lease.
    b = client.acquire("orders", "b", 10_000)
    assert client.write("orders", b.fencing_token, "/invoice", b"by b", proof=b.fencing_proof).accepted
    late = client.write("orders", a.fencing_token, "/invoice", b"late", proof=a.fencing_proof)
    assert (late.accepted, late.reason, late.high_water) == (False, "stale_token", b.fencing_token)
