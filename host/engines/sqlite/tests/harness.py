"""What every SQLite extension test module shares: the library, a
connection that loaded it, and how to read a resource's mark."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
EXT = os.environ.get("FENCING_SQLITE_EXT", str(ROOT / "host/engines/sqlite/target/release/libfencing_sqlite"))
I64_MAX = (1 << 63) - 1


def connect(path: str = ":memory:") -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.enable_load_extension(True)
    db.load_extension(EXT)
    db.enable_load_extension(False)
    return db


def mark(db, resource):
    """The resource's mark as (lock, high_water, sequence), None without one."""
    out = db.execute("SELECT fencing_fence(?)", (resource,)).fetchone()[0]
    if out is None:
        return None
    f = json.loads(out)
    return (f["lock"], f["high_water"], f["sequence"])


def stored(db, resource):
    """The resource's row of fencing_fences as (high_water, carrier)."""
    return db.execute("SELECT high_water, carrier FROM main.fencing_fences WHERE resource = ?", (resource,)).fetchone()
