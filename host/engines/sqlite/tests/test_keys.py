"""The fence named by the key as the table compares it, and every row a
statement deletes decided (issue 53, item 7): collations, affinity, rowids,
5 and 5.0, the auto-assigned INTEGER PRIMARY KEY, and the rows a REPLACE
removes on another unique key, whatever recursive_triggers says."""

from __future__ import annotations

import sqlite3
import unittest

from harness import connect, mark


def refused(test, db, sql, words, params=()):
    with test.assertRaises(sqlite3.Error, msg=sql) as e:
        db.execute(sql, params)
    test.assertIn(words, str(e.exception))
    return str(e.exception)


class KeyNames(unittest.TestCase):
    def setUp(self):
        self.db = connect()

    def protect(self, create, *args):
        self.db.execute(create)
        return self.db.execute(f"SELECT fencing_protect({', '.join('?' * len(args))})", args).fetchone()[0]

    def test_a_key_under_another_collation_is_refused_at_protect(self):
        for coll in ("NOCASE", "RTRIM"):
            with self.subTest(coll=coll):
                self.db.execute("DROP TABLE IF EXISTS docs")
                self.db.execute(f"CREATE TABLE docs(id TEXT COLLATE {coll} PRIMARY KEY, body TEXT, token INTEGER)")
                refused(self, self.db, "SELECT fencing_protect('docs', 'id', 'token')", f"compares by collation {coll}")
                # Nothing was protected: the table writes as before.
                self.db.execute("INSERT INTO docs VALUES ('invoice', 'v', 1)")

    def test_a_unique_key_under_nocase_cannot_replace_the_other_spelling(self):
        self.protect("CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER)", "docs", "id", "token")
        self.db.execute("CREATE UNIQUE INDEX docs_ci ON docs(id COLLATE NOCASE)")
        self.db.execute("SELECT fencing_protect('docs', 'id', 'token')")  # watches the new key
        self.db.execute("INSERT INTO docs VALUES ('invoice', 'v34', 34)")
        refused(self, self.db, "INSERT OR REPLACE INTO docs VALUES ('Invoice', 'stale', 1)", 'key_conflict')
        refused(self, self.db, "UPDATE docs SET id = 'INVOICE' WHERE id = 'invoice'", "cannot change")
        self.assertEqual(self.db.execute("SELECT id, body FROM docs").fetchall(), [("invoice", "v34")])
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 34, None))
        self.assertIsNone(mark(self.db, "Invoice"))

    def test_a_column_of_mixed_or_real_affinity_is_refused_at_protect(self):
        for declared in ("", "NUMERIC", "REAL", "BLOB", "DATE"):
            with self.subTest(declared=declared):
                self.db.execute("DROP TABLE IF EXISTS t")
                self.db.execute(f"CREATE TABLE t(id {declared} PRIMARY KEY, body TEXT, token INTEGER)")
                refused(self, self.db, "SELECT fencing_protect('t', 'id', 'token')", "declare it INTEGER or TEXT")

    def test_5_and_5_0_are_one_key_and_one_fence(self):
        shapes = (("INTEGER PRIMARY KEY", ""), ("INT PRIMARY KEY", ""), ("INTEGER PRIMARY KEY", " WITHOUT ROWID"))
        for n, (key, tail) in enumerate(shapes):
            with self.subTest(key=key, tail=tail):
                t = f"t{n}"
                self.protect(f"CREATE TABLE {t}(id {key}, body TEXT, token INTEGER){tail}", t, "id", "token")
                self.db.execute(f"INSERT INTO {t} VALUES (5{n}, 'v34', 34)")
                for k in (f"5{n}.0", f"5{n}", f" 5{n}", float(f"5{n}")):
                    refused(self, self.db, f"INSERT OR REPLACE INTO {t} VALUES (?, 'stale', 1)", "stale_token", (k,))
                self.assertEqual(self.db.execute(f"SELECT id, typeof(id), body FROM {t}").fetchall(),
                                 [(int(f"5{n}"), "integer", "v34")])
                self.assertEqual(mark(self.db, f"5{n}"), (f"5{n}", 34, None))
                self.assertEqual(mark(self.db, int(f"5{n}")), (f"5{n}", 34, None))

    def test_a_key_that_has_no_one_name_is_refused_at_write(self):
        self.protect("CREATE TABLE n(id INTEGER PRIMARY KEY, token INTEGER) WITHOUT ROWID", "n", "id", "token")
        refused(self, self.db, "INSERT INTO n VALUES (5.5, 1)", "the real 5.5")
        self.protect("CREATE TABLE s(id TEXT PRIMARY KEY, token INTEGER)", "s", "id", "token")
        refused(self, self.db, "INSERT INTO s VALUES (x'00ff', 1)", "got a blob")
        refused(self, self.db, "INSERT INTO s VALUES ('a' || char(0) || 'b', 1)", "(name_control)")
        refused(self, self.db, "INSERT INTO s VALUES (' invoice', 1)", "(name_whitespace)")
        # TEXT affinity makes 5 the text '5': one name, one fence.
        self.db.execute("INSERT INTO s VALUES (5, 9)")
        refused(self, self.db, "INSERT OR REPLACE INTO s VALUES ('5', 8)", "stale_token")
        self.assertEqual(mark(self.db, "5"), ("5", 9, None))

    def test_an_auto_assigned_integer_primary_key_is_refused(self):
        self.protect("CREATE TABLE t(id INTEGER PRIMARY KEY, body TEXT, token INTEGER)", "t", "id", "token")
        refused(self, self.db, "INSERT INTO t(body, token) VALUES ('x', 1)", "key_auto")
        refused(self, self.db, "INSERT INTO t VALUES (NULL, 'x', 1)", "key_auto")
        self.assertIsNone(mark(self.db, "-1"), "no fence named -1")
        self.assertEqual(self.db.execute("SELECT count(*) FROM t").fetchone(), (0,))
        self.db.execute("INSERT INTO t VALUES (7, 'x', 1)")
        self.assertEqual(mark(self.db, "7"), ("7", 1, None))


