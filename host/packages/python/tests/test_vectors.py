"""Every shared vector, and 10,000 random cases expecting the Rust rules'
verdicts, through the package's `Guard`.

The contract takes any string as a lock name; the package takes the names
the hosts' name rule accepts (`check_name`). A case whose lock names that
rule refuses (the empty name, edge whitespace, more than 256 characters, a
NUL byte in a random case) must be refused with the rule's code, as every
host refuses it, instead of decided."""

from __future__ import annotations

from typing import Any, Optional

import pytest
from conftest import load_cases, vector_files

from fencing_guard import Admission, ArgumentError, BatchWrite, Decision, Fence, Guard, Sequencer, check_name

GUARD = Guard()


def fence_of(f: Optional[dict]) -> Optional[Fence]:
    return None if f is None else Fence(f["lock"], f["high_water"], f.get("sequence"))


def spec(d: Decision) -> dict[str, Any]:
    """A decision in the vectors' vocabulary."""
    if isinstance(d, Admission):
        return {"verdict": "admitted", "high_water": d.high_water, "sequence": d.sequence, "new_term": d.new_term}
    out: dict[str, Any] = {"verdict": d.reason.value}
    for name in ("token", "presented", "high_water", "last"):
        value = getattr(d, name)
        if value is not None or (name == "presented" and d.reason.value == "sequence_regressed"):
            out[name] = value
    return out


def lock_names(case: dict) -> list[str]:
    """The case's lock names in the order the guard interns them: the fence's, then the presented one."""
    names = [case["fence"]["lock"]] if case.get("fence") else []
    if case["kind"] == "admit":
        names.append(case["sequencer"]["lock"])
    elif case["kind"] == "batch":
        names.append(case["lock"])
    return names


def refusal(case: dict) -> Optional[dict]:
    """`{"refused": code}` for the first of the case's lock names the name rule refuses, else None."""
    for name in lock_names(case):
        try:
            check_name(name)
        except ArgumentError as e:
            return {"refused": e.code}
    return None


def expected(case: dict) -> Any:
    refused = refusal(case)
    if refused is not None:
        return refused
    def verdict(v: dict) -> dict:
        v = dict(v)
        if v["verdict"] == "admitted":
            v.setdefault("sequence", None)
        if v["verdict"] == "sequence_regressed":
            v.setdefault("presented", None)
        return v

    e = case["expect"]
    if case["kind"] == "admit":
        return verdict(e)
    if case["kind"] == "batch":
        fence = e["fence"]
        return {
            "verdicts": [verdict(v) for v in e["verdicts"]],
            "fence": None if fence is None else {"high_water": fence["high_water"], "sequence": fence.get("sequence")},
        }
    return {"verdicts": e["verdicts"], "high_water": e["high_water"]}


def run(guard: Guard, case: dict) -> Any:
    try:
        return decide(guard, case)
    except ArgumentError as e:
        assert str(e).endswith(f"({e.code})")
        return {"refused": e.code}


def decide(guard: Guard, case: dict) -> Any:
    # The vectors name policies as the HTTP API does; the package takes the contract's names.
    policy = case["policy"].replace("_", "-")
    if case["kind"] == "admit":
        s = case["sequencer"]
        return spec(guard.admit(fence_of(case["fence"]), Sequencer(s["lock"], s["token"], s.get("sequence")), policy))
    if case["kind"] == "batch":
        writes = [BatchWrite(w["token"], w.get("sequence")) for w in case["writes"]]
        out = guard.admit_batch(fence_of(case["fence"]), case["lock"], writes, policy)
        fence = None if out.fence is None else {"high_water": out.fence.high_water, "sequence": out.fence.sequence}
        return {"verdicts": [spec(v) for v in out.verdicts], "fence": fence}
    assert case["kind"] == "stream", case["kind"]
    out = guard.admit_stream(case["high_water"], case["tokens"], policy)
    return {"verdicts": [v.value for v in out.verdicts], "high_water": out.high_water}


SHARED = [c for f in vector_files() for c in load_cases(f)]


@pytest.mark.parametrize("case", SHARED, ids=[c["name"] for c in SHARED])
def test_shared_vector(case: dict) -> None:
    assert run(GUARD, case) == expected(case)


def test_shared_vectors_cover_every_kind() -> None:
    assert {c["kind"] for c in SHARED} == {"admit", "batch", "stream"}


def test_names_the_rule_refuses_are_refused_by_its_code() -> None:
    """The shared cases whose lock names the hosts refuse: each refused by the
    package with the rule's code (never decided), the others all decided."""
    refused = {c["name"]: refusal(c)["refused"] for c in SHARED if refusal(c) is not None}  # type: ignore[index]
    assert refused.get("wrong-lock-empty-presented") == "name_empty"
    assert refused.get("long-lock-name-matches") == "name_too_long"
    assert refused.get("wrong-lock-trailing-space") == "name_whitespace"
    for case in SHARED:
        got = run(GUARD, case)
        assert ("refused" in got) == (case["name"] in refused), case["name"]
    assert len(SHARED) - len(refused) >= 100


def test_random_cases_agree_with_the_native_rules(random_cases: list[dict]) -> None:
    assert len(random_cases) == 10_000
    wrong = [c["name"] for c in random_cases if run(GUARD, c) != expected(c)]
    assert not wrong, f"{len(wrong)} cases disagree with the native rules, first {wrong[:5]}"
    refused = sum(1 for c in random_cases if refusal(c) is not None)
    assert 0 < refused < 5_000, f"{refused} random cases carry a name the rule refuses (a NUL byte): most are decided"


def test_a_guard_that_reinterns_agrees_too(random_cases: list[dict]) -> None:
    """With room for two lock names the guard drops and re-creates handles constantly."""
    small = Guard(max_locks=2)
    sample = random_cases[:2000]
    assert [run(small, c) for c in sample] == [expected(c) for c in sample]


def test_the_checked_call_path_agrees_too(random_cases: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without wasmtime's unchecked entry point the engine calls `Func.__call__`: same answers."""
    import fencing_guard._core as core

    monkeypatch.setattr(core, "_UNCHECKED", None)
    checked = Guard()
    sample = SHARED + random_cases[:300]
    assert [run(checked, c) for c in sample] == [expected(c) for c in sample]
