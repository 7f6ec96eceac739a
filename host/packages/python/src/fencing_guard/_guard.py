"""`Guard`: the bundled `fencing:guard` component's rules, called through
the core-ABI engine (`_core.py`).

This file validates every value before it crosses (by `_accept`'s rules;
a name when it is first interned), interns lock names, and
turns verdict codes into `Decision`s with their evidence, which follows from
the inputs (`wit/guard.wit`, `admit-code` and `batch-outcome`); everything
else speaks `_types`.
"""

from __future__ import annotations

import sys
import threading
from array import array
from importlib import resources
from pathlib import Path
from typing import Iterable, Optional, Sequence, Union

from wasmtime import Engine

from ._accept import check_name, check_proof
from ._core import INTERFACE, ContractError, Core, core_module, i64
from ._types import (
    Admission,
    BatchOutcome,
    BatchWrite,
    Decision,
    Fence,
    FenceState,
    Keys,
    Policy,
    Reason,
    Rejection,
    Sequencer,
    StreamOutcome,
    U64_MAX,
    Verdict,
    check_optional_u64,
    check_policy,
    check_u64,
)

__all__ = ["INTERFACE", "ContractError", "Guard", "bundled_component"]

#: The WIT `policy` case index of each policy (a `Policy` is a `str`, so its
#: value finds the same entry).
_POLICY = {Policy.NON_DECREASING: 0, Policy.STRICTLY_INCREASING: 1}


def _policy(value: object) -> int:
    p = _POLICY.get(value) if isinstance(value, str) else None  # type: ignore[call-overload]
    return _POLICY[check_policy(value)] if p is None else p

#: Byte N of a verdict code is case N of the WIT `enum verdict-code`.
_CODES = (
    "admitted",
    "admitted_new_term",
    "invalid_token",
    "wrong_lock",
    "stale_token",
    "token_reused",
    "sequence_regressed",
)

#: Stream verdict bytes to verdicts (a stream has no wrong lock or sequences, and reports no terms).
_STREAM = {0: Verdict.ADMITTED, 1: Verdict.ADMITTED, 2: Verdict.INVALID_TOKEN, 4: Verdict.STALE_TOKEN, 5: Verdict.TOKEN_REUSED}
#: The same as a table indexed by the byte (None: a code a stream cannot answer).
_STREAM_TABLE = tuple(_STREAM.get(b) for b in range(256))

#: Verdict codes of a proof that does not hold (7, no keys installed, cannot
#: happen: a guard installs its keys before the call).
_PROOF_REASONS = {8: Reason.PROOF_MISSING, 9: Reason.PROOF_MALFORMED, 10: Reason.PROOF_UNKNOWN_KEY, 11: Reason.PROOF_BAD}
#: The WIT `key-algorithm` case of each algorithm, and `key-error`'s cases.
_ALGORITHM = {"ed25519": 0, "hmac-sha256": 1}
_KEY_ERRORS = ("no keys given", "more than 64 keys", "two keys have id {}", "key {} is not a key of its algorithm")


def _install(core: Core, keys: Keys) -> None:
    """Installs `keys` in `core`'s instance; ValueError naming why the component refused them."""
    refused = core.set_keys([(k.id, _ALGORITHM[k.algorithm], bytes(k.material)) for k in keys.keys])
    if refused is not None:
        case, ident = refused
        raise ValueError(f"verifier keys refused: {_KEY_ERRORS[case].format(ident)}")
    core.keys = keys


_INVALID = Rejection(Reason.INVALID_TOKEN)
_WRONG_LOCK = Rejection(Reason.WRONG_LOCK)


def bundled_component() -> Path:
    """The path of the component shipped inside this package."""
    return Path(str(resources.files(__package__).joinpath("fencing_guard.wasm")))


