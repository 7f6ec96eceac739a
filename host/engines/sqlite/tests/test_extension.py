"""The SQLite extension through Python's sqlite3 module and the sqlite3 shell.

Run with a Python whose sqlite3 can load extensions (Debian's
/usr/bin/python3): scripts/test-sqlite does. Environment:
  FENCING_SQLITE_EXT        the built library (without or with .so)
  FENCING_MISBEHAVING_WASM  the misbehaving test plugin (loop/trap/hog lock names)
  FENCING_RANDOM_VECTORS    random decision vectors to run with the shared ones

This module holds the decisions, the triggers and copies; the others, run
with it: test_arguments.py (the shared argument vectors), test_keys.py (the
fence named by the key as the table compares it, REPLACE's deletions),
test_names.py (names the triggers read, renames, the fence table's guards),
test_operators.py (resets, the seal, and what the operator denies).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness import EXT, I64_MAX, ROOT, connect, mark, stored


def admit(db, fence, lock, token, sequence, policy):
    """The SQL function's decision, in the vectors' vocabulary (whose policy
    names are JSON's snake_case; SQL takes the contract's spelling)."""
    f = fence or {}
    policy = policy and policy.replace("_", "-")
    out = json.loads(
        db.execute(
            "SELECT fencing_admit(?, ?, ?, ?, ?, ?, ?)",
            (f.get("lock"), f.get("high_water"), f.get("sequence"), lock, token, sequence, policy),
        ).fetchone()[0]
    )
    if out.pop("admitted"):
        return {"verdict": "admitted", **out}
    out["verdict"] = out.pop("reason")
    return out


def expected_verdict(v):
    v = dict(v)
    if v["verdict"] == "admitted":
        v.setdefault("sequence", None)
    if v["verdict"] == "sequence_regressed":
        v.setdefault("presented", None)
    return v


def numbers(case):
    """Every integer of a case, to tell whether SQL can present it."""
    out = []

    def walk(x):
        if isinstance(x, bool):
            return
        if isinstance(x, int):
            out.append(x)
        elif isinstance(x, dict):
            for k, v in x.items():
                if k != "expect":
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(case)
    return out


def locks(case):
    """Every lock name of a case."""
    out = [case.get("lock")]
    for k in ("sequencer", "fence"):
        if isinstance(case.get(k), dict):
            out.append(case[k].get("lock"))
    return [x for x in out if x is not None]


def is_name(text):
    """fencing_runtime::accept's name rule, as test_arguments.py checks it through the extension."""
    return (0 < len(text) <= 256 and text == text.strip()
            and not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in text))


def run_case(db, case):
    """(got, expected) for one vector, through fencing_admit only: a batch is
    one admit per write against the fence the admitted ones leave, a stream
    the same without sequences and with high-water 0 meaning no fence."""
    policy = case["policy"]
    if case["kind"] == "admit":
        s = case["sequencer"]
        return admit(db, case["fence"], s["lock"], s["token"], s.get("sequence"), policy), expected_verdict(case["expect"])
    if case["kind"] == "batch":
        fence = case["fence"]
        got = []
        for w in case["writes"]:
            v = admit(db, fence, case["lock"], w["token"], w.get("sequence"), policy)
            if v["verdict"] == "admitted":
                fence = {"lock": case["lock"], "high_water": v["high_water"], "sequence": v["sequence"]}
            got.append(v)
        state = None if fence is None else {"high_water": fence["high_water"], "sequence": fence.get("sequence")}
        e = case["expect"]
        ef = e["fence"] and {"high_water": e["fence"]["high_water"], "sequence": e["fence"].get("sequence")}
        return {"verdicts": got, "fence": state}, {"verdicts": [expected_verdict(v) for v in e["verdicts"]], "fence": ef}
    hw = case["high_water"]
    got = []
    for t in case["tokens"]:
        v = admit(db, None if hw == 0 else {"lock": "stream", "high_water": hw}, "stream", t, None, policy)
        if v["verdict"] == "admitted":
            hw = v["high_water"]
        got.append(v["verdict"])
    return {"verdicts": got, "high_water": hw}, case["expect"]


