"""The GC-pause story through real clients (PyMySQL connections, a paused
client process, the mariadb command-line client), what a row presents, and
who may do what: writers, administrators, signed tokens and resets."""

import hashlib
import hmac
import json
import os
import signal
import struct
import subprocess
import sys
import unittest

from support import VECTORS, fresh_database, one, refusal, rows, shared, writer

HERE = os.path.dirname(os.path.abspath(__file__))


def stale_message(db, table, resource, presented, high_water):
    return (f'fencing: stale_token: table {db}.{table}, resource "{resource}", lock "{resource}": '
            f'presented token {presented}, high_water {high_water} (bound to lock "{resource}")')


class Protected(unittest.TestCase):
    """A database with `orders` protected (fence rows, or with `in_row` the fence in the row)."""

    in_row = False

    def setUp(self):
        self.server = shared()
        self.db = fresh_database(self.server)
        self.admin = self.server.client(database=self.db)
        self.a = self.admin.cursor()
        self.a.execute("CREATE TABLE orders (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT, token BIGINT)")
        self.a.execute("CALL fencing.protect_with(%s, 'id', 'token', NULL, NULL, 'non-decreasing', %s)",
                       (f"{self.db}.orders", self.in_row))

    def tearDown(self):
        self.admin.close()


class GcPause(Protected):
    def story(self):
        w1, w2 = writer(self.server, self.db), writer(self.server, self.db, user=f"w2_{self.db}")
        c1, c2 = w1.cursor(), w2.cursor()
        c1.execute("INSERT INTO orders VALUES ('o-1', 'from client 1', 33)")
        # Client 1 pauses past its lease; client 2 gets token 34 and writes.
        c2.execute("UPDATE orders SET body = 'from client 2', token = 34 WHERE id = 'o-1'")
        # Client 1 wakes up and writes with its old token.
        errno, sqlstate, message = refusal(c1, "UPDATE orders SET body = 'late', token = 33 WHERE id = 'o-1'")
        self.assertEqual((errno, sqlstate), (1644, "FN001"))
        self.assertEqual(message, stale_message(self.db, "orders", "o-1", 33, 34))
        self.assertEqual(rows(c2, "SELECT body, token FROM orders"), (("from client 2", 34),))
        # Without a token the paused client fares no better.
        _, sqlstate, message = refusal(c1, "UPDATE orders SET body = 'late' WHERE id = 'o-1'")
        self.assertEqual(sqlstate, "FN004")
        self.assertIn("missing_token", message)
        # The new holder goes on writing: a token column left as it was presents @fencing_token.
        self.assertEqual(refusal(c2, "UPDATE orders SET body = 'again', token = 34 WHERE id = 'o-1'")[1], "FN004")
        c2.execute("SET @fencing_token = 34")
        c2.execute("UPDATE orders SET body = 'again', token = 34 WHERE id = 'o-1'")
        w1.close()
        w2.close()

    def test_two_clients_with_fence_rows(self):
        self.story()
        self.assertEqual(rows(self.a, "SELECT resource, lock_name, high_water, carrier FROM fencing.fences WHERE schema_name = DATABASE()"),
                         ((b"o-1", b"o-1", 34, None),))

    def test_a_client_process_paused_with_sigstop(self):
        """A real client process holds token 33, is stopped (SIGSTOP) while the
        next holder writes with 34, and its write after SIGCONT is refused."""
        self.a.execute("INSERT INTO orders VALUES ('o-1', 'first', 1)")
        writer(self.server, self.db).close()
        child = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "paused_client.py"), str(self.server.port), self.db, f"w_{self.db}", "33"],
            stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
        try:
            self.assertEqual(child.stdout.readline().strip(), "wrote with 33")
            os.kill(child.pid, signal.SIGSTOP)
            with writer(self.server, self.db, user=f"next_{self.db}") as w, w.cursor() as c:
                c.execute("UPDATE orders SET body = 'from the next holder', token = 34 WHERE id = 'o-1'")
            os.kill(child.pid, signal.SIGCONT)
            child.stdin.write("go\n")
            child.stdin.flush()
            self.assertEqual(child.stdout.readline().strip(), "refused FN001 " + stale_message(self.db, "orders", "o-1", 33, 34))
        finally:
            child.kill()
            child.wait()
        self.assertEqual(rows(self.a, "SELECT body, token FROM orders"), (("from the next holder", 34),))

    def test_the_mariadb_command_line_client(self):
        self.server.cli("INSERT INTO orders VALUES ('o-1', 'B', 34);", database=self.db)
        late = self.server.cli("UPDATE orders SET body = 'late', token = 33 WHERE id = 'o-1';", database=self.db, check=False)
        self.assertNotEqual(late.returncode, 0)
        self.assertIn("ERROR 1644 (FN001) at line 1: " + stale_message(self.db, "orders", "o-1", 33, 34), late.stderr)
        self.assertEqual(self.server.cli("SELECT body, token FROM orders;", database=self.db).stdout, "B\t34\n")