class Guard:
    """The admission check, decided by the `fencing:guard` component's rules.

    `Guard()` runs the component bundled with the package; `Guard(path)` runs
    another build of the same contract. Lock names are interned in the
    instance once each (at most `max_locks`; past that the instance is
    replaced by a fresh one and interning starts over). A guard is safe to
    share between threads: calls are serialised on one instance.
    """

    def __init__(self, wasm: Union[str, Path, None] = None, *, max_locks: int = 4096) -> None:
        path = Path(wasm) if wasm is not None else bundled_component()
        if not path.is_file():
            raise FileNotFoundError(f"no component at {path}")
        if max_locks < 2:
            raise ValueError("max_locks must be at least 2 (a call may intern two names)")
        self._engine = Engine()
        try:
            self._module = core_module(self._engine, path.read_bytes())
        except ContractError as e:
            raise ContractError(f"{path}: {e}") from None
        self._core = Core(self._engine, self._module)
        self._max_locks = max_locks
        self._mutex = threading.Lock()

    def _rep(self, name: str, what: str) -> int:
        """The rep of `name` (validated on first sight); a full table starts a fresh instance."""
        r = self._core.locks.get(name)
        if r is not None:
            return r
        check_name(name, what)
        if len(self._core.locks) >= self._max_locks:
            self._core = Core(self._engine, self._module)
        return self._core.lock(name)

    def _reps(self, fence: Optional[Fence], lock: str, what: str) -> tuple[int, int]:
        """The reps of the fence's lock (0 without a fence) and of `lock`, in one instance."""
        if fence is None:
            return 0, self._rep(lock, what)
        core = self._core
        a = self._rep(fence.lock, "current.lock")
        b = self._rep(lock, what)
        # Interning the second name may have started a fresh instance.
        return (a, b) if core is self._core else (self._rep(fence.lock, "current.lock"), b)

    # -- the API -------------------------------------------------------------

    def admit(
        self, current: Optional[Fence], presented: Sequencer, policy: Union[Policy, str] = Policy.NON_DECREASING
    ) -> Decision:
        """Decides one write against the resource's fence (None: it has none yet)."""
        _check_fence(current, "current")
        if not isinstance(presented, Sequencer):
            raise TypeError("presented must be a Sequencer")
        token, sequence = presented.token, presented.sequence
        if not _is_u64(token):
            check_u64(token, "presented.token")
        if sequence is not None and not _is_u64(sequence):
            check_u64(sequence, "presented.sequence")
        p = _policy(policy)
        with self._mutex:
            fence_rep, rep = self._reps(current, presented.lock, "presented.lock")
            f = _flat_fence(current, fence_rep)
            c = self._core.code(
                f[0], f[1], f[2], f[3], f[4], rep, i64(token), 0 if sequence is None else 1, i64(sequence or 0), p
            )
        return _decision(c, _state(current), token, sequence)

    def admit_signed(
        self,
        current: Optional[Fence],
        presented: Sequencer,
        proof: bytes,
        keys: Keys,
        policy: Union[Policy, str] = Policy.NON_DECREASING,
    ) -> Decision:
        """Decides one signed write: `proof` (the grant's `fencing_proof`,
        as bytes) must show that the lock service granted `presented.token`
        for `presented.lock`, under one of `keys`; then the write is decided
        as `admit` decides it. A proof that does not hold is a `Rejection`
        with a `proof_*` reason, whatever the token."""
        _check_fence(current, "current")
        if not isinstance(presented, Sequencer):
            raise TypeError("presented must be a Sequencer")
        if not isinstance(keys, Keys):
            raise TypeError(f"keys must be a Keys, not {type(keys).__name__}")
        proof = check_proof(proof)
        token = check_u64(presented.token, "presented.token")
        sequence = check_optional_u64(presented.sequence, "presented.sequence")
        p = _policy(policy)
        with self._mutex:
            fence_rep, rep = self._reps(current, presented.lock, "presented.lock")
            core = self._core
            if core.keys is not keys:
                _install(core, keys)
            f = _flat_fence(current, fence_rep)
            ptr = core.bytes_in(proof)
            seq = (0, 0) if sequence is None else (1, i64(sequence))
            c = core.signed(f[0], f[1], f[2], f[3], f[4], rep, i64(token), seq[0], seq[1], ptr, len(proof), p)
        refused = _PROOF_REASONS.get(c)
        if refused is None:
            return _decision(c, _state(current), token, sequence)
        if refused is Reason.PROOF_UNKNOWN_KEY:
            if len(proof) < 5:
                raise _impossible(c)
            return Rejection(refused, key_id=int.from_bytes(proof[1:5], "big"))
        return Rejection(refused)

    def admit_batch(
        self,
        current: Optional[Fence],
        lock: str,
        writes: Iterable[Union[BatchWrite, int]],
        policy: Union[Policy, str] = Policy.NON_DECREASING,
    ) -> BatchOutcome:
        """Decides writes to one resource under one lock, in order, each against
        the fence left by the writes admitted before it. A plain int is a write
        without a sequence."""
        _check_fence(current, "current")
        tokens, sequences = _columns(writes)
        return self._batch(current, lock, tokens, sequences, policy)

    def admit_columns(
        self,
        current: Optional[Fence],
        lock: str,
        tokens: Iterable[int],
        sequences: Optional[Iterable[int]] = None,
        policy: Union[Policy, str] = Policy.NON_DECREASING,
    ) -> BatchOutcome:
        """`admit_batch` with the writes given as columns: write i is
        `tokens[i]` with `sequences[i]` (no sequences: None). Each column is
        an `array('Q')` (taken as it is: its elements are u64 by type) or any
        iterable of ints (each checked); both the same length."""
        _check_fence(current, "current")
        ts = _column(tokens, "tokens")
        ss = None if sequences is None else _column(sequences, "sequences")
        if ss is not None and len(ss) != len(ts):
            raise ValueError(f"sequences has {len(ss)} values for {len(ts)} tokens")
        return self._batch(current, lock, ts, ss, policy)

    def _batch(
        self, current: Optional[Fence], lock: str, tokens: array, sequences: _Sequences, policy: Union[Policy, str]
    ) -> BatchOutcome:
        """`admit-batch` over checked columns; the outcome's verdicts are built when read."""
        n = len(tokens)
        packed = _batch_words(tokens, sequences)
        p = _policy(policy)
        with self._mutex:
            fence_rep, rep = self._reps(current, lock, "lock")
            codes, state = self._core.batch(_flat_fence(current, fence_rep), rep, packed, n, p)
        start = _state(current)
        mask = _check_batch(codes, start, state, tokens, sequences)
        return BatchOutcome(
            verdicts=lambda: _batch_decisions(
                codes, start, tokens.tolist(), [None] * n if sequences is None else list(sequences)
            ),
            fence=None if state is None else FenceState(*state),
            admitted_count=mask.count(1),
            admitted=lambda: list(map(bool, mask)),
        )

    def admit_stream(
        self, high_water: int, tokens: Iterable[int], policy: Union[Policy, str] = Policy.NON_DECREASING
    ) -> StreamOutcome:
        """Decides sequence-less tokens on one resource whose lock binding the
        caller has checked and whose fence holds no sequence. `high_water` 0
        means the resource has no fence."""
        check_u64(high_water, "high_water")
        ts = list(tokens)
        packed = _little_endian(_u64s(ts, "tokens[{}]"))
        p = _policy(policy)
        with self._mutex:
            codes, mark = self._core.stream(high_water, packed, len(ts), p)
        verdicts = list(map(_STREAM_TABLE.__getitem__, codes))
        if None in verdicts:
            byte = codes[verdicts.index(None)]
            raise ContractError(f"the module returned verdict code {byte} in a stream")
        return StreamOutcome(verdicts=verdicts, high_water=mark)


