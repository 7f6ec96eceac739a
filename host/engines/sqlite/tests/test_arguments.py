"""The shared argument vectors (tests/vectors/arguments/, format at the end of
tests/vectors/README.md) through the extension's SQL functions: what SQLite
takes as a name, a policy, a signed 64-bit token and a proof, refused by the
rule's code exactly where fencing_runtime::accept refuses.

Entry points, per kind:
- name: a lock (fencing_admit), a lock presented out of band
  (fencing_present), a resource looked up (fencing_fence), and the key of a
  protected row (an INSERT into a table keyed by TEXT). Text with bytes that
  are not UTF-8 (`bytes_hex`) reaches SQLite as CAST(blob AS TEXT).
- policy: fencing_admit's and fencing_protect's policy.
- from_signed: the token of fencing_admit (a SQL integer).
- proof: fencing_present_proof and fencing_admit_signed, as hex text.
- number (a token as decimal text) and to_signed (a token handed back to a
  signed 64-bit host): SQLite has no entry point. Tokens are SQL integers (a
  token given as text is refused as not an integer), and every token the
  extension hands back came in as one.
"""

from __future__ import annotations

import json
import sqlite3
import unittest

from harness import ROOT, connect

NO_ENTRY_POINT = {"number", "to_signed"}


def cases():
    out = []
    for path in sorted((ROOT / "tests/vectors/arguments").glob("*.json")):
        out.extend(json.loads(path.read_text())["cases"])
    return out


def text_param(case):
    """The case's input as an SQL expression and its parameter."""
    if "bytes_hex" in case:
        return "CAST(? AS TEXT)", bytes.fromhex(case["bytes_hex"])
    return "?", case["text"] * case.get("repeat", 1)


class Arguments(unittest.TestCase):
    def setUp(self):
        self.db = connect()
        self.db.execute("CREATE TABLE keyed(id TEXT PRIMARY KEY, token INTEGER) WITHOUT ROWID")
        self.db.execute("SELECT fencing_protect('keyed', 'id', 'token')")

    def verdict(self, sql, params):
        """None when the statement ran, else its error text."""
        try:
            self.db.execute(sql, params).fetchall()
            return None
        except sqlite3.Error as e:
            return str(e)

    def assert_verdict(self, case, sql, params):
        got = self.verdict(sql, params)
        if case["expect"] == "ok":
            self.assertIsNone(got, sql)
        else:
            self.assertIsNotNone(got, f"{sql} took {case['name']}")
            self.assertIn(f"({case['expect']})", got)

    def name_entry_points(self, case):
        expr, value = text_param(case)
        return [
            (f"SELECT fencing_admit(NULL, NULL, NULL, {expr}, 1)", (value,)),
            (f"SELECT fencing_admit({expr}, 1, NULL, 'lock', 2)", (value,)),
            (f"SELECT fencing_present(1, {expr})", (value,)),
            (f"SELECT fencing_fence({expr})", (value,)),
            (f"INSERT OR REPLACE INTO keyed VALUES ({expr}, 1)", (value,)),
        ]

    def test_every_argument_vector_through_the_sql_functions(self):
        ran = {}
        for case in cases():
            kind = case["kind"]
            if kind in NO_ENTRY_POINT:
                continue
            with self.subTest(case=case["name"]):
                if kind == "name":
                    entries = self.name_entry_points(case)
                elif kind == "policy":
                    _, value = text_param(case)
                    entries = [("SELECT fencing_admit(NULL, NULL, NULL, 'l', 1, NULL, ?)", (value,)),
                               ("SELECT fencing_protect('keyed', 'id', 'token', NULL, NULL, ?)", (value,))]
                elif kind == "from_signed":
                    entries = [("SELECT fencing_admit(NULL, NULL, NULL, 'l', ?)", (case["value"],)),
                               ("SELECT fencing_present(?)", (case["value"],))]
                elif kind == "proof":
                    _, value = text_param(case)
                    self.db.execute("SELECT fencing_set_keys(1, 'hmac-sha256', ?)", (bytes(32),))
                    entries = [("SELECT fencing_present_proof(?)", (value,)),
                               ("SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', 1, NULL, ?)", (value,))]
                else:
                    self.fail(f"unknown kind {kind}")
                for sql, params in entries:
                    self.assert_verdict(case, sql, params)
                    self.db.execute("SELECT fencing_present(NULL)")
                if kind == "proof" and case["expect"] == "ok":
                    n = self.db.execute("SELECT fencing_present_proof(?)", (value,)).fetchone()[0]
                    self.assertEqual(n, len(case["value"]) // 2 if "value" in case else len(value) // 2)
                ran[kind] = ran.get(kind, 0) + 1
        print(f"\nargument vectors through the SQL functions: {ran}; no entry point: {sorted(NO_ENTRY_POINT)}")
        self.assertEqual(set(ran), {"name", "policy", "from_signed", "proof"})

    def test_the_kinds_sqlite_has_no_entry_point_for(self):
        # A token as text is not taken at all (SQL integers only), so its text rules never apply.
        for text in ("34", "034", "18446744073709551615"):
            with self.assertRaisesRegex(sqlite3.Error, "token must be an integer, got Text"):
                self.db.execute("SELECT fencing_admit(NULL, NULL, NULL, 'l', ?)", (text,)).fetchall()
        # Every token handed back fits a SQL integer: the largest one presentable comes back as itself.
        self.db.execute("SELECT fencing_present(?)", ((1 << 63) - 1,))
        self.assertEqual(self.db.execute("SELECT fencing_presented_token()").fetchone()[0], (1 << 63) - 1)
        with self.assertRaises(OverflowError):
            self.db.execute("SELECT fencing_present(?)", (1 << 63,))
