"""Shared fixtures: the repository's vectors, a file of random cases with the
native rules' verdicts, and a running `fencing serve`.

Run from a checkout, everything is found in it. Run against an installed
wheel with the tests copied elsewhere (scripts/test-python does), the
environment names what the checkout would have held: FENCING_BIN (the
`fencing` binary), FENCING_VECTORS (the vector files), FENCING_SQLITE_EXT
(the SQLite extension, without its suffix), and FENCING_INSTALLED=1 makes
the tests check that the package comes from the installed wheel."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

# The checkout's root (host/packages/python/tests/..); the tests copied
# outside the checkout (scripts/test-python) are given FENCING_BIN and
# FENCING_VECTORS instead, and their ROOT is never read.
_PARENTS = Path(__file__).resolve().parents
ROOT = _PARENTS[min(4, len(_PARENTS) - 1)]


def fencing_bin() -> Path:
    path = Path(os.environ.get("FENCING_BIN", ROOT / "target" / "debug" / "fencing"))
    if not path.is_file():
        pytest.fail(f"no fencing binary at {path}: cargo build -p fencing, or set FENCING_BIN")
    return path


def load_cases(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cases"]


def vector_files() -> list[Path]:
    files = sorted(Path(os.environ.get("FENCING_VECTORS", ROOT / "tests" / "vectors")).glob("*.json"))
    assert files, "no vector files"
    return files


@pytest.fixture(scope="session")
def random_cases(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """10,000 random cases whose expectations are the Rust rules' verdicts."""
    out = tmp_path_factory.mktemp("random") / "random.json"
    seed = os.environ.get("FENCING_RANDOM_SEED", "11")
    subprocess.run([fencing_bin(), "check", "--random", "10000", "--seed", seed, "--out", out], check=True, stdout=subprocess.DEVNULL)
    return load_cases(out)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def server():
    """A `fencing serve` (embedded store and lock service) on a free port; yields its base URL."""
    yield from _serve([])


@pytest.fixture()
def signed_server(tmp_path: Path):
    """A `fencing serve` that signs its grants and checks every write's proof,
    with a key from `fencing admin keygen`; yields (base URL, verify-key file)."""
    key = tmp_path / "signing.key"
    subprocess.run([fencing_bin(), "admin", "keygen", "--id", "1", "--out", key], check=True, stdout=subprocess.DEVNULL)
    public = tmp_path / "signing.key.pub"
    for base in _serve(["--signing-key", str(key), "--verify-keys", str(public)]):
        yield base, public


def _serve(extra: list[str]):
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        proc = subprocess.Popen(
            [fencing_bin(), "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    urllib.request.urlopen(base + "/metrics", timeout=1).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        err = proc.stderr.read().decode() if proc.stderr else ""
                        pytest.fail(f"fencing serve did not start: {err[-2000:]}")
                    time.sleep(0.05)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=20)
