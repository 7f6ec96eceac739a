"""`Guard`: the bundled `fencing:guard` component under wasmtime.

This is the one place that knows the WIT encoding as wasmtime-py maps it
(kebab-case record fields, `Variant` rejections, `lock-name` handles,
verdict-code bytes); everything else speaks `_types`.
"""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from wasmtime import Engine, Store
from wasmtime.component import Component, Linker, Record, Variant

from ._types import (
    Admission,
    BatchOutcome,
    BatchWrite,
    Decision,
    Fence,
    FenceState,
    Policy,
    Reason,
    Rejection,
    Sequencer,
    StreamOutcome,
    Verdict,
    check_lock,
    check_optional_u64,
    check_policy,
    check_u64,
)

INTERFACE = "fencing:guard/check@0.2.0"
_FUNCS = ("[constructor]lock-name", "admit", "admit-batch", "admit-stream")

#: Byte N of a batch or stream verdict list is case N of the WIT `enum verdict-code`.
_CODES = (
    "admitted",
    "admitted_new_term",
    "invalid_token",
    "wrong_lock",
    "stale_token",
    "token_reused",
    "sequence_regressed",
)


class ContractError(RuntimeError):
    """The component answered outside the contract (a broken or foreign plugin)."""


def bundled_component() -> Path:
    """The path of the component shipped inside this package."""
    return Path(str(resources.files(__package__).joinpath("fencing_rules.wasm")))


def _record(**fields: object) -> Record:
    r = Record()
    for name, value in fields.items():
        setattr(r, name.replace("_", "-"), value)
    return r


def _field(rec: object, name: str) -> object:
    return getattr(rec, name.replace("_", "-"))


class Guard:
    """The admission check, decided by the `fencing:guard` component.

    `Guard()` loads the component bundled with the package; `Guard(path)`
    loads another build of the same contract. Lock names are interned in the
    instance once each (at most `max_locks`; past that the handles are
    dropped and interning starts over). A guard is safe to share between
    threads: calls are serialised on one instance.
    """

    def __init__(self, wasm: Union[str, Path, None] = None, *, max_locks: int = 4096) -> None:
        path = Path(wasm) if wasm is not None else bundled_component()
        if not path.is_file():
            raise FileNotFoundError(f"no component at {path}")
        self._engine = Engine()
        self._store = Store(self._engine)
        component = Component.from_file(self._engine, str(path))
        # The component imports nothing, so an empty linker instantiates it.
        self._instance = Linker(self._engine).instantiate(self._store, component)
        iface = component.get_export_index(INTERFACE)
        if iface is None:
            raise ContractError(f"{path}: exports no {INTERFACE}")
        self._funcs = {}
        for name in _FUNCS:
            index = component.get_export_index(name, iface)
            func = index and self._instance.get_func(self._store, index)
            if func is None:
                raise ContractError(f"{path}: {INTERFACE} has no function {name}")
            self._funcs[name] = func
        if max_locks < 2:
            raise ValueError("max_locks must be at least 2 (a call may intern two names)")
        self._locks: dict[str, object] = {}
        self._max_locks = max_locks
        self._mutex = threading.Lock()

    # -- the WIT calls -------------------------------------------------------

    def _call(self, name: str, *args: object) -> object:
        func = self._funcs[name]
        result = func(self._store, *args)
        func.post_return(self._store)
        return result

    def _handles(self, *names: Optional[str]) -> list[object]:
        """The interned handles of `names` (None stays None) for one call. Room
        for all of them is made first, so no handle of this call is dropped
        while another is interned."""
        missing = {n for n in names if n is not None and n not in self._locks}
        if len(self._locks) + len(missing) > self._max_locks:
            for old in self._locks.values():
                old.drop(self._store)  # type: ignore[attr-defined]
            self._locks.clear()
            missing = {n for n in names if n is not None}
        for name in missing:
            self._locks[name] = self._call("[constructor]lock-name", name)
        return [None if n is None else self._locks[n] for n in names]

    def _fence(self, fence: Optional[Fence], handle: object) -> Optional[Record]:
        if fence is None:
            return None
        return _record(lock=handle, high_water=fence.high_water, sequence=fence.sequence)

    # -- the API -------------------------------------------------------------

    def admit(
        self, current: Optional[Fence], presented: Sequencer, policy: Union[Policy, str] = Policy.NON_DECREASING
    ) -> Decision:
        """Decides one write against the resource's fence (None: it has none yet)."""
        _check_fence(current, "current")
        if not isinstance(presented, Sequencer):
            raise TypeError("presented must be a Sequencer")
        check_lock(presented.lock, "presented.lock")
        check_u64(presented.token, "presented.token")
        check_optional_u64(presented.sequence, "presented.sequence")
        wit_policy = check_policy(policy).value.replace("_", "-")
        with self._mutex:
            fence_lock, lock = self._handles(current and current.lock, presented.lock)
            seq = _record(lock=lock, token=presented.token, sequence=presented.sequence)
            out = self._call("admit", self._fence(current, fence_lock), seq, wit_policy)
        return _decision(out)

    def admit_batch(
        self,
        current: Optional[Fence],
        lock: str,
        writes: Sequence[Union[BatchWrite, int]],
        policy: Union[Policy, str] = Policy.NON_DECREASING,
    ) -> BatchOutcome:
        """Decides writes to one resource under one lock, in order, each against
        the fence left by the writes admitted before it. A plain int is a write
        without a sequence."""
        _check_fence(current, "current")
        check_lock(lock, "lock")
        ws = [w if isinstance(w, BatchWrite) else BatchWrite(check_u64(w, f"writes[{i}]")) for i, w in enumerate(writes)]
        for i, w in enumerate(ws):
            check_u64(w.token, f"writes[{i}].token")
            check_optional_u64(w.sequence, f"writes[{i}].sequence")
        wit_policy = check_policy(policy).value.replace("_", "-")
        with self._mutex:
            records = [_record(token=w.token, sequence=w.sequence) for w in ws]
            fence_lock, handle = self._handles(current and current.lock, lock)
            out = self._call("admit-batch", self._fence(current, fence_lock), handle, records, wit_policy)
        codes = bytes(_field(out, "verdicts"))  # type: ignore[arg-type]
        state = _field(out, "fence")
        return BatchOutcome(
            verdicts=_expand_batch(current, ws, codes),
            fence=None
            if state is None
            else FenceState(_field(state, "high_water"), _field(state, "sequence")),  # type: ignore[arg-type]
        )

    def admit_stream(
        self, high_water: int, tokens: Iterable[int], policy: Union[Policy, str] = Policy.NON_DECREASING
    ) -> StreamOutcome:
        """Decides sequence-less tokens on one resource whose lock binding the
        caller has checked and whose fence holds no sequence. `high_water` 0
        means the resource has no fence."""
        check_u64(high_water, "high_water")
        ts = [check_u64(t, f"tokens[{i}]") for i, t in enumerate(tokens)]
        wit_policy = check_policy(policy).value.replace("_", "-")
        with self._mutex:
            out = self._call("admit-stream", high_water, ts, wit_policy)
        verdicts = []
        for byte in bytes(_field(out, "verdicts")):  # type: ignore[arg-type]
            code = _code(byte)
            if code in ("wrong_lock", "sequence_regressed"):
                raise ContractError(f"component returned {code} in a stream")
            verdicts.append(Verdict("admitted" if code == "admitted_new_term" else code))
        if len(verdicts) != len(ts):
            raise ContractError(f"component returned {len(verdicts)} verdicts for {len(ts)} tokens")
        return StreamOutcome(verdicts=verdicts, high_water=_field(out, "high_water"))  # type: ignore[arg-type]