class Vectors(unittest.TestCase):
    def test_every_presentable_vector_through_the_sql_function(self):
        db = connect()
        files = sorted((ROOT / "tests/vectors").glob("*.json"))
        extra = os.environ.get("FENCING_RANDOM_VECTORS")
        if extra:
            files.append(Path(extra))
        ran = skipped = unnamed = 0
        for f in files:
            for case in json.loads(f.read_text())["cases"]:
                if any(n > I64_MAX for n in numbers(case)):
                    skipped += 1  # SQL integers stop at 2^63-1.
                    continue
                bad = [lock for lock in locks(case) if not is_name(lock)]
                if bad:
                    # The host refuses the name before any decision (test_arguments.py).
                    with self.subTest(case=case["name"]), self.assertRaisesRegex(sqlite3.Error, r"\(name_[a-z_]+\)"):
                        db.execute("SELECT fencing_admit(NULL, NULL, NULL, ?, 1)", (bad[0],)).fetchall()
                    unnamed += 1
                    continue
                with self.subTest(case=case["name"]):
                    got, want = run_case(db, case)
                    self.assertEqual(got, want)
                ran += 1
        print(f"\nvectors through fencing_admit: {ran} run, {skipped} not presentable in SQL (above 2^63-1), "
              f"{unnamed} refused for a lock that is not a name")
        self.assertGreater(ran, 90)

    def test_select_load_extension_loads_it_too(self):
        db = sqlite3.connect(":memory:")
        db.enable_load_extension(True)
        db.execute("SELECT load_extension(?)", (EXT,))
        self.assertIn("fencing:guard/check@0.3.0", db.execute("SELECT fencing_guard_info()").fetchone()[0])

    def test_bad_arguments_are_named(self):
        db = connect()
        for sql, words in [
            ("SELECT fencing_admit(NULL, NULL, NULL, 'l', -1)", "token -1 is negative"),
            ("SELECT fencing_admit(NULL, NULL, NULL, 'l', 'x')", "token must be an integer"),
            ("SELECT fencing_admit(NULL, NULL, NULL, 'l', 1, NULL, 'newest')", "policy_unknown"),
            ("SELECT fencing_admit(NULL, NULL, NULL, 'l', 1, NULL, 'strictly_increasing')", "policy_unknown"),
            ("SELECT fencing_admit('l', NULL, NULL, 'l', 1)", "current_high_water is NULL"),
            ("SELECT fencing_admit('l')", "takes 5 to 7 arguments"),
            ("SELECT fencing_protect('nope', 'a', 'b')", "no table nope"),
            ("SELECT fencing_present(NULL, 'lock')", "clears"),
        ]:
            with self.subTest(sql=sql):
                with self.assertRaises(sqlite3.Error) as e:
                    db.execute(sql).fetchall()
                self.assertIn(words, str(e.exception))


