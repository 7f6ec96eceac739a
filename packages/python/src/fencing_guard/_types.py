"""The values of the admission check, as Python types.

They mirror the WIT contract `fencing:guard/check@0.3.0` (`wit/guard.wit`)
with Python names: every token, sequence and high-water mark is an `int` in
0..2**64-1, lock names are `str` compared as UTF-8 bytes (no normalization),
and a refusal is a `Rejection` value, never an exception.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Union

U64_MAX = (1 << 64) - 1


class Policy(str, enum.Enum):
    """How a token is compared with the stored high-water mark."""

    #: A token equal to the mark is admitted: one holder may write many times. The default.
    NON_DECREASING = "non_decreasing"
    #: Each token admits exactly one write: an equal token is refused as reused.
    STRICTLY_INCREASING = "strictly_increasing"


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
    - `invalid_token`, `wrong_lock`: none (a wrong lock's evidence is the caller's own fence).
    """

    reason: Reason
    presented: Optional[int] = None
    high_water: Optional[int] = None
    token: Optional[int] = None
    last: Optional[int] = None

    @property
    def admitted(self) -> bool:
        return False


#: The answer for one write.
Decision = Union[Admission, Rejection]


@dataclass(frozen=True)
class BatchWrite:
    """One write of a batch on a single resource and lock."""

    token: int
    sequence: Optional[int] = None


@dataclass(frozen=True)
class BatchOutcome:
    """A decision per write, in input order, and the fence to persist after the batch."""

    verdicts: list[Decision]
    #: None when nothing was admitted and the resource had no fence.
    fence: Optional[FenceState]


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


def check_u64(value: object, what: str) -> int:
    """`value` if it is an int in 0..2**64-1, else TypeError/ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= U64_MAX:
        raise ValueError(f"{what} must be in 0..{U64_MAX}, got {value}")
    return value


def check_optional_u64(value: object, what: str) -> Optional[int]:
    return None if value is None else check_u64(value, what)


def check_lock(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"{what} is not valid Unicode (lone surrogate at {e.start})") from None
    return value


def check_policy(value: object) -> Policy:
    try:
        return Policy(value)
    except ValueError:
        raise ValueError(f"policy must be one of {[p.value for p in Policy]}, got {value!r}") from None
