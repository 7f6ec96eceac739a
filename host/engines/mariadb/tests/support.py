"""What the tests share: one mariadbd for most of them (each test in a
database of its own), accounts as an application would have them, and the
refusals as a client sees them."""

import atexit
import itertools
import os

import pymysql

from servers import Server, remove_template

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "tests", "vectors")

_shared = None
_names = itertools.count(1)


def shared():
    """The server most tests share, started once."""
    global _shared
    if _shared is None:
        _shared = Server()
        atexit.register(_shared.destroy)
        atexit.register(remove_template)
    return _shared


def fresh_database(server, prefix="t"):
    """A new, empty database's name."""
    name = f"{prefix}{next(_names)}"
    with server.client() as c, c.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    return name


def writer(server, db, user=None):
    """An application account with what the docs give writers: SELECT, INSERT,
    UPDATE, DELETE and temporary tables on its own database, nothing else."""
    user = user or f"w_{db}"
    with server.client() as c, c.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE TEMPORARY TABLES ON {db}.* TO '{user}'@'%'")
    return server.client(user=user, password="pw", database=db, local_infile=True)


def refusal(cur, sql, args=None):
    """The error `sql` fails with: (errno, sqlstate, message)."""
    try:
        cur.execute(sql, args)
    except pymysql.err.Error as e:
        return e.args[0], getattr(e, "sqlstate", None), e.args[1] if len(e.args) > 1 else ""
    raise AssertionError(f"expected an error from {sql!r}")


def rows(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchall()


def one(cur, sql, args=None):
    cur.execute(sql, args)
    return cur.fetchone()[0]
