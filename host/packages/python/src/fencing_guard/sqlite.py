"""Loading the fencing SQLite extension (host/engines/sqlite) into a `sqlite3` connection."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Union


class SqliteExtensionUnsupported(RuntimeError):
    """This Python's sqlite3 module cannot load extensions."""


def load_sqlite_extension(db: sqlite3.Connection, path: Union[str, Path]) -> None:
    """Loads `libfencing_sqlite` into `db`, so its protected tables can be written.

    Raises `SqliteExtensionUnsupported` when this Python was built without
    `--enable-loadable-sqlite-extensions` (many pyenv and some distribution
    builds); Debian's /usr/bin/python3 can load extensions.
    """
    if not hasattr(db, "enable_load_extension"):
        raise SqliteExtensionUnsupported(
            f"{sys.executable}: this Python's sqlite3 cannot load extensions (it was built without "
            "--enable-loadable-sqlite-extensions); use a Python that can, such as Debian's /usr/bin/python3"
        )
    db.enable_load_extension(True)
    try:
        db.load_extension(str(path))
    finally:
        db.enable_load_extension(False)