class Replace(unittest.TestCase):
    """Rows a REPLACE (or UPDATE OR REPLACE) removes on another unique key are
    never removed undecided: with recursive_triggers off (SQLite's default)
    and on."""

    def setUp(self):
        self.db = connect()
        self.db.execute("CREATE TABLE docs(id TEXT PRIMARY KEY, email TEXT UNIQUE, body TEXT, token INTEGER)")
        self.db.execute("SELECT fencing_protect('docs', 'id', 'token')")
        self.db.execute("INSERT INTO docs(rowid, id, email, body, token) VALUES (1, 'a', 'a@x', 'A', 34)")
        self.db.execute("INSERT INTO docs(rowid, id, email, body, token) VALUES (2, 'b', 'b@x', 'B', 5)")

    def rows(self):
        return self.db.execute("SELECT rowid, id, email, body, token FROM docs ORDER BY rowid").fetchall()

    def test_a_collision_with_another_resources_row_is_refused_in_both_modes(self):
        before = self.rows()
        for mode in ("OFF", "ON"):
            self.db.execute(f"PRAGMA recursive_triggers = {mode}")
            self.db.execute("SELECT fencing_present(99)")
            for sql in [
                "INSERT OR REPLACE INTO docs(rowid, id, email, body, token) VALUES (1, 'c', 'c@x', 'C', 50)",
                "REPLACE INTO docs(id, email, body, token) VALUES ('c', 'a@x', 'C', 50)",
                "UPDATE OR REPLACE docs SET rowid = 1 WHERE id = 'b'",
                "UPDATE OR REPLACE docs SET email = 'a@x' WHERE id = 'b'",
                "INSERT INTO docs(id, email, body, token) VALUES ('c', 'a@x', 'C', 50) "
                "ON CONFLICT(id) DO UPDATE SET body = excluded.body",
            ]:
                with self.subTest(mode=mode, sql=sql):
                    message = refused(self, self.db, sql, "key_conflict")
                    self.assertIn('resource "a"', message)
                    self.assertEqual(self.rows(), before)
        self.assertEqual(mark(self.db, "a"), ("a", 34, None))

    def test_replacing_the_same_resources_row(self):
        self.db.execute("PRAGMA recursive_triggers = OFF")
        self.db.execute("INSERT OR REPLACE INTO docs(id, email, body, token) VALUES ('a', 'a@x', 'A35', 35)")
        refused(self, self.db, "INSERT OR REPLACE INTO docs(id, email, body, token) VALUES ('a', 'a@x', 'late', 34)",
                "stale_token")
        # With recursive_triggers on, SQLite runs the DELETE trigger for the
        # replaced row: a DELETE, decided with the connection's presented token.
        self.db.execute("PRAGMA recursive_triggers = ON")
        refused(self, self.db, "INSERT OR REPLACE INTO docs(id, email, body, token) VALUES ('a', 'a@x', 'A36', 36)",
                "missing_token")
        self.db.execute("SELECT fencing_present(36)")
        self.db.execute("INSERT OR REPLACE INTO docs(id, email, body, token) VALUES ('a', 'a@x', 'A36', 36)")
        self.assertEqual(self.db.execute("SELECT body, token FROM docs WHERE id = 'a'").fetchone(), ("A36", 36))
        self.assertEqual(mark(self.db, "a"), ("a", 36, None))

    def test_a_unique_index_added_after_protect(self):
        self.db.execute("CREATE TABLE tags(id TEXT PRIMARY KEY, tag TEXT, token INTEGER)")
        self.db.execute("SELECT fencing_protect('tags', 'id', 'token')")
        self.db.execute("INSERT INTO tags VALUES ('a', 't1', 34), ('b', 't2', 5)")
        self.db.execute("CREATE UNIQUE INDEX tags_tag ON tags(tag)")
        # recursive_triggers on: the removed row is a DELETE, decided.
        self.db.execute("PRAGMA recursive_triggers = ON")
        refused(self, self.db, "REPLACE INTO tags VALUES ('c', 't1', 50)", "missing_token")
        # Protected again, the triggers watch the new key in both modes.
        self.db.execute("SELECT fencing_protect('tags', 'id', 'token')")
        self.db.execute("PRAGMA recursive_triggers = OFF")
        refused(self, self.db, "REPLACE INTO tags VALUES ('c', 't1', 50)", "key_conflict")
        self.assertEqual(self.db.execute("SELECT id FROM tags ORDER BY id").fetchall(), [("a",), ("b",)])

    def test_a_unique_index_on_an_expression_or_partial_is_refused_at_protect(self):
        for index in ("CREATE UNIQUE INDEX x ON t(lower(email))", "CREATE UNIQUE INDEX x ON t(email) WHERE email > ''"):
            with self.subTest(index=index):
                self.db.execute("DROP TABLE IF EXISTS t")
                self.db.execute("CREATE TABLE t(id TEXT PRIMARY KEY, email TEXT, token INTEGER)")
                self.db.execute(index)
                refused(self, self.db, "SELECT fencing_protect('t', 'id', 'token')", "unique index x")

    def test_a_foreign_key_cascade_is_decided_by_the_childs_triggers(self):
        self.db.execute("PRAGMA foreign_keys = ON")
        self.db.execute("CREATE TABLE parent(id TEXT PRIMARY KEY)")
        self.db.execute("CREATE TABLE child(id TEXT PRIMARY KEY, parent TEXT REFERENCES parent ON DELETE CASCADE, "
                        "token INTEGER) WITHOUT ROWID")
        self.db.execute("SELECT fencing_protect('child', 'id', 'token')")
        self.db.execute("INSERT INTO parent VALUES ('p')")
        self.db.execute("INSERT INTO child VALUES ('c', 'p', 34)")
        refused(self, self.db, "DELETE FROM parent", "missing_token")
        self.db.execute("SELECT fencing_present(33)")
        refused(self, self.db, "DELETE FROM parent", "stale_token")
        self.db.execute("SELECT fencing_present(34)")
        self.db.execute("DELETE FROM parent")
        self.assertEqual(self.db.execute("SELECT count(*) FROM child").fetchone(), (0,))
        self.assertEqual(mark(self.db, "c"), ("c", 34, None))