class Signed(unittest.TestCase):
    """fencing_set_keys and fencing_admit_signed against the shared proof vectors."""

    def test_every_proof_vector(self):
        db = connect()
        ran = 0
        for path in sorted((ROOT / "tests/vectors/proofs").glob("*.json")):
            file = json.loads(path.read_text())
            for case in file["cases"]:
                with self.subTest(case=case["name"]):
                    args = []
                    for name in case["verifier"]:
                        k = file["keys"][name]
                        args += [k["id"], k["algorithm"], bytes.fromhex(k["material"])]
                    db.execute(f"SELECT fencing_set_keys({', '.join('?' * len(args))})", args)
                    f, s = case["fence"] or {}, case["sequencer"]
                    out = json.loads(db.execute(
                        "SELECT fencing_admit_signed(?, ?, ?, ?, ?, ?, ?, ?)",
                        (f.get("lock"), f.get("high_water"), f.get("sequence"), s["lock"], s["token"], s.get("sequence"),
                         bytes.fromhex(case["proof"]["hex"]), case["policy"].replace("_", "-")),
                    ).fetchone()[0])
                    if out.pop("admitted"):
                        out["verdict"] = "admitted"
                    else:
                        out["verdict"] = out.pop("reason")
                    self.assertEqual(out, expected_verdict(case["expect"]))
                ran += 1
        self.assertGreaterEqual(ran, 20)

    def test_the_proof_as_hex_text_and_bad_keys(self):
        db = connect()
        key = bytes(32)
        self.assertEqual(db.execute("SELECT fencing_set_keys(1, 'hmac-sha256', ?)", (key,)).fetchone()[0], 1)
        out = json.loads(db.execute("SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', 5, NULL, '')").fetchone()[0])
        self.assertEqual(out, {"admitted": False, "reason": "proof_missing"})
        for sql, args, words in [
            ("SELECT fencing_set_keys(1, 'hmac-sha256', ?)", (bytes(16),), "verifier key 1 is not a key of its algorithm"),
            ("SELECT fencing_set_keys(1, 'rsa', ?)", (key,), "not ed25519 or hmac-sha256"),
            ("SELECT fencing_set_keys(1, 'ed25519')", (), "in threes"),
            ("SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', 5, NULL, 'zz')", (), "hex digits"),
            ("SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', -5, NULL, '')", (), "token -5 is negative"),
        ]:
            with self.subTest(sql=sql):
                with self.assertRaises(sqlite3.Error) as e:
                    db.execute(sql, args).fetchall()
                self.assertIn(words, str(e.exception))
        db.execute("SELECT fencing_set_keys(NULL)")
        with self.assertRaises(sqlite3.Error) as e:
            db.execute("SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', 5, NULL, '')").fetchall()
        self.assertIn("fencing_set_keys first", str(e.exception))


def hmac_proof(secret: bytes, key_id: int, lock: str, token: int) -> bytes:
    """A proof as the lock service makes it with an HMAC-SHA256 key (docs/design.md, "Signed tokens")."""
    import hashlib
    import hmac
    head = key_id.to_bytes(4, "big")
    message = b"fencing-proof-v1\0" + head + token.to_bytes(8, "big") + lock.encode()
    return b"\x01" + head + hmac.new(secret, message, hashlib.sha256).digest()


class SignedProtected(unittest.TestCase):
    """A protected table on a connection with keys: every row presents the
    proof of fencing_present_proof, checked before the mark."""

    SECRET = bytes(range(32))

    def setUp(self):
        self.db = connect()
        self.db.execute("CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        self.db.execute("SELECT fencing_protect('docs', 'id', 'token')")
        self.assertEqual(self.db.execute("SELECT fencing_set_keys(5, 'hmac-sha256', ?)", (self.SECRET,)).fetchone()[0], 1)

    def proof(self, token, lock="invoice"):
        return hmac_proof(self.SECRET, 5, lock, token)

    def write(self, body, token, proof):
        self.db.execute("SELECT fencing_present_proof(?)", (proof,))
        self.db.execute("INSERT INTO docs VALUES ('invoice', ?, ?) ON CONFLICT(id) DO UPDATE SET body = excluded.body, "
                        "token = excluded.token", (body, token))

    def refused(self, body, token, proof):
        with self.assertRaises(sqlite3.Error) as e:
            self.write(body, token, proof)
        return str(e.exception)

    def test_forgeries_are_refused_by_reason_and_the_paused_holder_still_loses(self):
        self.write("A", 33, self.proof(33))
        for proof, reason in [(None, "proof_missing"), (self.proof(33), "proof_bad"), (self.proof(34)[:20], "proof_malformed"),
                              (self.proof(34, lock="other"), "proof_bad"), (hmac_proof(self.SECRET, 6, "invoice", 34), "proof_unknown_key")]:
            with self.subTest(reason=reason, proof=proof):
                message = self.refused("forged", 34, proof)
                self.assertIn(f"fencing: {reason}: table docs", message)
                self.assertIn("presented token 34", message)
        self.assertEqual(self.db.execute("SELECT body, token FROM docs").fetchone(), ("A", 33), "no forgery was written")
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 33, None), "no forgery moved the mark")
        self.write("B", 34, self.proof(34).hex())  # hex text is taken too
        self.assertIn("stale_token", self.refused("A-late", 33, self.proof(33)))
        self.assertEqual(self.db.execute("SELECT body, token FROM docs").fetchone(), ("B", 34))
        with self.assertRaises(sqlite3.Error) as e:
            self.db.execute("SELECT fencing_present_proof('zz')")
        self.assertIn("hex digits", str(e.exception))

    def test_a_connection_without_keys_decides_unsigned(self):
        self.db.execute("SELECT fencing_set_keys(NULL)")
        self.write("unsigned", 7, None)
        self.assertEqual(mark(self.db, "invoice"), ("invoice", 7, None))


