"""Names the triggers and functions read, renames, and the fence table's own
guards (issue 53, item 8): a TEMP table or an attached database cannot stand
in for the fences, the registry or a carrier; ALTER TABLE RENAME (table or
column) is followed without losing a mark; no UPDATE of fencing_fences lowers
one."""

from __future__ import annotations

import os
import sqlite3
import tempfile
import unittest

from harness import connect, mark, stored


def refused(test, db, sql, words, params=()):
    with test.assertRaises(sqlite3.Error, msg=sql) as e:
        db.execute(sql, params)
    test.assertIn(words, str(e.exception))
    return str(e.exception)


class Names(unittest.TestCase):
    """Table a keeps its marks in its rows (the carrier), b in fencing_fences;
    both hold resource r, whose mark a's row carries at 45."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "app.db")
        self.db = connect(self.path)
        self.db.execute("CREATE TABLE a(id TEXT PRIMARY KEY, body TEXT, token INTEGER) WITHOUT ROWID")
        self.db.execute("CREATE TABLE b(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        for t in ("a", "b"):
            self.db.execute(f"SELECT fencing_protect('{t}', 'id', 'token')")
        self.db.execute("INSERT INTO a VALUES ('r', 'v1', 1)")
        self.db.execute("UPDATE a SET body = 'v45', token = 45 WHERE id = 'r'")
        self.assertEqual(stored(self.db, "r"), (1, "a"))

    def tearDown(self):
        self.db.close()
        self.dir.cleanup()

    def assert_fenced_at_45(self, db):
        refused(self, db, "INSERT INTO main.b VALUES ('r', 'stale', 44)", "high_water 45")
        refused(self, db, "UPDATE main.a SET body = 'stale', token = 44 WHERE id = 'r'", "high_water 45")
        self.assertEqual(mark(db, "r"), ("r", 45, None))
        self.assertEqual(db.execute("SELECT body, token FROM main.a").fetchall(), [("v45", 45)])

    def test_temp_tables_cannot_stand_in_for_the_fences_the_registry_or_a_carrier(self):
        self.db.execute("CREATE TEMP TABLE a(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        self.db.execute("INSERT INTO temp.a VALUES ('r', 'shadow', 1)")
        self.db.execute("CREATE TEMP TABLE fencing_fences(resource TEXT PRIMARY KEY, lock TEXT, high_water INTEGER, "
                        "sequence INTEGER, carrier TEXT)")
        self.db.execute("INSERT INTO temp.fencing_fences VALUES ('r', 'r', 1, NULL, NULL)")
        self.db.execute("CREATE TEMP TABLE fencing_protected(tbl TEXT, resource_column TEXT, token_column TEXT, "
                        "fence_in_row INTEGER)")
        self.db.execute("INSERT INTO temp.fencing_protected VALUES ('a', 'id', 'body', 1)")
        self.db.execute("CREATE TEMP VIEW fencing_a_carried AS SELECT 'r' AS resource, 1 AS token")
        self.assert_fenced_at_45(self.db)
        self.db.execute("INSERT INTO main.b VALUES ('r', 'fresh', 46)")
        self.assertEqual(self.db.execute("SELECT high_water FROM main.fencing_fences").fetchone(), (46,))
        self.assertEqual(self.db.execute("SELECT high_water FROM temp.fencing_fences").fetchone(), (1,))

    def test_an_attached_database_cannot_stand_in(self):
        # The carrier is gone from main (dropped while protected): its marks
        # must fail closed, not be read from a table of the same name elsewhere.
        self.db.execute("DROP TABLE a")
        other = os.path.join(self.dir.name, "other.db")
        o = sqlite3.connect(other)
        o.executescript("CREATE TABLE fencing_fences(resource TEXT PRIMARY KEY, lock TEXT, high_water INTEGER, "
                        "sequence INTEGER, carrier TEXT); INSERT INTO fencing_fences VALUES ('r', 'r', 1, NULL, NULL);"
                        "CREATE TABLE a(id TEXT PRIMARY KEY, body TEXT, token INTEGER);"
                        "INSERT INTO a VALUES ('r', 'other', 1);"
                        "CREATE VIEW fencing_a_carried AS SELECT id AS resource, token FROM a;")
        o.close()
        self.db.execute("ATTACH DATABASE ? AS other", (other,))
        for token in (44, 46):
            refused(self, self.db, "INSERT INTO b VALUES ('r', 'stale', ?)", "carrier_missing", (token,))
        self.assertEqual(stored(self.db, "r"), (1, "a"))
        self.assertEqual(self.db.execute("SELECT count(*) FROM main.b").fetchone(), (0,))

    def test_the_protected_file_attached_under_another_name_is_refused(self):
        # A connection whose main holds fake fences attaches the protected
        # file as x: SQLite refuses its schema (a trigger of x names main.),
        # so none of its tables can be written through x.
        self.db.close()
        a = connect(":memory:")
        a.execute("CREATE TABLE fencing_fences(resource TEXT PRIMARY KEY, lock TEXT, high_water INTEGER, "
                  "sequence INTEGER, carrier TEXT) WITHOUT ROWID")
        a.execute("INSERT INTO fencing_fences VALUES ('r', 'r', 1, NULL, NULL)")
        refused(self, a, "ATTACH DATABASE ? AS x", "cannot reference objects in database main", (self.path,))
        with self.assertRaises(sqlite3.Error):
            a.execute("UPDATE x.a SET body = 'stale', token = 44 WHERE id = 'r'")
        a.close()
        self.db = connect(self.path)
        self.assert_fenced_at_45(self.db)

    def test_rename_table_is_followed_and_unprotect_keeps_the_mark(self):
        self.db.execute("ALTER TABLE a RENAME TO a2")
        refused(self, self.db, "UPDATE a2 SET body = 'stale', token = 44 WHERE id = 'r'", "high_water 45")
        refused(self, self.db, "INSERT INTO b VALUES ('r', 'stale', 44)", "high_water 45")
        self.assertEqual(mark(self.db, "r"), ("r", 45, None))
        self.db.execute("UPDATE a2 SET token = 46 WHERE id = 'r'")
        self.assertEqual(mark(self.db, "r"), ("r", 46, None))
        out = self.db.execute("SELECT fencing_unprotect('a')").fetchone()[0]
        self.assertIn("unprotected a2", out)
        self.assertEqual(stored(self.db, "r"), (46, None), "the carried mark moved into fencing_fences")
        refused(self, self.db, "INSERT INTO b VALUES ('r', 'stale', 45)", "high_water 46")
        # A rowid table's triggers look its rows up by name too: renamed, they still do.
        self.db.execute("INSERT INTO b(rowid, id, body, token) VALUES (7, 's', 'x', 3)")
        self.db.execute("ALTER TABLE b RENAME TO b2")
        refused(self, self.db, "INSERT INTO b2 VALUES ('r', 'stale', 45)", "high_water 46")
        refused(self, self.db, "INSERT OR REPLACE INTO b2(rowid, id, body, token) VALUES (7, 't', 'x', 9)", "key_conflict")

    def test_rename_column_is_followed(self):
        self.db.execute("ALTER TABLE a RENAME COLUMN token TO tok")
        self.db.execute("ALTER TABLE a RENAME COLUMN id TO key")
        self.assert_fenced_at_45_renamed()
        out = self.db.execute("SELECT fencing_unprotect('a')").fetchone()[0]
        self.assertIn("1 marks", out)
        self.assertEqual(stored(self.db, "r"), (45, None))

    def assert_fenced_at_45_renamed(self):
        refused(self, self.db, "INSERT INTO b VALUES ('r', 'stale', 44)", "high_water 45")
        refused(self, self.db, "UPDATE a SET body = 'stale', tok = 44 WHERE key = 'r'", "high_water 45")
        self.assertEqual(mark(self.db, "r"), ("r", 45, None))

    def test_protecting_a_renamed_table_under_its_new_name_moves_its_protection(self):
        self.db.execute("ALTER TABLE a RENAME TO a2")
        self.db.execute("CREATE TABLE a(id TEXT PRIMARY KEY, token INTEGER) WITHOUT ROWID")
        refused(self, self.db, "SELECT fencing_protect('a', 'id', 'token')", "on table a2 now")
        refused(self, self.db, "SELECT fencing_unprotect('a')", "on table a2 now")
        out = self.db.execute("SELECT fencing_protect('a2', 'id', 'token')").fetchone()[0]
        self.assertIn("protected a2", out)
        self.assertEqual(self.db.execute("SELECT tbl FROM fencing_protected ORDER BY tbl").fetchall(), [("a2",), ("b",)])
        triggers = {r[0] for r in self.db.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND tbl_name = 'a2'")}
        self.assertEqual(triggers, {f"fencing_a2_{op}" for op in ("insert", "update", "delete", "resource")})
        refused(self, self.db, "UPDATE a2 SET token = 44 WHERE id = 'r'", "high_water 45")
        self.db.execute("SELECT fencing_protect('a', 'id', 'token')")
        self.db.execute("INSERT INTO a VALUES ('s', 1)")

    def test_dropping_a_protected_column_is_refused_by_sqlite(self):
        for column in ("token", "id"):
            with self.subTest(column=column):
                with self.assertRaises(sqlite3.Error):
                    self.db.execute(f"ALTER TABLE b DROP COLUMN {column}")
        self.db.execute("ALTER TABLE b DROP COLUMN body")
        refused(self, self.db, "INSERT INTO b VALUES ('r', 44)", "high_water 45")

    def test_legacy_alter_table_renames_fail_closed_until_renamed_back(self):
        self.db.execute("PRAGMA legacy_alter_table = ON")
        self.db.execute("ALTER TABLE a RENAME TO a2")
        with self.assertRaises(sqlite3.Error):
            self.db.execute("UPDATE a2 SET token = 44 WHERE id = 'r'")
        refused(self, self.db, "INSERT INTO b VALUES ('r', 'x', 46)", "carrier_missing")
        self.db.execute("ALTER TABLE a2 RENAME TO a")
        self.db.execute("PRAGMA legacy_alter_table = OFF")
        self.assert_fenced_at_45(self.db)

    def test_no_update_of_the_fence_table_lowers_a_mark(self):
        for sql, words in [
            ("UPDATE fencing_fences SET carrier = NULL", "lowers its mark from 45 to 1"),
            ("UPDATE fencing_fences SET carrier = 'b'", "carrier_missing"),
            ("UPDATE fencing_fences SET high_water = 0, carrier = NULL", "lowers its stored high_water from 1 to 0"),
            ("UPDATE fencing_fences SET lock = 'other', high_water = 100, carrier = NULL", "re-binds it"),
            ("UPDATE fencing_fences SET resource = 's'", "another resource"),
            ("UPDATE fencing_fences SET high_water = 'lots'", "must be an integer"),
            ("UPDATE fencing_fences SET high_water = -5", "(number_negative)"),
            ("INSERT OR REPLACE INTO fencing_fences VALUES ('r', 'r', 1, NULL, NULL)", "lowers its mark from 45 to 1"),
            ("DELETE FROM fencing_fences", "fences are kept"),
        ]:
            with self.subTest(sql=sql):
                refused(self, self.db, sql, words)
                self.assertEqual(mark(self.db, "r"), ("r", 45, None))
        # A decision called by hand leaves nothing that lets a lower row in.
        self.db.execute("SELECT fencing_check_row('b', 'insert', 'r', NULL, 1, NULL, 'non-decreasing', "
                        "NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
        refused(self, self.db, "INSERT OR REPLACE INTO fencing_fences VALUES ('r', 'r', 1, NULL, NULL)", "lowers its mark")
        self.assertEqual(mark(self.db, "r"), ("r", 45, None))
        # A mark moves forward by UPDATE (an operator raising marks after a restore).
        self.db.execute("UPDATE fencing_fences SET high_water = 60, carrier = NULL")
        self.assertEqual(mark(self.db, "r"), ("r", 60, None))
        self.db.execute("INSERT INTO b VALUES ('s', 'x', 3)")
        self.db.execute("UPDATE fencing_fences SET sequence = 4 WHERE resource = 's'")
        refused(self, self.db, "UPDATE fencing_fences SET sequence = 2 WHERE resource = 's'", "takes its sequence back")
        refused(self, self.db, "UPDATE fencing_fences SET sequence = NULL WHERE resource = 's'", "takes its sequence back")

    def test_the_fence_table_renamed_or_dropped(self):
        self.db.execute("ALTER TABLE fencing_fences RENAME TO old_fences")
        # The triggers followed the rename: still fenced.
        refused(self, self.db, "INSERT INTO b VALUES ('r', 'stale', 44)", "high_water 45")
        refused(self, self.db, "SELECT fencing_protect('b', 'id', 'token')", "fencing_fences is missing")
        self.db.execute("ALTER TABLE old_fences RENAME TO fencing_fences")
        self.db.execute("DROP TABLE fencing_fences")
        with self.assertRaises(sqlite3.Error):
            self.db.execute("INSERT INTO b VALUES ('r', 'stale', 44)")
        refused(self, self.db, "SELECT fencing_protect('b', 'id', 'token')", "fencing_fences is missing")

    def test_a_table_squatting_on_a_carried_views_name_is_named_at_protect(self):
        # Even a sealed connection may rename its own table to a fencing_* name
        # no object holds yet; protecting a carrying table meant to read its
        # marks through that name then refuses and says why.
        self.db.execute("CREATE TABLE app(resource TEXT, token INTEGER)")
        self.db.execute("SELECT fencing_seal()")
        self.db.execute("ALTER TABLE app RENAME TO fencing_w_carried")
        self.db.close()
        self.db = connect(self.path)
        self.db.execute("CREATE TABLE w(id TEXT PRIMARY KEY, token INTEGER) WITHOUT ROWID")
        refused(self, self.db, "SELECT fencing_protect('w', 'id', 'token')", "is a table of its own")
        self.assertEqual(self.db.execute("SELECT count(*) FROM fencing_protected WHERE tbl = 'w'").fetchone(), (0,))
        self.db.execute("ALTER TABLE fencing_w_carried RENAME TO app")
        self.assertIn("in the rows", self.db.execute("SELECT fencing_protect('w', 'id', 'token')").fetchone()[0])
        self.assert_fenced_at_45(self.db)