class GcPauseInRow(GcPause):
    in_row = True

    def test_two_clients_with_fence_rows(self):
        self.story()
        # The row carries the mark; the fence row names the table and holds the mark of the claim.
        self.assertEqual(rows(self.a, "SELECT carrier FROM fencing.fences WHERE schema_name = DATABASE()"), ((f"{self.db}.orders",),))
        self.assertEqual(rows(self.a, "CALL fencing.fence(DATABASE(), 'o-1')"), ((self.db, "o-1", "o-1", 34, None, f"{self.db}.orders"),))


class WhatARowPresents(Protected):
    def test_tokens_locks_and_sequences_from_the_row_or_the_session(self):
        w = writer(self.server, self.db)
        c = w.cursor()
        # INSERT without a token takes @fencing_token and writes it into the row.
        _, sqlstate, message = refusal(c, "INSERT INTO orders (id, body) VALUES ('o-1', 'x')")
        self.assertEqual(sqlstate, "FN004")
        c.execute("SET @fencing_token = 5")
        c.execute("INSERT INTO orders (id, body) VALUES ('o-1', 'x')")
        self.assertEqual(one(c, "SELECT token FROM orders"), 5)
        # An UPDATE that leaves the token column presents @fencing_token.
        c.execute("SET @fencing_token = 7")
        c.execute("UPDATE orders SET body = 'y'")
        self.assertEqual(one(c, "SELECT token FROM orders"), 7)
        c.execute("SET @fencing_token = 6")
        _, sqlstate, message = refusal(c, "UPDATE orders SET body = 'z'")
        self.assertEqual(sqlstate, "FN001")
        self.assertIn("presented token 6, high_water 7", message)
        # A DELETE presents the session's token only.
        _, sqlstate, _ = refusal(c, "DELETE FROM orders WHERE id = 'o-1'")
        self.assertEqual(sqlstate, "FN001")
        c.execute("SET @fencing_token = NULL")
        _, sqlstate, _ = refusal(c, "DELETE FROM orders WHERE id = 'o-1'")
        self.assertEqual(sqlstate, "FN004")
        # Another lock is refused while the fence is bound to the resource's name.
        c.execute("SET @fencing_token = 9, @fencing_lock = 'other'")
        _, sqlstate, message = refusal(c, "UPDATE orders SET body = 'z'")
        if self.in_row:
            # A row without a lock column carries its resource's name as lock.
            self.assertEqual(sqlstate, "22023")
            self.assertIn('lock_not_carried', message)
        else:
            self.assertEqual(sqlstate, "FN003")
            self.assertIn('wrong_lock', message)
        # Values the shared rules refuse, each with its code.
        for value, state, code in (("'abc'", "22023", "number_not_decimal"), ("-5", "22003", "number_negative"),
                                   ("'9223372036854775808'", "22003", "number_above_signed"), ("34.5", "22023", "argument_type")):
            c.execute(f"SET @fencing_lock = NULL, @fencing_token = {value}")
            _, sqlstate, message = refusal(c, "UPDATE orders SET body = 'z'")
            self.assertEqual(sqlstate, state, message)
            self.assertIn(f"({code})", message)
        self.assertEqual(rows(c, "SELECT body, token FROM orders"), (("y", 7),))
        w.close()

    def test_names_the_shared_rules_refuse(self):
        self.a.execute("CREATE TABLE docs (id VARBINARY(2000), body TEXT, token BIGINT)")
        self.a.execute("CALL fencing.protect(%s, 'id', 'token')", (f"{self.db}.docs",))
        for name, code in ((b"a\x00b", "name_control"), (b"x" * 257, "name_too_long"), (b" a", "name_whitespace"),
                           (b"\xff", "name_not_utf8")):
            _, sqlstate, message = refusal(self.a, "INSERT INTO docs VALUES (%s, 'x', 1)", (name,))
            self.assertEqual(sqlstate, "22023")
            self.assertIn(f"({code})", message)
        self.assertEqual(one(self.a, "SELECT COUNT(*) FROM docs"), 0)
        self.assertEqual(one(self.a, "SELECT COUNT(*) FROM fencing.fences WHERE schema_name = DATABASE()"), 0)


