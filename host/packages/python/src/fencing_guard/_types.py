"""The values of the admission check, as Python types.

They mirror the WIT contract `fencing:guard/check@0.3.0` (`wit/guard.wit`)
with Python names: every token, sequence and high-water mark is an `int` in
0..2**64-1, lock names are `str` compared as UTF-8 bytes (no normalization),
and a refusal is a `Rejection` value, never an exception. What the package
accepts as names, policies, numbers and proofs is `_accept`'s.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable, Optional, Union

from ._accept import U64_MAX, ArgumentError, check_u64


class Policy(str, enum.Enum):
    """How a token is compared with the stored high-water mark. Its value is
    the contract's name, the only text a policy is given as."""

    #: A token equal to the mark is admitted: one holder may write many times. The default.
    NON_DECREASING = "non-decreasing"
    #: Each token admits exactly one write: an equal token is refused as reused.
    STRICTLY_INCREASING = "strictly-increasing"


class Reason(str, enum.Enum):
    """Why a write was not admitted (the same names as the HTTP API and the metrics)."""

    #: The token is 0, which no lock service issues.
    INVALID_TOKEN = "invalid_token"
    #: The resource is bound to another lock than the presented one.
    WRONG_LOCK = "wrong_lock"
    #: The token is below the high-water mark: a newer holder has written.
    STALE_TOKEN = "stale_token"
    #: Strict policy: the token equals the high-water mark.
    TOKEN_REUSED = "token_reused"
    #: Same token as the mark, but the sequence is missing or does not advance.
    SEQUENCE_REGRESSED = "sequence_regressed"
    #: A signed write (`Guard.admit_signed`) without a proof.
    PROOF_MISSING = "proof_missing"
    #: A signed write whose proof is not of the format (version, length).
    PROOF_MALFORMED = "proof_malformed"
    #: A signed write whose proof names a key the `Keys` do not hold (`key_id`).
    PROOF_UNKNOWN_KEY = "proof_unknown_key"
    #: A signed write whose proof was not made for its lock and token by its key.
    PROOF_BAD = "proof_bad"


@dataclass(frozen=True)
class Fence:
    """What a storage engine keeps beside a resource."""

    #: The lock the resource is bound to.
    lock: str
    #: The highest admitted token.
    high_water: int
    #: The last sequence admitted under `high_water`, if the writes carried sequences.
    sequence: Optional[int] = None


@dataclass(frozen=True)
class Sequencer:
    """What a writer presents with a write."""

    #: The lock whose token this is.
    lock: str
    #: The fencing token from the lock service (0 is never valid).
    token: int
    #: An optional per-write counter within one token.
    sequence: Optional[int] = None


@dataclass(frozen=True)
class FenceState:
    """The numeric part of a fence (a batch's result needs no lock name)."""

    high_water: int
    sequence: Optional[int] = None


@dataclass(frozen=True)
class Admission:
    """An admitted write. Persist `Fence(presented.lock, high_water, sequence)` with it."""

    #: The new high-water mark: the presented token.
    high_water: int
    #: The new last sequence: the presented one, or None.
    sequence: Optional[int]
    #: True when the write began a new token (no fence before, or a higher token).
    new_term: bool

    @property
    def admitted(self) -> bool:
        return True


@dataclass(frozen=True)
class Rejection:
    """A refused write and its evidence. Which fields are set depends on `reason`:

    - `stale_token`, `token_reused`: `presented` (the token) and `high_water`;
    - `sequence_regressed`: `token`, `presented` (the sequence, or None) and `last`;
    - `invalid_token`, `wrong_lock`: none (a wrong lock's evidence is the caller's own fence);
    - `proof_unknown_key`: `key_id`, the key the proof names; the other proof reasons: none.
    """

    reason: Reason
    presented: Optional[int] = None
    high_water: Optional[int] = None
    token: Optional[int] = None
    last: Optional[int] = None
    key_id: Optional[int] = None

    @property
    def admitted(self) -> bool:
        return False


#: The answer for one write.
Decision = Union[Admission, Rejection]


#: The algorithms of verifier keys.
ALGORITHMS = ("ed25519", "hmac-sha256")


@dataclass(frozen=True)
class VerifierKey:
    """A key the storage trusts to have made proofs: an Ed25519 public key
    (32 bytes) or an HMAC-SHA256 secret (32 to 64 bytes), named by `id`."""

    id: int
    algorithm: str
    material: bytes