class Protected(unittest.TestCase):
    """Every write of a rowid table writes the fence row."""

    SHAPE = ""
    MARKS = "in fencing_fences"

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "app.db")
        self.db = connect(self.path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER, lock TEXT, seq INTEGER){self.SHAPE}")
        out = self.db.execute("SELECT fencing_protect('docs', 'id', 'token', 'lock', 'seq')").fetchone()[0]
        self.assertTrue(out.endswith(self.MARKS), out)

    def tearDown(self):
        self.db.close()
        self.dir.cleanup()

    def fence(self, resource):
        return mark(self.db, resource)

    def test_the_gc_pause_story(self):
        self.db.execute("INSERT INTO docs(id, body, token) VALUES ('invoice', 'v1', 1)")
        for token in range(2, 35):
            self.db.execute("UPDATE docs SET body = ?, token = ? WHERE id = 'invoice'", (f"written with {token}", token))
        with self.assertRaises(sqlite3.Error) as e:
            self.db.execute("UPDATE docs SET body = 'paused holder', token = 33 WHERE id = 'invoice'")
        message = str(e.exception)
        for words in ("stale_token", "presented token 33", "high_water 34"):
            self.assertIn(words, message)
        self.assertEqual(self.db.execute("SELECT body, token FROM docs").fetchone(), ("written with 34", 34))
        self.assertEqual(self.fence("invoice"), ("invoice", 34, None))

    def test_a_refused_row_undoes_its_whole_statement_and_transaction(self):
        self.db.executemany("INSERT INTO docs(id, body, token) VALUES (?, 'old', ?)", [("a", 5), ("b", 9), ("c", 5)])
        self.db.execute("BEGIN")
        self.db.execute("INSERT INTO docs(id, body, token) VALUES ('d', 'new', 1)")
        with self.assertRaises(sqlite3.Error):
            # Token 7: admitted for a and c, stale for b (whose mark is 9).
            self.db.execute("UPDATE docs SET body = 'new', token = 7 WHERE id IN ('a', 'b', 'c')")
        self.assertEqual(self.db.execute("SELECT count(*) FROM docs WHERE body = 'new' AND id != 'd'").fetchone(), (0,))
        self.assertEqual(self.fence("a")[1], 5, "the statement's admitted rows moved no fence")
        self.db.execute("ROLLBACK")
        self.assertEqual(self.db.execute("SELECT id FROM docs ORDER BY id").fetchall(), [("a",), ("b",), ("c",)])
        self.assertIsNone(self.fence("d"))

    def test_what_a_row_presents(self):
        self.db.execute("INSERT INTO docs(id, body, token) VALUES ('r', 'x', 10)")
        # An UPDATE that leaves the token column alone presents nothing of its own.
        with self.assertRaisesRegex(sqlite3.Error, "missing_token"):
            self.db.execute("UPDATE docs SET body = 'y' WHERE id = 'r'")
        self.db.execute("SELECT fencing_present(11)")
        self.db.execute("UPDATE docs SET body = 'y' WHERE id = 'r'")
        self.assertEqual(self.fence("r")[1], 11)
        self.db.execute("SELECT fencing_present(NULL)")
        with self.assertRaisesRegex(sqlite3.Error, "missing_token"):
            self.db.execute("DELETE FROM docs WHERE id = 'r'")
        self.db.execute("SELECT fencing_present(10)")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("DELETE FROM docs WHERE id = 'r'")
        self.db.execute("SELECT fencing_present(11)")
        self.db.execute("DELETE FROM docs WHERE id = 'r'")
        self.assertEqual(self.fence("r")[1], 11, "the fence outlives the row")
        self.db.execute("SELECT fencing_present(NULL)")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("INSERT INTO docs(id, body, token) VALUES ('r', 'back', 3)")

    def test_locks_and_sequences(self):
        self.db.execute("INSERT INTO docs(id, body, token, lock, seq) VALUES ('s', 'a', 4, 'locks/s', 1)")
        self.assertEqual(self.fence("s"), ("locks/s", 4, 1))
        with self.assertRaisesRegex(sqlite3.Error, "wrong_lock"):
            self.db.execute("UPDATE docs SET token = 5, lock = 'locks/other' WHERE id = 's'")
        # Setting the token column to the value it has is not presenting it.
        with self.assertRaisesRegex(sqlite3.Error, "missing_token"):
            self.db.execute("UPDATE docs SET body = 'b', seq = 2, token = 4 WHERE id = 's'")
        self.db.execute("SELECT fencing_present(4)")
        with self.assertRaisesRegex(sqlite3.Error, "sequence_regressed"):
            self.db.execute("UPDATE docs SET body = 'b', seq = 0 WHERE id = 's'")
        self.db.execute("SELECT fencing_present(NULL)")
        self.db.execute("UPDATE docs SET body = 'b', seq = 2 WHERE id = 's' AND fencing_present(4) = 4")
        self.assertEqual(self.fence("s"), ("locks/s", 4, 2))
        with self.assertRaisesRegex(sqlite3.Error, "cannot change"):
            self.db.execute("UPDATE docs SET id = 't' WHERE id = 's'")

    def test_the_fence_table_never_moves_backwards(self):
        self.db.execute("INSERT INTO docs(id, body, token) VALUES ('f', 'x', 8)")
        with self.assertRaisesRegex(sqlite3.Error, "never moves backwards"):
            self.db.execute("UPDATE fencing_fences SET high_water = 1")
        with self.assertRaisesRegex(sqlite3.Error, "fences are kept"):
            self.db.execute("DELETE FROM fencing_fences")
        self.assertEqual(self.fence("f")[1], 8)

    def test_strict_policy_and_unprotect(self):
        self.db.execute("CREATE TABLE once(k INTEGER PRIMARY KEY, token INTEGER)")
        self.db.execute("SELECT fencing_protect('once', 'k', 'token', NULL, NULL, 'strictly-increasing')")
        self.db.execute("INSERT INTO once VALUES (1, 3)")
        with self.assertRaisesRegex(sqlite3.Error, "token_reused"):
            self.db.execute("UPDATE once SET token = 3 WHERE k = 1 AND fencing_present(3)")
        self.db.execute("SELECT fencing_unprotect('once')")
        self.db.execute("UPDATE once SET token = 1 WHERE k = 1")  # unfenced now
        with self.assertRaisesRegex(sqlite3.Error, "policy_unknown"):
            self.db.execute("SELECT fencing_protect('once', 'k', 'token', NULL, NULL, 'strictly_increasing')")
        self.db.execute("SELECT fencing_protect('once', 'k', 'token', NULL, NULL, 'strictly-increasing')")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("UPDATE once SET token = 2 WHERE k = 1")

    def test_protection_is_in_the_schema_for_every_connection(self):
        other = connect(self.path)
        other.execute("INSERT INTO docs(id, body, token) VALUES ('shared', 'x', 20)")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("UPDATE docs SET token = 19 WHERE id = 'shared'")
        other.close()

    def test_a_connection_without_the_extension_cannot_write_protected_tables(self):
        plain = sqlite3.connect(self.path, isolation_level=None)
        with self.assertRaisesRegex(sqlite3.Error, "no such function"):
            plain.execute("INSERT INTO docs(id, body, token) VALUES ('p', 'x', 1)")
        plain.close()

    @unittest.skipUnless(os.environ.get("FENCING_MISBEHAVING_WASM"), "set FENCING_MISBEHAVING_WASM")
    def test_a_misbehaving_plugin_fails_the_statement_and_the_connection_lives_on(self):
        plugin = os.environ["FENCING_MISBEHAVING_WASM"]
        self.db.execute("SELECT fencing_use_plugin(?)", (plugin,))
        for lock, failure in (("loop", "guard_timeout"), ("trap", "guard_trap"), ("hog", "guard_out_of_memory")):
            with self.subTest(lock=lock):
                with self.assertRaises(sqlite3.Error) as e:
                    self.db.execute("INSERT INTO docs(id, body, token, lock) VALUES (?, 'x', 1, ?)", (lock, lock))
                self.assertIn("guard_failure", str(e.exception))
                self.assertIn(failure, str(e.exception))
                self.assertIsNone(self.fence(lock))
        self.db.execute("INSERT INTO docs(id, body, token) VALUES ('fine', 'x', 1)")  # real rules for other names
        self.assertIn(plugin, self.db.execute("SELECT fencing_guard_info()").fetchone()[0])
        self.db.execute("SELECT fencing_use_plugin(NULL)")
        self.db.execute("INSERT INTO docs(id, body, token, lock) VALUES ('loop', 'x', 1, 'loop')")
        self.assertEqual(self.fence("loop"), ("loop", 1, None))
        with self.assertRaisesRegex(sqlite3.Error, "cannot load"):
            self.db.execute("SELECT fencing_use_plugin('/nonexistent.wasm')")


