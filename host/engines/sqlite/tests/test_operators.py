"""Who may reset a fence in SQLite, and what the operator denies (issue 55,
item 1; docs/sqlite.md, "Who may reset a fence" and "Every operation"):
the recorded reset, DIRECTONLY functions, the defaults loading sets
(DEFENSIVE), trusted_schema, the seal, file permissions, and rollbacks and
copies that take marks back with their rows."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

from harness import EXT, connect, mark, stored


def refused(test, db, sql, words, params=()):
    with test.assertRaises(sqlite3.Error, msg=sql) as e:
        db.execute(sql, params)
    test.assertIn(words, str(e.exception))
    return str(e.exception)


class Operators(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "app.db")
        self.db = connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        self.db.execute("CREATE TABLE keyed(id TEXT PRIMARY KEY, body TEXT, token INTEGER) WITHOUT ROWID")
        for t in ("docs", "keyed"):
            self.db.execute(f"SELECT fencing_protect('{t}', 'id', 'token')")
        self.db.execute("INSERT INTO docs VALUES ('invoice', 'v90', 90)")
        self.db.execute("INSERT INTO keyed VALUES ('carried', 'v1', 1)")
        self.db.execute("UPDATE keyed SET token = 90 WHERE id = 'carried'")

    def tearDown(self):
        self.db.close()
        self.dir.cleanup()

    def records(self):
        rows = self.db.execute("SELECT resource, who, reason, before, after FROM fencing_resets ORDER BY id").fetchall()
        return [(r, w, why, b and json.loads(b), a and json.loads(a)) for r, w, why, b, a in rows]

    def test_fencing_reset_removes_or_rebinds_a_fence_and_records_it(self):
        refused(self, self.db, "SELECT fencing_reset('invoice', '')", "a reason is 1 to 1024 characters")
        refused(self, self.db, "SELECT fencing_reset('invoice', 'x', 'invoice', 0)", "1 or more")
        out = self.db.execute("SELECT fencing_reset('invoice', 'client pushed token 90 by mistake', 'invoice', 12)")
        self.assertIn("-> {\"lock\":\"invoice\",\"high_water\":12", out.fetchone()[0])
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 12, None))
        self.db.execute("UPDATE docs SET token = 13 WHERE id = 'invoice'")
        out = self.db.execute("SELECT fencing_reset('carried', 'lock service reinstalled')").fetchone()[0]
        self.assertIn("-> none", out)
        self.assertIsNone(mark(self.db, "carried"))
        self.db.execute("UPDATE keyed SET token = 2 WHERE id = 'carried'")  # the next write binds it anew
        self.assertEqual(mark(self.db, "carried"), ("carried", 2, None))
        records = self.records()
        self.assertEqual([(r[0], r[2]) for r in records],
                         [("invoice", "client pushed token 90 by mistake"), ("carried", "lock service reinstalled")])
        self.assertEqual(records[0][3], {"lock": "invoice", "high_water": 90, "sequence": None})
        self.assertEqual(records[1][3]["high_water"], 90, "the carried mark, not the stored 1")
        self.assertIsNone(records[1][4])
        self.assertRegex(records[0][1], rf"^uid {os.getuid()}, pid {os.getpid()}, .*python")

    def test_the_records_are_kept(self):
        self.db.execute("SELECT fencing_reset('invoice', 'drill')")
        for sql in ("DELETE FROM fencing_resets", "UPDATE fencing_resets SET reason = 'nothing happened'",
                    "INSERT INTO fencing_resets(at, resource, who, reason) VALUES ('now', 'x', 'me', 'forged')",
                    "INSERT OR REPLACE INTO fencing_resets(id, at, resource, who, reason) VALUES (1, 'now', 'x', 'me', 'y')"):
            with self.subTest(sql=sql):
                refused(self, self.db, sql, "reset records")
        self.assertEqual([r[2] for r in self.records()], ["drill"])

    def test_the_functions_that_reset_or_reconfigure_cannot_be_called_from_the_schema(self):
        for call in ("fencing_reset('invoice', 'x')", "fencing_unprotect('docs')", "fencing_protect('docs', 'id', 'token')",
                     "fencing_present(1000)", "fencing_set_keys(NULL)", "fencing_use_plugin(NULL)", "fencing_seal()",
                     "fencing_present_proof(NULL)"):
            with self.subTest(call=call):
                self.db.execute("DROP VIEW IF EXISTS v")
                self.db.execute(f"CREATE VIEW v AS SELECT {call}")
                refused(self, self.db, "SELECT * FROM v", "unsafe use of")
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 90, None))

    def test_loading_turns_on_defensive_so_sql_cannot_write_the_schema(self):
        plain = sqlite3.connect(self.path, isolation_level=None)
        for db, defended in ((self.db, True), (plain, False)):
            with self.subTest(extension=defended):
                db.execute("PRAGMA writable_schema = ON")
                try:
                    db.execute("UPDATE sqlite_schema SET sql = sql WHERE name = 'fencing_docs_update'")
                    wrote = True
                except sqlite3.Error:
                    wrote = False
                db.execute("PRAGMA writable_schema = OFF")
                self.assertEqual(wrote, not defended)
        plain.close()
        for db, defended in ((connect(), True), (sqlite3.connect(":memory:"), False)):
            with self.subTest(journal_mode_off=defended):
                self.assertEqual(db.execute("PRAGMA journal_mode = OFF").fetchone()[0], "memory" if defended else "off")
                db.close()

    def test_the_extension_works_under_trusted_schema_off_and_it_denies_a_fake(self):
        self.db.execute("PRAGMA trusted_schema = OFF")
        refused(self, self.db, "UPDATE docs SET token = 89", "stale_token")
        self.db.execute("UPDATE docs SET token = 91")
        self.db.execute("SELECT fencing_reset('invoice', 'drill under trusted_schema off', 'invoice', 95)")
        # A connection that registers its own fencing_* functions instead of
        # loading the extension: trusted_schema = OFF keeps them out of the triggers.
        fake = sqlite3.connect(self.path, isolation_level=None)
        for name, n in (("fencing_check_row", 14), ("fencing_pending", 2), ("fencing_fence_insert", 5),
                        ("fencing_fence_update", 10), ("fencing_fence_delete", 1)):
            fake.create_function(name, n, lambda *a: 0)
        fake.execute("PRAGMA trusted_schema = OFF")
        refused(self, fake, "UPDATE docs SET token = 1", "unsafe use of fencing_check_row()")
        fake.execute("PRAGMA trusted_schema = ON")
        fake.execute("UPDATE docs SET body = 'bypassed', token = 1")  # the operator's to deny: who opens the file
        fake.close()

    def test_a_sealed_connection_cannot_reset_unprotect_or_change_the_fences(self):
        out = self.db.execute("SELECT fencing_seal()").fetchone()[0]
        self.assertIn("2 protected tables", out)
        for sql in [
            "SELECT fencing_reset('invoice', 'x')", "SELECT fencing_unprotect('docs')",
            "SELECT fencing_protect('docs', 'id', 'body')", "SELECT fencing_set_keys(NULL)",
            "SELECT fencing_use_plugin(NULL)",
            "DROP TRIGGER fencing_fences_kept", "DROP TRIGGER fencing_docs_update", "DROP VIEW fencing_keyed_carried",
            "DROP TABLE docs", "DROP TABLE fencing_fences", "ALTER TABLE docs RENAME TO d2",
            "ALTER TABLE fencing_fences RENAME TO f2", "CREATE UNIQUE INDEX x ON docs(body)",
            "CREATE TEMP TRIGGER t BEFORE UPDATE ON main.fencing_fences BEGIN SELECT RAISE(IGNORE); END",
            "CREATE TRIGGER fencing_x AFTER INSERT ON docs BEGIN SELECT 1; END",
            "UPDATE fencing_fences SET high_water = high_water + 1",
            "INSERT INTO fencing_fences VALUES ('new', 'new', 1, NULL, NULL)", "DELETE FROM fencing_protected",
            "PRAGMA writable_schema = ON", "PRAGMA trusted_schema = ON",
        ]:
            with self.subTest(sql=sql):
                refused(self, self.db, sql, "not authorized")
        # Writes are fenced as before, and reads work.
        refused(self, self.db, "UPDATE docs SET token = 89", "stale_token")
        self.db.execute("UPDATE docs SET token = 91")
        self.db.execute("UPDATE keyed SET token = 91")
        self.db.execute("SELECT fencing_present(91)")
        self.db.execute("DELETE FROM keyed")
        self.assertEqual(mark(self.db, "carried"), ("carried", 91, None))
        self.db.execute("CREATE TABLE scratch(x)")
        self.db.execute("DROP TABLE scratch")
        # Only the program holding the connection lifts it, through the C API.
        self.db.set_authorizer(None)
        self.db.execute("SELECT fencing_reset('invoice', 'after the program lifted the seal')")

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to act as another user")
    def test_who_can_open_the_file_read_write_can_bypass_and_file_modes_deny_it(self):
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.execute("PRAGMA journal_mode=DELETE")
        os.chmod(self.dir.name, 0o755)
        os.chmod(self.path, 0o644)
        # A shell with triggers turned off writes around every fence...
        bypass = [".dbconfig enable_trigger off", "UPDATE docs SET body = 'bypass', token = 1;"]
        as_other = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "sqlite3", self.path]
        run = subprocess.run(as_other, input="\n".join(bypass), capture_output=True, text=True, timeout=60)
        self.assertIn("readonly database", run.stderr)
        self.assertEqual(self.db.execute("SELECT body, token FROM docs").fetchone(), ("v90", 90))
        # ...for whoever may write the file, here its owner.
        run = subprocess.run(["sqlite3", self.path], input="\n".join(bypass), capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.db.execute("SELECT body, token FROM docs").fetchone(), ("bypass", 1))

    def test_a_rollback_or_a_crash_takes_marks_back_with_their_rows(self):
        self.db.execute("BEGIN")
        self.db.execute("UPDATE docs SET body = 'v95', token = 95")
        self.db.execute("ROLLBACK")
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 90, None))
        script = (f"import sqlite3, os\ndb = sqlite3.connect({self.path!r}, isolation_level=None)\n"
                  f"db.enable_load_extension(True)\ndb.load_extension({EXT!r})\n"
                  "db.execute('BEGIN')\ndb.execute(\"UPDATE docs SET body = 'v96', token = 96\")\n"
                  "db.execute(\"UPDATE keyed SET body = 'v96', token = 96\")\nos._exit(0)\n")
        subprocess.run([os.environ.get("SQLITE_PYTHON", "/usr/bin/python3"), "-c", script], check=True, timeout=60)
        reopened = connect(self.path)
        for t, r in (("docs", "invoice"), ("keyed", "carried")):
            self.assertEqual(reopened.execute(f"SELECT token FROM {t}").fetchone(), (90,))
            self.assertEqual(mark(reopened, r), (r, 90, None))
            refused(self, reopened, f"UPDATE {t} SET token = 89", "stale_token")
        reopened.close()

    def test_an_older_copy_or_a_lost_wal_needs_the_operator_to_raise_marks(self):
        older = os.path.join(self.dir.name, "older.db")
        self.db.execute("VACUUM INTO ?", (older,))
        self.db.execute("UPDATE docs SET body = 'v95', token = 95")
        shutil.copyfile(older, self.path + ".restored")
        restored = connect(self.path + ".restored")
        # The copy's marks and rows went back together: 95's write is gone, and 91 would now be admitted.
        self.assertEqual(restored.execute("SELECT token FROM docs").fetchone(), (90,))
        self.assertEqual(mark(restored, "invoice"), ("invoice", 90, None))
        # The operator raises every mark above the lock service's tokens before clients write.
        restored.execute("SELECT fencing_reset('invoice', 'restored from older.db', 'invoice', 96)")
        refused(self, restored, "UPDATE docs SET token = 95", "stale_token")
        restored.execute("UPDATE docs SET token = 97")
        restored.close()

    def test_vacuum_keeps_every_mark(self):
        self.db.execute("VACUUM")
        refused(self, self.db, "UPDATE docs SET token = 89", "stale_token")
        refused(self, self.db, "UPDATE keyed SET token = 89", "stale_token")
        self.assertEqual(stored(self.db, "carried"), (1, "keyed"))