class WhatARowPresentsInRow(WhatARowPresents):
    in_row = True


class Rights(Protected):
    def test_a_writer_cannot_touch_the_fence_or_the_settings(self):
        self.a.execute("INSERT INTO orders VALUES ('o-1', 'B', 34)")
        w = writer(self.server, self.db)
        c = w.cursor()
        denied = {
            "UPDATE fencing.fences SET high_water = 1": 1142,
            "DELETE FROM fencing.fences": 1142,
            "SELECT * FROM fencing.settings": 1142,
            "CALL fencing.reset_fence(DATABASE(), 'o-1', 'mine now', 'o-1', 1)": 1370,
            "CALL fencing.set_verify_keys(NULL)": 1370,
            "CALL fencing.set_plugin('/tmp/permissive.wasm')": 1370,
            f"CALL fencing.unprotect('{self.db}.orders')": 1370,
            f"CALL fencing.protect('{self.db}.orders', 'id', 'body')": 1370,
            "CALL fencing.refuse(0, 'x')": 1370,
            f"DROP TRIGGER {self.db}.fencing_orders_bu": 1142,
            "ALTER TABLE orders CHANGE token token2 BIGINT": 1142,
            "TRUNCATE orders": 1142,
            "SET SESSION sql_log_bin = 0": 1227,
            "CREATE TEMPORARY TABLE fencing.fences (resource VARBINARY(10))": 1044,
            "DROP FUNCTION fencing_check": 1044,
            "CREATE FUNCTION fencing_check2 RETURNS INTEGER SONAME 'libfencing_mariadb.so'": 1044,
            # A stored function named like a UDF, in the protected table's schema (a trigger resolves names there).
            "CREATE FUNCTION fencing_check(a INT) RETURNS INT RETURN 0": 1044,
        }
        for sql, errno in denied.items():
            with self.subTest(sql=sql):
                got, _, message = refusal(c, sql)
                self.assertEqual(got, errno, message)
        self.assertEqual(rows(self.a, "CALL fencing.fence(DATABASE(), 'o-1')")[0][3], 34)
        self.assertEqual(one(self.a, "SELECT fence_triggers - fence_triggers_expected FROM fencing.protection WHERE table_name = %s",
                             (f"{self.db}.orders",)), 0)
        w.close()

    def test_an_operator_with_the_role_resets_and_it_is_recorded(self):
        self.a.execute("INSERT INTO orders VALUES ('o-1', 'B', 99999)")
        self.a.execute(f"CREATE USER IF NOT EXISTS 'ops_{self.db}'@'%' IDENTIFIED BY 'pw'")
        self.a.execute(f"GRANT fencing_admin TO 'ops_{self.db}'@'%'")
        self.a.execute(f"SET DEFAULT ROLE fencing_admin FOR 'ops_{self.db}'@'%'")
        with self.server.client(user=f"ops_{self.db}", password="pw") as ops, ops.cursor() as o:
            _, sqlstate, message = refusal(o, "CALL fencing.reset_fence(%s, 'o-1', '', 'o-1', 40)", (self.db,))
            self.assertEqual(sqlstate, "22023")
            self.assertIn("reason is required", message)
            o.execute("CALL fencing.reset_fence(%s, 'o-1', 'a client pushed token 99999', 'o-1', 40)", (self.db,))
        self.assertEqual(rows(self.a, "CALL fencing.fence(DATABASE(), 'o-1')")[0][3], 40)
        record = rows(self.a, "SELECT by_user, reason, before_high_water, after_lock, after_high_water FROM fencing.resets WHERE schema_name = DATABASE()")
        self.assertEqual(record, ((f"ops_{self.db}@127.0.0.1", "a client pushed token 99999", 99999, b"o-1", 40),))
        with writer(self.server, self.db) as w, w.cursor() as c:
            c.execute("UPDATE orders SET body = 'after the reset', token = 41 WHERE id = 'o-1'")
            _, sqlstate, _ = refusal(c, "UPDATE orders SET body = 'stale', token = 39 WHERE id = 'o-1'")
            self.assertEqual(sqlstate, "FN001")


