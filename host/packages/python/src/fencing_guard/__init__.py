"""Fencing-token admission checks for Python storage code.

`Guard` runs the `fencing:guard@0.3.0` WebAssembly component bundled with
this package (the same rules every fencing host runs) under wasmtime::

    from fencing_guard import Fence, Guard, Sequencer

    guard = Guard()
    stored = Fence(lock="orders", high_water=34)
    verdict = guard.admit(stored, Sequencer(lock="orders", token=33))
    assert not verdict.admitted and verdict.reason == "stale_token"

A refusal is a `Rejection` value with its evidence, never an exception;
a value the hosts' rules refuse (an empty lock name, a NUL in one, a
negative token, a policy spelled `non_decreasing`) raises `ArgumentError`, a
`ValueError` whose `code` names the rule (`check_name` applies the name rule
alone).
With signed tokens, `guard.admit_signed(stored, presented, proof, keys)`
refuses a token whose proof (the grant's `fencing_proof`) was not made for
its lock and token by one of `keys` (`Keys([VerifierKey(...)])`).
`fencing_guard.client` talks to a fencing server's HTTP API and keeps a
lease alive (`Client.hold`).

Layout: `_accept.py` (what the package accepts: names, policies, numbers,
proofs), `_types.py` (the values), `_guard.py` (the component calls, the one
place that knows the WIT encoding), `client.py` (the HTTP client and
`HeldLock`), `sqlite.py` (loading the SQLite extension).
"""

from ._accept import ArgumentError, check_name
from ._guard import ContractError, Guard, bundled_component
from .sqlite import SqliteExtensionUnsupported, load_sqlite_extension
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
    Verdict,
    VerifierKey,
)

__all__ = [
    "Admission",
    "ArgumentError",
    "BatchOutcome",
    "BatchWrite",
    "ContractError",
    "Decision",
    "Fence",
    "FenceState",
    "Guard",
    "Keys",
    "Policy",
    "Reason",
    "Rejection",
    "Sequencer",
    "StreamOutcome",
    "Verdict",
    "VerifierKey",
    "bundled_component",
    "check_name",
    "load_sqlite_extension",
    "SqliteExtensionUnsupported",
]
