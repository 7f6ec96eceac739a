#!/usr/bin/env python3
"""Runs the shared fencing test vectors (tests/vectors/*.json) against the
fencing:guard component under wasmtime-py, and prints `N passed, M failed`.

Every call into the component goes through `ComponentGuard`, the one place
that knows the WIT encoding (kebab-case record fields, variants, enums,
`lock-name` handles, verdict-code bytes); the rest of this file speaks the
vectors' vocabulary (see tests/vectors/README.md). If the WIT changes, only
`ComponentGuard` changes.

Usage: run_vectors.py [--wasm FILE] [--vectors DIR]
  FILE defaults to $FENCING_GUARD_WASM, else
  target/wasm32-wasip2/release/fencing_guest.wasm under the repository root.
Exit codes: 0 all passed, 1 some case failed, 2 unreadable component or vectors.
"""

import argparse
import json
import os
import sys
from pathlib import Path

from wasmtime import Engine, Store
from wasmtime.component import Component, Linker, Record, Variant

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_WASM = ROOT / "target" / "wasm32-wasip2" / "release" / "fencing_guest.wasm"
INTERFACE = "fencing:guard/check@0.1.0"
U64_MAX = (1 << 64) - 1


def record(**fields):
    """A WIT record value; Python names map to kebab-case WIT field names."""
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def field(rec, name):
    return getattr(rec, name.replace("_", "-"))


# Verdict bytes of `batch-outcome.verdicts` / `stream-outcome.verdicts`: the
# cases of the WIT `enum verdict-code`, in order (byte N is case N).
VERDICT_CODES = (
    "admitted",
    "admitted_new_term",
    "invalid_token",
    "wrong_lock",
    "stale_token",
    "token_reused",
    "sequence_regressed",
)


class ComponentGuard:
    """The adapter: vectors' vocabulary in, WIT calls, vectors' vocabulary out.

    Lock names cross the boundary as `lock-name` handles: one constructor call
    per distinct name per instance (cached in `self.locks`), then the handle is
    passed where the name was. Batch and stream verdicts come back as
    `verdict-code` bytes and are expanded here into full verdicts; the evidence
    follows from the inputs, as in `fencing_guest::rules::expand_batch`.
    """

    def __init__(self, wasm_path):
        self.engine = Engine()
        self.store = Store(self.engine)
        component = Component.from_file(self.engine, str(wasm_path))
        # The component imports nothing, so an empty linker instantiates it.
        self.instance = Linker(self.engine).instantiate(self.store, component)
        iface = component.get_export_index(INTERFACE)
        if iface is None:
            raise RuntimeError(f"{wasm_path}: no export {INTERFACE}")
        self.funcs = {}
        for name in ("[constructor]lock-name", "admit", "admit-batch", "admit-stream"):
            index = component.get_export_index(name, iface)
            func = index and self.instance.get_func(self.store, index)
            if func is None:
                raise RuntimeError(f"{wasm_path}: {INTERFACE} has no function {name}")
            self.funcs[name] = func
        # name -> lock-name handle; handles live as long as this instance.
        self.locks = {}

    def _call(self, name, *args):
        func = self.funcs[name]
        result = func(self.store, *args)
        func.post_return(self.store)
        return result

    def _lock(self, name):
        """The interned handle for `name`, created on first use."""
        handle = self.locks.get(name)
        if handle is None:
            handle = self._call("[constructor]lock-name", name)
            self.locks[name] = handle
        return handle

    @staticmethod
    def _policy(policy):
        return policy.replace("_", "-")

    def _fence(self, fence):
        if fence is None:
            return None
        return record(lock=self._lock(fence["lock"]), high_water=fence["high_water"], sequence=fence.get("sequence"))

    @staticmethod
    def _verdict(result):
        """result<admission, rejection> -> {"verdict": reason, ...evidence}."""
        if isinstance(result, Variant):
            reason = result.tag.replace("-", "_")
            out = {"verdict": reason}
            if result.payload is not None:
                for name in vars(result.payload):
                    out[name.replace("-", "_")] = getattr(result.payload, name)
            return out
        return {
            "verdict": "admitted",
            "high_water": field(result, "high_water"),
            "sequence": field(result, "sequence"),
            "new_term": field(result, "new_term"),
        }

    @staticmethod
    def _code(byte):
        if not 0 <= byte < len(VERDICT_CODES):
            raise RuntimeError(f"component returned unknown verdict code {byte}")
        return VERDICT_CODES[byte]

    @classmethod
    def _expand_batch(cls, fence, writes, codes):
        """Verdict bytes -> full verdicts. Each rejected write was compared with
        the fence left by the last admitted write before it (or `fence`)."""
        if len(codes) != len(writes):
            raise RuntimeError(f"component returned {len(codes)} verdicts for {len(writes)} writes")
        state = None if fence is None else (fence["high_water"], fence.get("sequence"))
        out = []
        for write, byte in zip(writes, codes):
            code, token, sequence = cls._code(byte), write["token"], write.get("sequence")
            if code in ("admitted", "admitted_new_term"):
                state = (token, sequence)
                out.append(
                    {"verdict": "admitted", "high_water": token, "sequence": sequence, "new_term": code != "admitted"}
                )
            elif code in ("invalid_token", "wrong_lock"):
                out.append({"verdict": code})
            elif state is None or (code == "sequence_regressed" and state[1] is None):
                raise RuntimeError(f"component returned {code} for a write with no fence to compare with")
            elif code == "sequence_regressed":
                out.append({"verdict": code, "token": token, "presented": sequence, "last": state[1]})
            else:
                out.append({"verdict": code, "presented": token, "high_water": state[0]})
        return out

    def admit(self, fence, sequencer, policy):
        presented = record(
            lock=self._lock(sequencer["lock"]), token=sequencer["token"], sequence=sequencer.get("sequence")
        )
        return self._verdict(self._call("admit", self._fence(fence), presented, self._policy(policy)))

    def batch(self, fence, lock, writes, policy):
        ws = [record(token=w["token"], sequence=w.get("sequence")) for w in writes]
        out = self._call("admit-batch", self._fence(fence), self._lock(lock), ws, self._policy(policy))
        state = field(out, "fence")
        return {
            "verdicts": self._expand_batch(fence, writes, bytes(field(out, "verdicts"))),
            "fence": None
            if state is None
            else {"high_water": field(state, "high_water"), "sequence": field(state, "sequence")},
        }

    def stream(self, high_water, tokens, policy):
        out = self._call("admit-stream", high_water, list(tokens), self._policy(policy))
        verdicts = []
        for byte in bytes(field(out, "verdicts")):
            code = self._code(byte)
            if code in ("wrong_lock", "sequence_regressed"):
                raise RuntimeError(f"component returned {code} in a stream")
            verdicts.append("admitted" if code == "admitted_new_term" else code)
        return {"verdicts": verdicts, "high_water": field(out, "high_water")}