class RightsInRow(Rights):
    in_row = True


def hmac_proof(key_id, secret_hex, lock, token):
    """A proof as the lock service makes it (docs/signing.md): version 1, the key id, HMAC-SHA256 of the message."""
    message = b"fencing-proof-v1\0" + struct.pack(">IQ", key_id, token) + lock.encode()
    tag = hmac.new(bytes.fromhex(secret_hex), message, hashlib.sha256).digest()
    return (bytes([1]) + struct.pack(">I", key_id) + tag).hex()


class SignedTokens(Protected):
    in_row = True

    def test_with_keys_set_every_write_needs_its_grants_proof(self):
        with open(os.path.join(VECTORS, "proofs", "signed.json")) as f:
            key = json.load(f)["keys"]["mac-9"]
        _, sqlstate, message = refusal(self.a, "CALL fencing.set_verify_keys('9 hmac-sha256 00')")
        self.assertEqual(sqlstate, "22023")
        self.assertIn("set_verify_keys", message)
        self.a.execute("CALL fencing.set_verify_keys(%s)", (f"9 hmac-sha256 {key['material']}",))
        try:
            w = writer(self.server, self.db)
            c = w.cursor()
            self.assertEqual(refusal(c, "INSERT INTO orders VALUES ('o-1', 'x', 34)")[1], "FN006")
            c.execute("SET @fencing_proof = %s", (hmac_proof(9, key["secret"], "o-1", 34),))
            c.execute("INSERT INTO orders VALUES ('o-1', 'x', 34)")
            # The proof of 34 does not make 35: the token is forged.
            _, sqlstate, message = refusal(c, "UPDATE orders SET token = 35 WHERE id = 'o-1'")
            self.assertEqual(sqlstate, "FN009")
            self.assertIn("proof_bad", message)
            c.execute("SET @fencing_proof = %s", (hmac_proof(9, key["secret"], "o-1", 34)[:20],))
            self.assertEqual(refusal(c, "UPDATE orders SET token = 35 WHERE id = 'o-1'")[1], "FN007")
            c.execute("SET @fencing_proof = %s", (hmac_proof(8, key["secret"], "o-1", 35),))
            self.assertEqual(refusal(c, "UPDATE orders SET token = 35 WHERE id = 'o-1'")[1], "FN008")
            c.execute("SET @fencing_proof = 'not hex'")
            _, sqlstate, message = refusal(c, "UPDATE orders SET token = 35 WHERE id = 'o-1'")
            self.assertEqual(sqlstate, "22023")
            self.assertIn("(proof_not_hex)", message)
            c.execute("SET @fencing_proof = %s", (hmac_proof(9, key["secret"], "o-1", 35),))
            c.execute("UPDATE orders SET body = 'y', token = 35 WHERE id = 'o-1'")
            self.assertEqual(rows(c, "SELECT body, token FROM orders"), (("y", 35),))
            # The writer may neither read the keys (an HMAC key is a secret) nor change them.
            self.assertEqual(refusal(c, "SELECT verify_keys FROM fencing.settings")[0], 1142)
            self.assertEqual(refusal(c, "CALL fencing.set_verify_keys(NULL)")[0], 1370)
            w.close()
        finally:
            self.a.execute("CALL fencing.set_verify_keys(NULL)")
        with writer(self.server, self.db) as w, w.cursor() as c:
            c.execute("UPDATE orders SET token = 36 WHERE id = 'o-1'")


