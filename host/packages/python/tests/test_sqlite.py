"""`load_sqlite_extension` says plainly when this Python cannot load extensions."""

from __future__ import annotations

import sqlite3

import pytest
import os
from pathlib import Path

from conftest import ROOT

from fencing_guard import SqliteExtensionUnsupported, load_sqlite_extension

EXT = Path(os.environ.get("FENCING_SQLITE_EXT", ROOT / "target/debug/libfencing_sqlite"))


def test_loading_says_whether_this_python_can() -> None:
    db = sqlite3.connect(":memory:")
    if not hasattr(db, "enable_load_extension"):
        with pytest.raises(SqliteExtensionUnsupported, match="enable-loadable-sqlite-extensions"):
            load_sqlite_extension(db, EXT)
        return
    if not EXT.with_suffix(".so").exists():
        pytest.fail(f"{EXT}.so missing: scripts/sqlite-extension --debug")
    load_sqlite_extension(db, EXT)
    assert "fencing:guard/check@0.3.0" in db.execute("SELECT fencing_guard_info()").fetchone()[0]
    with pytest.raises(sqlite3.OperationalError, match="not authorized"):
        db.execute("SELECT load_extension('x')")  # loading was switched off again


class _NoExtensions:
    """A connection of a Python built without extension loading."""


def test_a_python_without_extension_loading_is_named() -> None:
    with pytest.raises(SqliteExtensionUnsupported, match="/usr/bin/python3"):
        load_sqlite_extension(_NoExtensions(), EXT)  # type: ignore[arg-type]
