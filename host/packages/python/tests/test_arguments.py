"""The shared argument vectors (tests/vectors/arguments, format in
tests/vectors/README.md) through the package's own entry points: it must
refuse exactly the cases the file refuses, with an `ArgumentError` (a
`ValueError`) carrying the rule's code, and take every other one.

What the package takes, and so which cases run:
- `name`: the `text` cases, as the lock of a fence, of a sequencer, of a
  batch and of a signed write, and through `check_name`. The `bytes_hex`
  cases are skipped: the package's names are `str`, never bytes;
- `policy`: every case, as the policy of `admit`, `admit_batch`,
  `admit_stream` and `admit_signed`;
- `number`: tokens are `int`s, not text. A case whose text is decimal
  digits runs as the `int` it spells (`ok`, or `number_too_large` above
  2**64-1); the other refusals (a sign, a space, a leading zero) are about
  text the package never takes, and are skipped;
- `from_signed`: the value as an `int` token (`number_negative` below 0);
- `to_signed`: skipped: the package hands no token to a signed 64-bit integer;
- `proof`: proofs are bytes. A case whose text is hex runs as its bytes
  (`ok`, or `proof_too_long` past 256 bytes); `proof_not_hex` cases are
  about text and are skipped.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

import pytest
from conftest import ROOT

from fencing_guard import (
    Admission,
    ArgumentError,
    Fence,
    Guard,
    Keys,
    Policy,
    Reason,
    Rejection,
    Sequencer,
    VerifierKey,
    check_name,
)

_BASE = Path(os.environ.get("FENCING_VECTORS", ROOT / "tests" / "vectors"))
CASES = [c for f in sorted((_BASE / "arguments").glob("*.json")) for c in json.loads(f.read_text())["cases"]]
_PROOFS = json.loads(sorted((_BASE / "proofs").glob("*.json"))[0].read_text())
_KEY = _PROOFS["keys"]["ed-7"]
KEYS = Keys([VerifierKey(_KEY["id"], _KEY["algorithm"], bytes.fromhex(_KEY["material"]))])
#: One guard for every case: a refused name is never interned, so each entry point checks it again.
GUARD = Guard()


def text(case: dict) -> str:
    return case["text"] * case.get("repeat", 1)


def refused(call: Callable[[], object], code: str) -> None:
    """`call` raises the package's ArgumentError with `code`, named at the end of its message."""
    with pytest.raises(ArgumentError) as e:
        call()
    assert isinstance(e.value, ValueError)
    assert e.value.code == code, str(e.value)
    assert str(e.value).endswith(f"({code})")


def skipped(case: dict) -> bool:
    """True for a case of a kind, or a form, the package does not take (see the module's doc)."""
    kind = case["kind"]
    if kind == "name":
        return "bytes_hex" in case
    if kind == "number":
        return not re.fullmatch(r"[0-9]+", text(case)) or case["expect"] not in ("ok", "number_too_large")
    if kind == "proof":
        return case["expect"] == "proof_not_hex"
    return kind == "to_signed"


def run_name(case: dict) -> None:
    name = text(case)
    entry_points = [
        lambda g: g.admit(None, Sequencer(name, 1)),
        lambda g: g.admit(Fence(name, 1), Sequencer("other", 2)),
        lambda g: g.admit_batch(Fence("other", 1), name, [2]),
        lambda g: g.admit_columns(None, name, [1]),
        lambda g: g.admit_signed(None, Sequencer(name, 1), b"", KEYS),
    ]
    if case["expect"] == "ok":
        assert check_name(name) == name
        assert GUARD.admit(None, Sequencer(name, 1)) == Admission(1, None, True)
        assert GUARD.admit(Fence(name, 1), Sequencer(name, 1)) == Admission(1, None, False)
        for call in entry_points:
            call(GUARD)
        return
    refused(lambda: check_name(name), case["expect"])
    for call in entry_points:
        refused(lambda: call(GUARD), case["expect"])


def run_policy(case: dict) -> None:
    policy = text(case)
    guard = GUARD
    entry_points = [
        lambda: guard.admit(Fence("l", 5), Sequencer("l", 5), policy),
        lambda: guard.admit_batch(Fence("l", 5), "l", [5], policy),
        lambda: guard.admit_stream(5, [5], policy),
        lambda: guard.admit_signed(None, Sequencer("l", 5), b"", KEYS, policy),
    ]
    if case["expect"] != "ok":
        for call in entry_points:
            refused(call, case["expect"])
        return
    assert Policy(policy).value == case["value"]
    reuse = guard.admit(Fence("l", 5), Sequencer("l", 5), policy)
    strict = case["value"] == "strictly-increasing"
    assert reuse == (Rejection(Reason.TOKEN_REUSED, presented=5, high_water=5) if strict else Admission(5, None, False))
    for call in entry_points:
        call()


def run_token(case: dict, value: int) -> None:
    """`value` as a token, a sequence and a fence's mark."""
    guard = GUARD
    entry_points = [
        lambda: guard.admit(None, Sequencer("l", value)),
        lambda: guard.admit(None, Sequencer("l", 1, value)),
        lambda: guard.admit(Fence("l", value), Sequencer("l", 1)),
        lambda: guard.admit_batch(None, "l", [value]),
        lambda: guard.admit_columns(None, "l", [1], [value]),
        lambda: guard.admit_stream(value, [1]),
    ]
    if case["expect"] != "ok":
        for call in entry_points:
            refused(call, case["expect"])
        return
    want = Rejection(Reason.INVALID_TOKEN) if value == 0 else Admission(value, None, True)
    assert guard.admit(None, Sequencer("l", value)) == want
    for call in entry_points:
        call()


def run_proof(case: dict) -> None:
    proof = bytes.fromhex(text(case))
    call = lambda: GUARD.admit_signed(None, Sequencer("l", 1), proof, KEYS)  # noqa: E731
    if case["expect"] != "ok":
        refused(call, case["expect"])
        return
    assert proof.hex() == case.get("value", proof.hex())
    # Taken: the proof is the component's to judge (empty: missing; these bytes: not a proof).
    assert call() in (Rejection(Reason.PROOF_MISSING), Rejection(Reason.PROOF_MALFORMED))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_argument_vector(case: dict) -> None:
    if skipped(case):
        pytest.skip(f"the package does not take a {case['kind']} in this form")
    kind = case["kind"]
    if kind == "name":
        run_name(case)
    elif kind == "policy":
        run_policy(case)
    elif kind == "number":
        run_token(case, int(text(case)))
    elif kind == "from_signed":
        run_token(case, case["value"])
    elif kind == "proof":
        run_proof(case)
    else:
        raise AssertionError(f"unknown kind {kind}")


def test_every_kind_the_package_takes_has_refusals_and_acceptances() -> None:
    ran = [c for c in CASES if not skipped(c)]
    for kind in ("name", "policy", "number", "from_signed", "proof"):
        expects = {c["expect"] == "ok" for c in ran if c["kind"] == kind}
        assert expects == {True, False}, kind
    assert len(ran) >= 45, len(ran)