def _u64s(values: list, what: str) -> array:
    """`values` as an array of u64. Plain ints in range take one C-level
    pass; anything else goes through `check_u64` one by one, which names the
    first bad value (`what` formats with its index)."""
    packed = _plain_u64s(values)
    if packed is not None:
        return packed
    for i, v in enumerate(values):
        check_u64(v, what.format(i))
    return _u64s([int(v) for v in values], what)


def _plain_u64s(values: list) -> Optional[array]:
    """`values` as an array of u64 when every one is a plain int in range (one
    C-level pass), else None: the caller checks them one by one."""
    if not set(map(type, values)) <= _PLAIN_INT:
        return None
    try:
        return array("Q", values)
    except OverflowError:  # a negative or a too large int
        return None


_PLAIN_INT = {int}


#: A batch's sequences: None (no write has one), an array (every write has
#: one) or a list with None for the writes without.
_Sequences = Union[None, array, "list[Optional[int]]"]


def _column(values: Iterable[int], what: str) -> array:
    """A column of `admit_columns`: a copy of an `array('Q')` (the outcome
    reads the writes back when its verdicts are built), else each value checked."""
    if isinstance(values, array) and values.typecode == "Q":
        return array("Q", values)
    if isinstance(values, (str, bytes, bytearray)):
        raise TypeError(f"{what} must be an array('Q') or an iterable of ints, not {type(values).__name__}")
    return _u64s(list(values), what + "[{}]")