def _check_fence(fence: object, what: str) -> None:
    if fence is None:
        return
    if not isinstance(fence, Fence):
        raise TypeError(f"{what} must be a Fence or None")
    check_lock(fence.lock, f"{what}.lock")
    check_u64(fence.high_water, f"{what}.high_water")
    check_optional_u64(fence.sequence, f"{what}.sequence")


def _code(byte: int) -> str:
    if not 0 <= byte < len(_CODES):
        raise ContractError(f"component returned unknown verdict code {byte}")
    return _CODES[byte]


def _decision(out: object) -> Decision:
    """Lifts `result<admission, rejection>`: a Variant is the rejection."""
    if isinstance(out, Variant):
        payload = out.payload
        reason = Reason(out.tag.replace("-", "_"))
        if payload is None:
            return Rejection(reason)
        if reason is Reason.SEQUENCE_REGRESSED:
            return Rejection(
                reason,
                token=_field(payload, "token"),  # type: ignore[arg-type]
                presented=_field(payload, "presented"),  # type: ignore[arg-type]
                last=_field(payload, "last"),  # type: ignore[arg-type]
            )
        return Rejection(
            reason,
            presented=_field(payload, "presented"),  # type: ignore[arg-type]
            high_water=_field(payload, "high_water"),  # type: ignore[arg-type]
        )
    return Admission(
        high_water=_field(out, "high_water"),  # type: ignore[arg-type]
        sequence=_field(out, "sequence"),  # type: ignore[arg-type]
        new_term=_field(out, "new_term"),  # type: ignore[arg-type]
    )


def _expand_batch(current: Optional[Fence], writes: list[BatchWrite], codes: bytes) -> list[Decision]:
    """Verdict bytes to decisions. A rejected write was compared with the fence
    left by the last admitted write before it (or `current`)."""
    if len(codes) != len(writes):
        raise ContractError(f"component returned {len(codes)} verdicts for {len(writes)} writes")
    state = None if current is None else (current.high_water, current.sequence)
    out: list[Decision] = []
    for write, byte in zip(writes, codes):
        code = _code(byte)
        if code in ("admitted", "admitted_new_term"):
            state = (write.token, write.sequence)
            out.append(Admission(write.token, write.sequence, code == "admitted_new_term"))
        elif code in ("invalid_token", "wrong_lock"):
            out.append(Rejection(Reason(code)))
        elif state is None or (code == "sequence_regressed" and state[1] is None):
            raise ContractError(f"component returned {code} for a write with no fence to compare with")
        elif code == "sequence_regressed":
            out.append(Rejection(Reason(code), token=write.token, presented=write.sequence, last=state[1]))
        else:
            out.append(Rejection(Reason(code), presented=write.token, high_water=state[0]))
    return out