class ProtectedKeyed(Protected):
    """The same tests on a WITHOUT ROWID table keyed by the resource, whose rows carry their marks."""

    SHAPE = " WITHOUT ROWID"
    MARKS = "in the rows (fence in row)"


class FenceInRow(unittest.TestCase):
    """Where a mark lives when the protected rows carry their fences (fence in row)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.db = connect(os.path.join(self.dir.name, "app.db"))
        self.db.execute("CREATE TABLE a(id TEXT PRIMARY KEY, body TEXT, token INTEGER) WITHOUT ROWID")
        self.db.execute("CREATE TABLE b(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        for t in ("a", "b"):
            self.db.execute(f"SELECT fencing_protect('{t}', 'id', 'token')")

    def tearDown(self):
        self.db.close()
        self.dir.cleanup()

    def test_the_row_carries_the_mark_and_a_stale_write_is_still_refused(self):
        self.db.execute("INSERT INTO a VALUES ('r', 'v1', 1)")
        self.assertEqual(stored(self.db, "r"), (1, "a"))
        for token in range(2, 35):
            self.db.execute("UPDATE a SET body = ?, token = ? WHERE id = 'r'", (f"v{token}", token))
        self.assertEqual(stored(self.db, "r"), (1, "a"), "the fence row was not rewritten")
        self.assertEqual(mark(self.db, "r"), ("r", 34, None))
        with self.assertRaisesRegex(sqlite3.Error, "stale_token.*presented token 33, high_water 34"):
            self.db.execute("UPDATE a SET body = 'paused', token = 33 WHERE id = 'r'")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("INSERT OR REPLACE INTO a VALUES ('r', 'replaced by a paused holder', 20)")
        self.db.execute("INSERT OR REPLACE INTO a VALUES ('r', 'replaced', 35)")
        self.assertEqual(self.db.execute("SELECT body, token FROM a").fetchall(), [("replaced", 35)])
        self.assertEqual(mark(self.db, "r"), ("r", 35, None))

    def test_a_delete_moves_the_mark_into_the_fence_row(self):
        self.db.execute("INSERT INTO a VALUES ('r', 'v', 1)")
        self.db.execute("UPDATE a SET token = 9 WHERE id = 'r'")
        self.db.execute("SELECT fencing_present(9)")
        self.db.execute("DELETE FROM a WHERE id = 'r'")
        self.db.execute("SELECT fencing_present(NULL)")
        self.assertEqual(stored(self.db, "r"), (9, None))
        with self.assertRaisesRegex(sqlite3.Error, "stale_token.*high_water 9"):
            self.db.execute("INSERT INTO a VALUES ('r', 'back', 8)")

    def test_an_update_presenting_its_token_out_of_band_writes_the_fence_row(self):
        self.db.execute("INSERT INTO a VALUES ('r', 'v', 1)")
        self.db.execute("UPDATE a SET body = 'w' WHERE id = 'r' AND fencing_present(5)")
        self.assertEqual(stored(self.db, "r"), (5, None))
        self.assertEqual(mark(self.db, "r"), ("r", 5, None))
        self.db.execute("SELECT fencing_present(NULL)")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token"):
            self.db.execute("UPDATE a SET token = 4 WHERE id = 'r'")

    def test_tables_sharing_a_resource_share_its_mark(self):
        self.db.execute("INSERT INTO a VALUES ('r', 'v', 1)")
        self.db.execute("UPDATE a SET token = 7 WHERE id = 'r'")
        self.assertEqual(stored(self.db, "r"), (1, "a"))
        # b's trigger reads what a's row carries.
        with self.assertRaisesRegex(sqlite3.Error, "stale_token.*high_water 7"):
            self.db.execute("INSERT INTO b VALUES ('r', 'stale', 6)")
        self.db.execute("INSERT INTO b VALUES ('r', 'fresh', 8)")
        self.assertEqual(stored(self.db, "r"), (8, None))
        with self.assertRaisesRegex(sqlite3.Error, "stale_token.*high_water 8"):
            self.db.execute("UPDATE a SET token = 6 WHERE id = 'r'")

    def test_unprotect_folds_the_carried_marks_into_the_fences(self):
        self.db.executemany("INSERT INTO a VALUES (?, 'v', 1)", [("x",), ("y",)])
        self.db.execute("UPDATE a SET token = 12 WHERE id = 'x'")
        out = self.db.execute("SELECT fencing_unprotect('a')").fetchone()[0]
        self.assertIn("2 marks", out)
        self.assertEqual(stored(self.db, "x"), (12, None))
        self.assertEqual(stored(self.db, "y"), (1, None))
        self.db.execute("UPDATE a SET token = 0 WHERE id = 'x'")  # unfenced now
        self.db.execute("SELECT fencing_protect('a', 'id', 'token')")
        with self.assertRaisesRegex(sqlite3.Error, "stale_token.*high_water 12"):
            self.db.execute("UPDATE a SET token = 11 WHERE id = 'x'")

    def test_a_table_dropped_while_protected_fails_closed_until_acknowledged(self):
        self.db.execute("INSERT INTO a VALUES ('r', 'v', 1)")
        self.db.execute("UPDATE a SET token = 30 WHERE id = 'r'")
        self.db.execute("DROP TABLE a")
        with self.assertRaisesRegex(sqlite3.Error, "carrier_missing.*fencing_unprotect\\('a', 'reason'\\)"):
            self.db.execute("INSERT INTO b VALUES ('r', 'x', 2)")
        self.db.execute("CREATE TABLE a(id TEXT PRIMARY KEY, body TEXT, token INTEGER) WITHOUT ROWID")
        with self.assertRaisesRegex(sqlite3.Error, "lost its triggers"):
            self.db.execute("SELECT fencing_protect('a', 'id', 'token')")
        self.db.execute("DROP TABLE a")
        with self.assertRaisesRegex(sqlite3.Error, "tokens its rows carried for 1 resources are gone"):
            self.db.execute("SELECT fencing_unprotect('a')")
        out = self.db.execute("SELECT fencing_unprotect('a', 'table a dropped by a migration')").fetchone()[0]
        self.assertIn("no longer exists", out)
        self.assertEqual(mark(self.db, "r"), ("r", 1, None), "the mark as last written to fencing_fences")
        record = self.db.execute("SELECT resource, reason, before, after FROM fencing_resets").fetchall()
        self.assertEqual(len(record), 1)
        self.assertEqual(record[0][0], "r")
        self.assertIn("table a dropped by a migration", record[0][1])
        self.assertEqual(json.loads(record[0][2])["carrier_missing"], "a")
        self.db.execute("INSERT INTO b VALUES ('r', 'x', 2)")

    def test_which_tables_keep_the_fence_in_the_row(self):
        for create, carries in [
            ("CREATE TABLE t(k INTEGER PRIMARY KEY, token INTEGER)", True),
            ("CREATE TABLE t(k TEXT PRIMARY KEY, token INTEGER) WITHOUT ROWID", True),
            ("CREATE TABLE t(k TEXT PRIMARY KEY, token INTEGER)", False),
            ("CREATE TABLE t(k INTEGER PRIMARY KEY DESC, token INTEGER)", False),
            ("CREATE TABLE t(k TEXT PRIMARY KEY, email TEXT UNIQUE, token INTEGER) WITHOUT ROWID", False),
            ("CREATE TABLE t(k TEXT, v TEXT, token INTEGER, PRIMARY KEY (k, v)) WITHOUT ROWID", False),
            ("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, token INTEGER)", False),
        ]:
            with self.subTest(create=create):
                self.db.execute("DROP TABLE IF EXISTS t")
                self.db.execute(create)
                out = self.db.execute("SELECT fencing_protect('t', 'k', 'token')").fetchone()[0]
                self.assertEqual(out.endswith("in the rows (fence in row)"), carries, out)


class Backups(unittest.TestCase):
    """A copy made by .backup, VACUUM INTO or .dump carries every mark, in fencing_fences and in the rows."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "app.db")
        db = connect(self.path)
        db.execute("CREATE TABLE keyed(id TEXT PRIMARY KEY, body TEXT, token INTEGER) WITHOUT ROWID")
        db.execute("CREATE TABLE plain(id TEXT PRIMARY KEY, body TEXT, token INTEGER)")
        for t in ("keyed", "plain"):
            db.execute(f"SELECT fencing_protect('{t}', 'id', 'token')")
            db.execute(f"INSERT INTO {t} VALUES ('{t}-1', 'B', 34)")
        db.close()

    def tearDown(self):
        self.dir.cleanup()

    def shell(self, *args, stdin=None):
        run = subprocess.run(["sqlite3", *args], input=stdin, capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        return run.stdout

    def assert_still_fenced(self, path, how):
        db = connect(path)
        try:
            for t in ("keyed", "plain"):
                with self.assertRaises(sqlite3.Error, msg=f"{how}: {t}") as e:
                    db.execute(f"UPDATE {t} SET body = 'late', token = 33")
                self.assertIn("presented token 33, high_water 34", str(e.exception))
                db.execute(f"UPDATE {t} SET body = 'C', token = 35")
                self.assertEqual(mark(db, f"{t}-1"), (f"{t}-1", 35, None), f"{how}: {t}")
        finally:
            db.close()

    def test_backup_vacuum_into_and_dump_keep_every_mark(self):
        copies = {name: os.path.join(self.dir.name, f"{name}.db") for name in ("backup", "vacuum", "dump")}
        self.shell(self.path, f".backup {copies['backup']}")
        db = connect(self.path)
        db.execute("VACUUM INTO ?", (copies["vacuum"],))
        db.close()
        self.shell(copies["dump"], stdin=self.shell(self.path, ".dump"))
        for how, path in copies.items():
            with self.subTest(how=how):
                self.assert_still_fenced(path, how)


class Shell(unittest.TestCase):
    def test_the_gc_pause_story_in_the_sqlite3_shell(self):
        script = [f".load {EXT}", "CREATE TABLE docs(id TEXT PRIMARY KEY, body TEXT, token INTEGER);",
                  "SELECT fencing_protect('docs', 'id', 'token');",
                  "INSERT INTO docs VALUES ('invoice', 'v1', 1);"]
        script += [f"UPDATE docs SET body = 'written with {t}', token = {t};" for t in range(2, 35)]
        script += ["UPDATE docs SET body = 'paused holder', token = 33;", "SELECT body, token FROM docs;",
                   "SELECT high_water FROM fencing_fences;"]
        with tempfile.TemporaryDirectory() as d:
            run = subprocess.run(["sqlite3", os.path.join(d, "shell.db")], input="\n".join(script),
                                 capture_output=True, text=True, timeout=60)
        self.assertIn("stale_token", run.stderr)
        self.assertIn("presented token 33, high_water 34", run.stderr)
        self.assertEqual(run.stdout.split(), ["protected", "docs:", "resource", "id,", "token", "token,", "lock",
                                              "(the", "resource),", "sequence", "(none),", "policy", "non-decreasing,",
                                              "marks", "in", "fencing_fences",
                                              "written", "with", "34|34", "34"])


# The other modules' tests run with this one (scripts/test-sqlite runs this file).
from test_arguments import Arguments  # noqa: E402,F401
from test_keys import KeyNames, Replace  # noqa: E402,F401
from test_names import Names  # noqa: E402,F401
from test_operators import Operators  # noqa: E402,F401

if __name__ == "__main__":
    unittest.main(verbosity=1)