def _columns(writes: Iterable[Union[BatchWrite, int]]) -> tuple[array, _Sequences]:
    """A batch's tokens and sequences, each value checked."""
    writes = list(writes)
    kinds = set(map(type, writes))
    if kinds <= _PLAIN_INT:
        return _u64s(writes, "writes[{}]"), None
    if kinds == {BatchWrite}:
        tokens = _u64s([w.token for w in writes], "writes[{}].token")  # type: ignore[union-attr]
        sequences = [w.sequence for w in writes]  # type: ignore[union-attr]
        if None not in sequences:
            values = _plain_u64s(sequences)
            if values is not None:
                return tokens, values
        elif _plain_u64s([s for s in sequences if s is not None]) is not None:
            return tokens, sequences if any(s is not None for s in sequences) else None
        for i, s in enumerate(sequences):
            check_optional_u64(s, f"writes[{i}].sequence")
        return tokens, sequences
    ws = [w if isinstance(w, BatchWrite) else BatchWrite(check_u64(w, f"writes[{i}]")) for i, w in enumerate(writes)]
    for i, w in enumerate(ws):
        check_u64(w.token, f"writes[{i}].token")
        check_optional_u64(w.sequence, f"writes[{i}].sequence")
    sequences = [w.sequence for w in ws]
    return _u64s([w.token for w in ws], "writes[{}].token"), sequences if any(s is not None for s in sequences) else None


def _batch_words(tokens: array, sequences: _Sequences) -> bytes:
    """The `list<batch-write>` laid out: per write the token, the sequence's
    discriminant and its value, 8 bytes each."""
    n = len(tokens)
    # Every write with a sequence: the discriminants come with the template.
    words = (_WITH_SEQUENCE if isinstance(sequences, array) else _WITHOUT) * n
    words[0::3] = tokens
    if isinstance(sequences, array):
        words[2::3] = sequences
    elif sequences is not None:
        words[1::3] = array("Q", [0 if s is None else 1 for s in sequences])
        words[2::3] = array("Q", [0 if s is None else s for s in sequences])
    return _little_endian(words)


_WITH_SEQUENCE = array("Q", [0, 1, 0])
_WITHOUT = array("Q", [0, 0, 0])


def _little_endian(words: array) -> bytes:
    """The bytes of an array of u64 in the canonical ABI's (little-endian) order."""
    if sys.byteorder == "big":  # pragma: no cover - no big-endian CI machine
        words = array("Q", words)
        words.byteswap()
    return words.tobytes()


#: Verdict code to 1 (admitted) or 0 (refused); codes the contract does not have map to 2.
_ADMITTED = bytes([1, 1, 0, 0, 0, 0, 0] + [2] * 249)


