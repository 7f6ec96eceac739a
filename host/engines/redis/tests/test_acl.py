"""The ACL users docs/redis.md proposes, read from the docs themselves:
the application user writes only through the fence and cannot reset, flush,
swap, reconfigure or reach the module's replication; the operator user
resets, and every reset is recorded with the ACL user that ran it."""

import os
import re
import unittest

import redis

from servers import Server
from test_module import WithServer, error_of

DOCS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "redis.md")


def docs_acl(user):
    """The `ACL SETUSER <user> ...` line of docs/redis.md, as arguments."""
    with open(DOCS) as f:
        lines = [line.strip() for line in f if line.strip().startswith(f"ACL SETUSER {user} ")]
    if len(lines) != 1:
        raise AssertionError(f"docs/redis.md should hold one ACL line for {user}, not {len(lines)}")
    return lines[0].split()


def password(args):
    return next(a[1:] for a in args if a.startswith(">"))


class DocsUsers(WithServer):
    def setUp(self):
        # DEBUG and MODULE allowed by the server: the ACL line is what must deny them.
        self.server = Server("--enable-debug-command", "yes", "--enable-module-command", "yes")
        self.r = self.server.client()
        self.users = {}
        for name in ("app", "fence-operator"):
            args = docs_acl(name)
            self.assertEqual(self.r.execute_command(*args), b"OK")
            self.users[name] = redis.Redis(host="127.0.0.1", port=self.server.port, username=name, password=password(args))

    def test_the_app_user_writes_the_docs_example_through_the_fence_only(self):
        app, r = self.users["app"], self.r
        _, first = app.execute_command("FENCING.ACQUIRE", "orders", "worker-0", 30000)
        app.execute_command("FENCING.RELEASE", "orders", first)
        token, lease = app.execute_command("FENCING.ACQUIRE", "orders", "worker-1", 30000)
        self.assertEqual(app.execute_command("FENCING.SET", "orders:invoice", "orders", token, "data"), b"OK")
        self.assertEqual(app.get("orders:invoice"), b"data")
        self.assertEqual(error_of(lambda: app.execute_command("FENCING.SET", "orders:invoice", "orders", token - 1, "late")),
                         f"STALE_TOKEN presented={token - 1} high_water={token}")
        self.assertEqual(app.execute_command("FENCING.APPEND", "orders:invoice", "orders", token, "+"), 5)
        self.assertEqual(app.execute_command("FENCING.FENCE", "orders:invoice")[1], str(token).encode())
        self.assertEqual(app.execute_command("FENCING.RENEW", "orders", lease, 30000), b"OK")
        self.assertEqual(app.execute_command("FENCING.LOCK", "orders")[0], b"worker-1")
        self.assertEqual(app.execute_command("FENCING.RELEASE", "orders", lease), b"OK")
        # Keys and locks outside its patterns are refused.
        self.assertIn("no permissions", error_of(lambda: app.execute_command("FENCING.SET", "other", "orders", token, "v")))
        self.assertIn("no permissions", error_of(lambda: app.execute_command("FENCING.ACQUIRE", "payments", "w", 1000)))

    def test_the_app_user_cannot_reset_flush_swap_or_reconfigure(self):
        app, r = self.users["app"], self.r
        token, _ = app.execute_command("FENCING.ACQUIRE", "orders", "w", 30000)
        app.execute_command("FENCING.SET", "orders:invoice", "orders", token, "v")
        denied = [
            ("FENCING.RESET", "orders:invoice", "I am late"),
            ("FENCING.RESET", "orders:invoice", "I am late", "REBIND", "orders", 1),
            ("FENCING.APPLY", "UNFENCE", "orders:invoice"),
            ("FENCING.RESETS",),
            ("SET", "orders:invoice", "unfenced"),
            ("DEL", "orders:invoice"),
            ("FLUSHALL",), ("FLUSHDB",), ("SWAPDB", 0, 1),
            ("CONFIG", "SET", "aof-use-rdb-preamble", "no"),
            ("CONFIG", "SET", "maxmemory-policy", "allkeys-lru"),
            ("DEBUG", "RELOAD"), ("MODULE", "UNLOAD", "fencing"),
            ("EVAL", "return redis.call('FENCING.RESET', KEYS[1], 'x')", 1, "orders:invoice"),
            ("SHUTDOWN", "NOSAVE"),
            ("MIGRATE", "127.0.0.1", 1, "orders:invoice", 0, 1000),
        ]
        for args in denied:
            self.assertIn("no permissions", error_of(lambda: app.execute_command(*args)), args)
        # FENCING.EXEC runs its command with the caller's rights: app has no HSET.
        self.assertIn("acl verification failed",
                      error_of(lambda: app.execute_command("FENCING.EXEC", "app:h", "orders", token, "HSET", "app:h", "f", "v")))
        self.assertIsNone(r.execute_command("FENCING.FENCE", "app:h"), "a refused command moves no fence")
        self.assertEqual(r.execute_command("FENCING.FENCE", "orders:invoice")[1], str(token).encode())
        self.assertEqual(r.get("orders:invoice"), b"v")
        self.assertEqual(r.execute_command("FENCING.RESETS"), [])

    def test_the_operator_resets_and_the_record_names_its_acl_user(self):
        app, operator, r = self.users["app"], self.users["fence-operator"], self.r
        token, _ = app.execute_command("FENCING.ACQUIRE", "orders", "w", 30000)
        app.execute_command("FENCING.SET", "orders:invoice", "orders", token, "v")
        record = operator.execute_command("FENCING.RESET", "orders:invoice", "un-brick after incident 7", "REBIND", "orders", token)
        self.assertEqual(operator.execute_command("FENCING.FENCE", "orders:invoice"), [b"orders", str(token).encode(), None])
        operator.execute_command("FENCING.RESET", "orders:invoice", "remove")
        self.assertIsNone(operator.execute_command("FENCING.FENCE", "orders:invoice"))
        latest, first = (dict(zip(e[::2], e[1::2])) for e in operator.execute_command("FENCING.RESETS"))
        self.assertEqual((first[b"id"], first[b"user"], first[b"reason"]), (record, b"fence-operator", b"un-brick after incident 7"))
        self.assertEqual((latest[b"user"], latest[b"after"]), (b"fence-operator", b"none"))
        self.assertIn('by user "fence-operator" because "remove"', self.server.log_text())
        # The operator may not write data or take locks: it resets fences.
        self.assertIn("no permissions", error_of(lambda: operator.execute_command("SET", "orders:invoice", "x")))
        self.assertIn("no permissions", error_of(lambda: operator.execute_command("FENCING.ACQUIRE", "orders", "op", 1000)))


if __name__ == "__main__":
    unittest.main()