class VectorError(Exception):
    pass


def normalise_verdict(v):
    """Fills the optional fields of an expected verdict with their defaults."""
    v = dict(v)
    if v.get("verdict") == "admitted":
        v.setdefault("sequence", None)
    if v.get("verdict") == "sequence_regressed":
        v.setdefault("presented", None)
    return v


def expected_of(case):
    expect = case["expect"]
    if case["kind"] == "admit":
        return normalise_verdict(expect)
    if case["kind"] == "batch":
        fence = expect["fence"]
        return {
            "verdicts": [normalise_verdict(v) for v in expect["verdicts"]],
            "fence": None if fence is None else {"high_water": fence["high_water"], "sequence": fence.get("sequence")},
        }
    return {"verdicts": list(expect["verdicts"]), "high_water": expect["high_water"]}


def run_case(guard, case):
    kind = case["kind"]
    if kind == "admit":
        return guard.admit(case["fence"], case["sequencer"], case["policy"])
    if kind == "batch":
        return guard.batch(case["fence"], case["lock"], case["writes"], case["policy"])
    if kind == "stream":
        return guard.stream(case["high_water"], case["tokens"], case["policy"])
    raise VectorError(f"unknown kind {kind!r}")


def check_u64(value, where):
    """Rejects anything but an integer in 0..=u64::MAX, recursively."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) or (isinstance(value, int) and not 0 <= value <= U64_MAX):
        raise VectorError(f"{where}: {value!r} is not a u64")
    if isinstance(value, dict):
        for k, v in value.items():
            check_u64(v, f"{where}.{k}")
    if isinstance(value, list):
        for i, v in enumerate(value):
            check_u64(v, f"{where}[{i}]")


def load_vectors(directory):
    files = sorted(Path(directory).glob("*.json"))
    if not files:
        raise VectorError(f"{directory}: no *.json vector files")
    loaded, names = [], set()
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise VectorError(f"{path}: {e}") from e
        cases = doc.get("cases") if isinstance(doc, dict) else None
        if not isinstance(cases, list):
            raise VectorError(f"{path}: no \"cases\" list")
        for i, case in enumerate(cases):
            name = case.get("name") if isinstance(case, dict) else None
            if not isinstance(name, str) or not name:
                raise VectorError(f"{path}: case #{i} has no name")
            if name in names:
                raise VectorError(f"{path}: duplicate case name {name!r}")
            names.add(name)
            if case.get("kind") not in ("admit", "batch", "stream") or "expect" not in case:
                raise VectorError(f"{path}: case #{i} ({name}): needs kind admit|batch|stream and expect")
            check_u64(case, f"{path.name}: {name}")
        loaded.append((path, cases))
    return loaded


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wasm", default=os.environ.get("FENCING_GUARD_WASM", str(DEFAULT_WASM)))
    parser.add_argument("--vectors", default=str(ROOT / "tests" / "vectors"))
    args = parser.parse_args()

    try:
        files = load_vectors(args.vectors)
    except VectorError as e:
        print(f"error: invalid vectors: {e}", file=sys.stderr)
        return 2
    try:
        guard = ComponentGuard(args.wasm)
    except Exception as e:  # noqa: BLE001 - any load failure is bad input
        print(f"error: cannot load component {args.wasm}: {e}", file=sys.stderr)
        return 2

    passed = failed = 0
    for path, cases in files:
        file_passed = 0
        for case in cases:
            expected = expected_of(case)
            try:
                got = run_case(guard, case)
            except Exception as e:  # noqa: BLE001 - a trap fails the case, not the run
                got = f"<error: {e}>"
                guard = ComponentGuard(args.wasm)
            if got == expected:
                file_passed += 1
            else:
                print(f"  FAIL {case['name']} ({case['kind']}): expected {json.dumps(expected)}\n    got {got}")
        passed += file_passed
        failed += len(cases) - file_passed
        print(f"{path.name}: {file_passed}/{len(cases)}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
