"""What a call through the package costs on this machine: one decision
admitted and refused, and a batch and a stream of 1,024 (the inputs of the
Rust runtime's `check` benchmark: a mostly advancing mix with some stale
writes). A batch is timed as `BatchWrite`s and as columns (two
`array('Q')`), each call reading the outcome's fence and admitted count, and
once more reading every verdict too (built on first read). Prints the median
of 9 rounds, each the mean over enough calls to run at least 50 ms.

Usage: python bench.py   (with the package installed, e.g. by scripts/test-python)
"""

from __future__ import annotations

import platform
import statistics
import time
from array import array

from importlib import metadata

from fencing_guard import BatchWrite, Fence, Guard, Sequencer

ROUNDS = 9


def median(f) -> float:
    """Seconds per call: the median of ROUNDS rounds."""
    n = 1
    start = time.perf_counter()
    while time.perf_counter() - start < 0.05:  # warm up, and size a round
        for _ in range(n):
            f()
        n *= 2
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t) / n)
    return statistics.median(times)


def main() -> None:
    guard = Guard()
    fence = Fence("orders", 34)
    lock = "storage:customer-orders-bucket"
    batch_fence = Fence(lock, 1000, 7)
    writes = [BatchWrite(1000 + i // 4 - (3 if i % 16 == 5 else 0), i) for i in range(1024)]
    tokens = [1000 + i // 2 - (3 if i % 16 == 5 else 0) for i in range(1024)]
    columns = (array("Q", [w.token for w in writes]), array("Q", [w.sequence for w in writes]))

    def summary(out):
        return out.fence, out.admitted_count

    rows = [
        ("admit, admitted", "us/call", lambda: guard.admit(fence, Sequencer("orders", 35))),
        ("admit, refused", "us/call", lambda: guard.admit(fence, Sequencer("orders", 33))),
        ("admit_batch, 1,024 BatchWrites", "us/batch", lambda: summary(guard.admit_batch(batch_fence, lock, writes))),
        ("  and every verdict read", "us/batch", lambda: guard.admit_batch(batch_fence, lock, writes).verdicts),
        ("admit_columns, 1,024 writes", "us/batch", lambda: summary(guard.admit_columns(batch_fence, lock, *columns))),
        ("  and every verdict read", "us/batch", lambda: guard.admit_columns(batch_fence, lock, *columns).verdicts),
        ("admit_stream, 1,024 tokens", "us/stream", lambda: guard.admit_stream(999, tokens)),
    ]
    print(f"python {platform.python_version()}, wasmtime {metadata.version('wasmtime')}, median of {ROUNDS} rounds")
    for name, unit, f in rows:
        print(f"{name:<32} {median(f) * 1e6:8.2f} {unit}")


if __name__ == "__main__":
    main()