def _check_batch(
    codes: bytes,
    start: Optional[tuple[int, Optional[int]]],
    state: Optional[tuple[int, Optional[int]]],
    tokens: array,
    sequences: _Sequences,
) -> bytes:
    """What a batch's answer must show whatever its writes: a known code per
    write, and the fence after it equal to the last admitted write's token and
    sequence (the start fence when none was admitted). Checked at C speed
    before anything is returned; each code against its write's evidence is
    checked when `verdicts` is built. The admitted mask, a byte per write."""
    mask = codes.translate(_ADMITTED)
    if 2 in mask:
        raise ContractError(f"the module returned verdict code {codes[mask.index(2)]} in a batch")
    last = mask.rfind(1)
    expected = start if last < 0 else (tokens[last], None if sequences is None else sequences[last])
    if state != expected:
        raise ContractError(f"the module left the fence {state}, the writes leave {expected}")
    return mask


def _batch_decisions(
    codes: bytes, fence: Optional[tuple[int, Optional[int]]], tokens: list[int], sequences: list[Optional[int]]
) -> list[Decision]:
    """Each write's decision, against the fence the admitted writes before it
    left; every code is checked as `_decision` checks it."""
    verdicts: list[Decision] = []
    append = verdicts.append
    for c, token, sequence in zip(codes, tokens, sequences):
        # The common cases first, checked as `_decision` checks them: admitted
        # in the same term, or beginning a new one.
        if c == 0 and token and fence is not None and token == fence[0]:
            append(Admission(token, sequence, False))
            fence = (token, sequence)
            continue
        if c == 1 and token and (fence is None or token > fence[0]):
            append(Admission(token, sequence, True))
            fence = (token, sequence)
            continue
        d = _decision(c, fence, token, sequence)
        if d.admitted:
            fence = (token, sequence)
        append(d)
    return verdicts


def _check_fence(fence: object, what: str) -> None:
    """The fence's numbers; its lock name is checked when it is first interned."""
    if fence is None:
        return
    if not isinstance(fence, Fence):
        raise TypeError(f"{what} must be a Fence or None")
    if not _is_u64(fence.high_water):
        check_u64(fence.high_water, f"{what}.high_water")
    if fence.sequence is not None and not _is_u64(fence.sequence):
        check_u64(fence.sequence, f"{what}.sequence")


def _is_u64(value: object) -> bool:
    """The check of `check_u64` without building its message: an int (not a bool) in 0..2**64-1."""
    return type(value) is int and 0 <= value <= U64_MAX


def _state(fence: Optional[Fence]) -> Optional[tuple[int, Optional[int]]]:
    return None if fence is None else (fence.high_water, fence.sequence)


def _flat_fence(fence: Optional[Fence], rep: int) -> tuple[int, int, int, int, int]:
    """The flat `option<fence>`: discriminant, lock rep, high-water, sequence discriminant and value."""
    if fence is None:
        return (0, 0, 0, 0, 0)
    seq = fence.sequence
    return (1, rep, i64(fence.high_water), 0 if seq is None else 1, i64(seq or 0))


def _impossible(c: int) -> ContractError:
    name = _CODES[c] if 0 <= c < len(_CODES) else f"unknown code {c}"
    return ContractError(f"the module returned {name}, which these inputs cannot produce")


def _decision(c: int, fence: Optional[tuple[int, Optional[int]]], token: int, sequence: Optional[int]) -> Decision:
    """The decision verdict code `c` stands for when the write (token,
    sequence) was decided against `fence` ((high-water, sequence) or None).
    A code these numbers cannot produce fails the call with ContractError."""
    if c == 2:
        if token != 0:
            raise _impossible(c)
        return _INVALID
    if token == 0:
        raise _impossible(c)
    if c == 1:
        if fence is not None and token <= fence[0]:
            raise _impossible(c)
        return Admission(token, sequence, True)
    if fence is None:
        raise _impossible(c)
    high_water, last = fence
    if c == 0 and token == high_water:
        return Admission(token, sequence, False)
    if c == 3:
        return _WRONG_LOCK
    if c == 4 and token < high_water:
        return Rejection(Reason.STALE_TOKEN, presented=token, high_water=high_water)
    if c == 5 and token == high_water:
        return Rejection(Reason.TOKEN_REUSED, presented=token, high_water=high_water)
    if c == 6 and token == high_water and last is not None:
        return Rejection(Reason.SEQUENCE_REGRESSED, token=token, presented=sequence, last=last)
    raise _impossible(c)
