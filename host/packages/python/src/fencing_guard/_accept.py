"""What the package accepts around the rules, the rules every fencing host
applies (`guest/src/accept.rs` in the repository): lock names, policy
names, tokens and proofs. A value they refuse raises `ArgumentError` (a
`ValueError`) whose `code` is the rule's (`name_control`, ...), the code the
shared argument vectors name and every host's error carries. A refusal of
the contract's own (a stale token) is a `Rejection`, never an exception.

- a **name** is 1 to 256 characters (code points) of Unicode text with no
  control character (U+0000-U+001F, U+007F-U+009F: NUL is refused, never
  truncated at) and no whitespace at either end; a lone surrogate is not
  text. Names compare as UTF-8 bytes: nothing normalizes or folds case;
- a **policy** given as text is spelled as in the contract:
  `non-decreasing` or `strictly-increasing`;
- a **token**, sequence or mark is an `int` from 0 to 2**64-1: a negative
  one is refused (`number_negative`), one above (`number_too_large`);
- a **proof** is bytes, at most 256 (a proof is 37 or 69 bytes).
"""

from __future__ import annotations

import re

#: Longest name, in characters.
MAX_NAME_CHARS = 256
#: Largest token, sequence or mark.
U64_MAX = (1 << 64) - 1
#: Longest proof, in bytes (512 hex digits, the bound of the proof's text).
MAX_PROOF_BYTES = 256

#: Unicode's White_Space characters, the ones no name begins or ends with
#: (spelled out: `str.isspace` and `str.strip` are not quite this set).
_WHITE_SPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class ArgumentError(ValueError):
    """A value the hosts' rules refuse; `code` names the rule (`name_empty`,
    `name_too_long`, `name_not_utf8`, `name_control`, `name_whitespace`,
    `policy_unknown`, `number_negative`, `number_too_large`,
    `proof_too_long`), and the message ends with it in parentheses."""

    def __init__(self, what: str, problem: str, code: str) -> None:
        super().__init__(f"{what} {problem} ({code})")
        #: The rule's code.
        self.code = code


def check_name(value: object, what: str = "name") -> str:
    """`value` if it is a name, else `TypeError` (not a `str`) or
    `ArgumentError` naming `what` and the rule's code."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise ArgumentError(what, "must not be empty", "name_empty")
    if len(value) > MAX_NAME_CHARS:
        raise ArgumentError(what, f"is {len(value)} characters, longer than {MAX_NAME_CHARS}", "name_too_long")
    if _SURROGATE.search(value):
        raise ArgumentError(what, "is not UTF-8 text (a lone surrogate)", "name_not_utf8")
    control = _CONTROL.search(value)
    if control:
        raise ArgumentError(what, f"contains control character U+{ord(control.group()):04X}", "name_control")
    if value[0] in _WHITE_SPACE or value[-1] in _WHITE_SPACE:
        raise ArgumentError(what, "must not begin or end with whitespace", "name_whitespace")
    return value


def check_u64(value: object, what: str) -> int:
    """`value` if it is an int in 0..2**64-1, else `TypeError` (not an int;
    a bool is not one) or `ArgumentError` naming `what`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ArgumentError(what, f"is {value}, negative: tokens and sequences are 0 or more", "number_negative")
    if value > U64_MAX:
        raise ArgumentError(what, f"is above {U64_MAX} (2^64-1), the largest token", "number_too_large")
    return value


def check_proof(value: object) -> bytes:
    """`value` as bytes if it is a proof's bytes, else `TypeError` or `ArgumentError`."""
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"proof must be bytes, not {type(value).__name__}")
    proof = bytes(value)
    if len(proof) > MAX_PROOF_BYTES:
        raise ArgumentError("proof", f"is {len(proof)} bytes, more than {MAX_PROOF_BYTES}", "proof_too_long")
    return proof