class ProtectRefuses(unittest.TestCase):
    def test_tables_and_columns_the_fence_cannot_hold(self):
        server = shared()
        db = fresh_database(server)
        with server.client(database=db) as admin, admin.cursor() as a:
            a.execute("CREATE TABLE t (id VARCHAR(64) PRIMARY KEY, body TEXT, token BIGINT, big BIGINT UNSIGNED, f DOUBLE, ts TIMESTAMP NULL, l1 VARCHAR(10) CHARACTER SET latin1)")
            a.execute("CREATE TABLE m (id VARCHAR(64) PRIMARY KEY, token BIGINT) ENGINE = MyISAM")
            a.execute("CREATE TABLE many (id VARCHAR(64) COLLATE utf8mb4_bin, token BIGINT)")
            a.execute("CREATE TABLE parent (id INT PRIMARY KEY)")
            a.execute("CREATE TABLE child (id INT PRIMARY KEY, p INT, token BIGINT, FOREIGN KEY (p) REFERENCES parent (id) ON DELETE CASCADE)")
            cases = [
                (("nope.t", "id", "token", None, None, "non-decreasing", False), "42S02", "no table 'nope.t'"),
                ((f"{db}.m", "id", "token", None, None, "non-decreasing", False), "22023", "is MyISAM"),
                ((f"{db}.t", "id", "big", None, None, "non-decreasing", False), "22023", "signed 64-bit"),
                ((f"{db}.t", "f", "token", None, None, "non-decreasing", False), "22023", "depend on session settings"),
                ((f"{db}.t", "ts", "token", None, None, "non-decreasing", False), "22023", "depend on session settings"),
                ((f"{db}.t", "l1", "token", None, None, "non-decreasing", False), "22023", "latin1"),
                ((f"{db}.t", "id", "nope", None, None, "non-decreasing", False), "22023", "does not exist"),
                ((f"{db}.t", "id", "token", None, None, "non_decreasing", False), "22023", "(policy_unknown)"),
                ((f"{db}.t", "id", "token", None, None, "non-decreasing", True), "22023", "binary collation"),
                ((f"{db}.many", "id", "token", None, None, "non-decreasing", True), "22023", "unique key"),
                ((f"{db}.child", "id", "token", None, None, "non-decreasing", False), "22023", "CASCADE"),
                (("fencing.fences", "resource", "high_water", None, None, "non-decreasing", False), "22023", "cannot be protected"),
            ]
            for args, sqlstate, text in cases:
                with self.subTest(args=args):
                    _, got, message = refusal(a, "CALL fencing.protect_with(%s, %s, %s, %s, %s, %s, %s)", args)
                    self.assertEqual(got, sqlstate, message)
                    self.assertIn(text, message)
            self.assertEqual(one(a, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = %s", (db,)), 0)


if __name__ == "__main__":
    unittest.main()