class Keys:
    """The keys `Guard.admit_signed` checks proofs with (1 to 64, ids
    distinct). Checked by the component when a guard first uses them: a bad
    set raises ValueError there. Rotating keys is making a new `Keys`."""

    __slots__ = ("keys",)

    def __init__(self, keys: "list[VerifierKey] | tuple[VerifierKey, ...]") -> None:
        checked = []
        for i, k in enumerate(keys):
            if not isinstance(k, VerifierKey):
                raise TypeError(f"keys[{i}] must be a VerifierKey, not {type(k).__name__}")
            if isinstance(k.id, bool) or not isinstance(k.id, int) or not 0 <= k.id <= 0xFFFFFFFF:
                raise ValueError(f"keys[{i}].id must be an int in 0..4294967295")
            if k.algorithm not in ALGORITHMS:
                raise ValueError(f"keys[{i}].algorithm must be one of {', '.join(ALGORITHMS)}, not {k.algorithm!r}")
            if not isinstance(k.material, (bytes, bytearray)):
                raise TypeError(f"keys[{i}].material must be bytes, not {type(k.material).__name__}")
            checked.append(k)
        self.keys = tuple(checked)


@dataclass(frozen=True)
class BatchWrite:
    """One write of a batch on a single resource and lock."""

    token: int
    sequence: Optional[int] = None


class BatchOutcome:
    """A decision per write, in input order, and the fence to persist after the batch.

    `fence` and `admitted_count` come with the call. `verdicts` (each
    write's `Admission` or `Rejection` with its evidence) and `admitted` (a
    bool per write) are built the first time they are read and kept: building
    a decision object costs more than deciding it, so code that needs only the
    fence, or only which writes were admitted, does not pay for the rest.
    """

    __slots__ = ("fence", "admitted_count", "_verdicts", "_admitted", "_build")

    def __init__(
        self,
        verdicts: "Union[list[Decision], Callable[[], list[Decision]]]",
        fence: Optional[FenceState],
        admitted_count: Optional[int] = None,
        admitted: "Optional[Callable[[], list[bool]]]" = None,
    ) -> None:
        #: None when nothing was admitted and the resource had no fence.
        self.fence = fence
        self._admitted: Optional[list[bool]] = None
        self._build: Optional[Callable[[], list[bool]]] = admitted
        if callable(verdicts):
            if admitted_count is None or admitted is None:
                raise TypeError("a deferred BatchOutcome needs admitted_count and admitted")
            self._verdicts: Union[list[Decision], Callable[[], list[Decision]]] = verdicts
            #: How many writes were admitted.
            self.admitted_count = admitted_count
        else:
            self._verdicts = list(verdicts)
            self.admitted_count = sum(1 for v in self._verdicts if v.admitted)

    @property
    def verdicts(self) -> list[Decision]:
        """Each write's decision, in input order (built on first read)."""
        v = self._verdicts
        if callable(v):
            v = self._verdicts = v()
        return v

    @property
    def admitted(self) -> list[bool]:
        """Whether each write was admitted, in input order (built on first read)."""
        if self._admitted is None:
            build = self._build
            self._admitted = build() if build is not None else [v.admitted for v in self.verdicts]
        return self._admitted

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BatchOutcome):
            return NotImplemented
        return self.fence == other.fence and self.verdicts == other.verdicts

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchOutcome(verdicts={self.verdicts!r}, fence={self.fence!r})"


class Verdict(str, enum.Enum):
    """A token stream's compact verdict for one token."""

    #: Admitted; the high-water mark is now this token.
    ADMITTED = "admitted"
    #: The token is 0.
    INVALID_TOKEN = "invalid_token"
    #: Below the high-water mark.
    STALE_TOKEN = "stale_token"
    #: Strict policy: equal to the high-water mark.
    TOKEN_REUSED = "token_reused"


@dataclass(frozen=True)
class StreamOutcome:
    """A verdict per token, and the high-water mark after the stream."""

    verdicts: list[Verdict]
    #: Unchanged when nothing was admitted; 0 still means "no fence".
    high_water: int


def check_optional_u64(value: object, what: str) -> Optional[int]:
    return None if value is None else check_u64(value, what)


def check_policy(value: object) -> Policy:
    """`value` as a `Policy`: a member, or its name spelled as in the
    contract (`non-decreasing`, `strictly-increasing`); else `ArgumentError`
    (`policy_unknown`)."""
    if isinstance(value, Policy):
        return value
    if isinstance(value, str):
        for p in Policy:
            if p.value == value:
                return p
    raise ArgumentError("policy", f"must be non-decreasing or strictly-increasing, not {value!r}", "policy_unknown")
