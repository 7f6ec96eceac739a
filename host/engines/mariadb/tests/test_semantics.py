"""MariaDB's statements and an operator's tools against a protected table,
each fenced, refused, or denied by the configuration docs/mariadb.md names:
REPLACE, INSERT .. ON DUPLICATE KEY UPDATE, multi-row and multi-table
UPDATE, LOAD DATA, TRUNCATE, resources shared by tables, session settings,
DROP TRIGGER, ALTER TABLE, DROP FUNCTION and reinstalling, mariadb-dump and
restore, binlog replication to a replica and its promotion, a misbehaving
component, and writers racing."""

import os
import random
import shutil
import subprocess
import threading
import unittest

import pymysql

from servers import INSTALL_SQL, Server
from support import fresh_database, one, refusal, rows, shared, writer
from test_story import Protected

MISBEHAVING = os.environ.get("FENCING_MISBEHAVING_WASM", "")


class Statements(Protected):
    """Each statement form, in both places a mark can live (InRow below)."""

    def setUp(self):
        super().setUp()
        self.a.execute("INSERT INTO orders VALUES ('o-1', 'B', 34), ('o-2', 'B', 34)")
        self.w = writer(self.server, self.db)
        self.c = self.w.cursor()

    def tearDown(self):
        self.w.close()
        super().tearDown()

    def state(self):
        return rows(self.a, "SELECT id, body, token FROM orders ORDER BY id")

    def test_replace(self):
        before = self.state()
        # A stale REPLACE is refused: with fence rows by its INSERT half; with
        # the fence in the row, its DELETE half (which runs first) presents no token.
        self.assertEqual(refusal(self.c, "REPLACE INTO orders VALUES ('o-1', 'late', 33)")[1],
                         "FN004" if self.in_row else "FN001")
        # Its DELETE half presents @fencing_token, as any DELETE.
        self.assertEqual(refusal(self.c, "REPLACE INTO orders VALUES ('o-1', 'new', 35)")[1], "FN004")
        self.c.execute("SET @fencing_token = 33")
        self.assertEqual(refusal(self.c, "REPLACE INTO orders VALUES ('o-1', 'new', 35)")[1], "FN001")
        # A current DELETE half does not carry a stale row in.
        self.c.execute("SET @fencing_token = 35")
        self.assertEqual(refusal(self.c, "REPLACE INTO orders VALUES ('o-1', 'late', 33)")[1], "FN001")
        self.assertEqual(self.state(), before)
        self.c.execute("SET @fencing_token = 35")
        self.c.execute("REPLACE INTO orders VALUES ('o-1', 'new', 35)")
        self.assertEqual(self.state()[0], ("o-1", "new", 35))
        self.c.execute("SET @fencing_token = 34")
        self.assertEqual(refusal(self.c, "UPDATE orders SET body = 'late', token = 34 WHERE id = 'o-1'")[1], "FN001")

    def test_insert_on_duplicate_key_update(self):
        sql = "INSERT INTO orders VALUES ('o-1', %s, %s) ON DUPLICATE KEY UPDATE body = VALUES(body), token = VALUES(token)"
        self.assertEqual(refusal(self.c, sql, ("late", 33))[1], "FN001")
        self.c.execute(sql, ("newer", 35))
        self.assertEqual(self.state()[0], ("o-1", "newer", 35))
        # An update clause that leaves the token presents @fencing_token.
        self.assertEqual(refusal(self.c, "INSERT INTO orders VALUES ('o-1', 'x', 35) ON DUPLICATE KEY UPDATE body = 'y'")[1], "FN004")

    def test_a_multi_row_update_with_one_stale_row_changes_nothing(self):
        self.a.execute("UPDATE orders SET token = 40 WHERE id = 'o-2'")
        before = self.state()
        errno, sqlstate, message = refusal(self.c, "UPDATE orders SET body = 'all', token = 35")
        self.assertEqual(sqlstate, "FN001")
        self.assertIn('resource "o-2"', message)
        self.assertEqual(self.state(), before)
        self.c.execute("UPDATE orders SET body = 'all', token = 41")
        self.assertEqual([r[2] for r in self.state()], [41, 41])

    def test_a_multi_table_update(self):
        self.a.execute("CREATE TABLE grants (id VARCHAR(64) PRIMARY KEY, token BIGINT)")
        self.a.execute("INSERT INTO grants VALUES ('o-1', 33), ('o-2', 36)")
        self.a.execute(f"GRANT SELECT ON {self.db}.grants TO 'w_{self.db}'@'%'")
        before = self.state()
        sql = "UPDATE orders o JOIN grants g ON g.id = o.id SET o.body = 'joined', o.token = g.token"
        self.assertEqual(refusal(self.c, sql)[1], "FN001")
        self.assertEqual(self.state(), before)
        self.a.execute("UPDATE grants SET token = 35 WHERE id = 'o-1'")
        self.c.execute(sql)
        self.assertEqual([r[2] for r in self.state()], [35, 36])

    def test_load_data(self):
        path = os.path.join(self.server.files, f"{self.db}.tsv")
        with open(path, "w") as f:
            f.write("o-3\tnew\t1\no-1\tlate\t33\n")
        before = self.state()
        # From the client (LOCAL) as a writer, and from the server's files as
        # the administrator; REPLACE's DELETE half presents @fencing_token.
        self.c.execute("SET @fencing_token = 33")
        self.a.execute("SET @fencing_token = 33")
        self.assertEqual(refusal(self.c, f"LOAD DATA LOCAL INFILE '{path}' REPLACE INTO TABLE orders")[1], "FN001")
        self.assertEqual(refusal(self.a, f"LOAD DATA INFILE '{path}' REPLACE INTO TABLE orders")[1], "FN001")
        self.assertEqual(self.state(), before)
        with open(path, "w") as f:
            f.write("o-3\tnew\t1\n")
        self.c.execute(f"LOAD DATA LOCAL INFILE '{path}' INTO TABLE orders")
        self.assertEqual(self.state()[2], ("o-3", "new", 1))

    def test_truncate_is_the_operators_and_keeps_the_fences(self):
        self.assertEqual(refusal(self.c, "TRUNCATE orders")[0], 1142)
        self.a.execute("TRUNCATE orders")
        _, sqlstate, message = refusal(self.c, "INSERT INTO orders VALUES ('o-1', 'late', 33)")
        if self.in_row:
            # The rows that carried the marks are gone: the resources wait for an operator's reset.
            self.assertEqual(sqlstate, "FN011")
            self.assertIn("gone without a DELETE", message)
            self.assertEqual(refusal(self.c, "INSERT INTO orders VALUES ('o-1', 'x', 99)")[1], "FN011")
            self.a.execute("CALL fencing.reset_fence(DATABASE(), 'o-1', 'rows truncated', 'o-1', 34)")
            self.assertEqual(refusal(self.c, "INSERT INTO orders VALUES ('o-1', 'late', 33)")[1], "FN001")
        else:
            self.assertEqual(sqlstate, "FN001")
        self.c.execute("INSERT INTO orders VALUES ('o-1', 'new', 35)")

    def test_ignore_does_not_ignore_a_refusal(self):
        before = self.state()
        self.assertEqual(refusal(self.c, "UPDATE IGNORE orders SET body = 'late', token = 33 WHERE id = 'o-1'")[1], "FN001")
        self.c.execute("SET @fencing_token = 33")
        self.assertEqual(refusal(self.c, "DELETE IGNORE FROM orders WHERE id = 'o-1'")[1], "FN001")
        self.c.execute("SET @fencing_token = NULL")
        self.assertEqual(refusal(self.c, "INSERT IGNORE INTO orders VALUES ('o-3', 'x', NULL)")[1], "FN004")
        self.assertEqual(self.state(), before)

    def test_a_row_cannot_move_to_another_resource(self):
        _, sqlstate, message = refusal(self.c, "UPDATE orders SET id = 'o-9', token = 35 WHERE id = 'o-1'")
        self.assertEqual(sqlstate, "22023")
        self.assertIn("resource_moved", message)

    def test_delete_keeps_the_mark(self):
        self.c.execute("SET @fencing_token = 35")
        self.c.execute("DELETE FROM orders WHERE id = 'o-1'")
        self.c.execute("SET @fencing_token = NULL")
        self.assertEqual(refusal(self.c, "INSERT INTO orders VALUES ('o-1', 'late', 34)")[1], "FN001")
        self.c.execute("INSERT INTO orders VALUES ('o-1', 'again', 35)")

    def test_another_table_writes_the_same_resources(self):
        self.a.execute("CREATE TABLE order_lines (id INT AUTO_INCREMENT PRIMARY KEY, order_id VARCHAR(64), token BIGINT)")
        self.a.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {self.db}.order_lines TO 'w_{self.db}'@'%'")
        self.a.execute("CALL fencing.protect(%s, 'order_id', 'token')", (f"{self.db}.order_lines",))
        _, sqlstate, message = refusal(self.c, "INSERT INTO order_lines (order_id, token) VALUES ('o-1', 33)")
        if self.in_row:
            self.assertEqual(sqlstate, "FN011")
            self.assertIn(f"carried by the rows of {self.db}.orders", message)
        else:
            self.assertEqual(sqlstate, "FN001")
            self.c.execute("INSERT INTO order_lines (order_id, token) VALUES ('o-1', 35)")
            self.c.execute("SET @fencing_token = 34")
            self.assertEqual(refusal(self.c, "UPDATE orders SET body = 'late', token = 34 WHERE id = 'o-1'")[1], "FN001")

    def test_strictly_increasing_admits_a_token_once(self):
        self.a.execute("CREATE TABLE jobs (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT, token BIGINT)")
        self.a.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {self.db}.jobs TO 'w_{self.db}'@'%'")
        self.a.execute("CALL fencing.protect_with(%s, 'id', 'token', NULL, NULL, 'strictly-increasing', %s)",
                       (f"{self.db}.jobs", self.in_row))
        self.c.execute("INSERT INTO jobs VALUES ('j', 'a', 5)")
        self.c.execute("SET @fencing_token = 5")
        self.assertEqual(refusal(self.c, "UPDATE jobs SET body = 'b'")[1], "FN002")
        self.c.execute("UPDATE jobs SET body = 'b', token = 6")

    def test_session_settings_change_nothing(self):
        """What a writer may SET in its session, tried against the fence."""
        c = self.c
        tricks = [
            "SET SESSION sql_mode = ''",
            "SET NAMES latin1",
            "SET time_zone = '+05:00'",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
            "SET SESSION foreign_key_checks = 0",
            "SET SESSION unique_checks = 0",
            "SET SESSION autocommit = 0",
            "SET @fencing_token = 99, @fencing_lock = 'o-1'",
        ]
        for trick in tricks:
            c.execute(trick)
        self.assertEqual(refusal(c, "UPDATE orders SET body = 'late', token = 33 WHERE id = 'o-1'")[1], "FN001")
        # Out of range in non-strict mode: the clamped value is what the row would get, and is decided.
        self.assertEqual(refusal(c, "UPDATE orders SET body = 'late', token = -1 WHERE id = 'o-1'")[1], "22003")
        c.execute("ROLLBACK")
        # What a writer may not set at all.
        for denied, errno in (("SET SESSION sql_log_bin = 0", 1227), ("SET GLOBAL sql_mode = ''", 1227),
                              ("SET SESSION gtid_domain_id = 9", 1227), ("SET SESSION pseudo_thread_id = 1", 1227)):
            self.assertEqual(refusal(c, denied)[0], errno, denied)
        self.assertEqual(self.state()[0], ("o-1", "B", 34))


class StatementsInRow(Statements):
    in_row = True


class OperatorsTools(Protected):
    """What an administrator may do, and what it does to the fence."""

    def setUp(self):
        super().setUp()
        self.a.execute("INSERT INTO orders VALUES ('o-1', 'B', 34)")

    def stale(self):
        with writer(self.server, self.db) as w, w.cursor() as c:
            return refusal(c, "UPDATE orders SET body = 'late', token = 33 WHERE id = 'o-1'")

    def test_drop_trigger_shows_in_the_protection_view(self):
        self.a.execute("DROP TRIGGER fencing_orders_bu")
        self.assertEqual(rows(self.a, "SELECT fence_triggers_expected - fence_triggers FROM fencing.protection WHERE table_name = %s",
                              (f"{self.db}.orders",)), ((1,),))
        self.a.execute("CALL fencing.protect_with(%s, 'id', 'token', NULL, NULL, 'non-decreasing', %s)",
                       (f"{self.db}.orders", self.in_row))
        self.assertEqual(self.stale()[1], "FN001")

    def test_alter_table_renaming_the_token_column_fails_every_write_closed(self):
        self.a.execute("ALTER TABLE orders CHANGE token tok BIGINT")
        errno, _, message = self.stale()
        self.assertEqual(errno, 1054, message)  # unknown column: the statement fails, nothing is written
        self.assertEqual(rows(self.a, "SELECT body FROM orders"), (("B",),))

    def test_drop_function_fails_writes_closed_and_reinstalling_brings_them_back(self):
        self.a.execute("DROP FUNCTION fencing_check")
        try:
            errno, _, message = self.stale()
            self.assertIn(errno, (1122, 1305), message)  # can't load / does not exist: the statement fails
            with writer(self.server, self.db) as w, w.cursor() as c:
                self.assertIn(refusal(c, "UPDATE orders SET body = 'new', token = 35 WHERE id = 'o-1'")[0], (1122, 1305))
            self.assertEqual(one(self.a, "SELECT body FROM orders"), "B")
        finally:
            # The library was never unloaded (-z nodelete): installing again is instant and mariadbd lives on.
            self.server.cli_file(INSTALL_SQL)
        self.assertEqual(self.stale()[1], "FN001")
        self.a.execute("DROP FUNCTION fencing_admit")
        self.a.execute("DROP FUNCTION fencing_admit_signed")
        self.a.execute("DROP FUNCTION fencing_check")
        self.a.execute("DROP FUNCTION fencing_refusal")
        self.a.execute("DROP FUNCTION fencing_keys_check")
        self.a.execute("DROP FUNCTION fencing_guard_info")
        self.a.execute("DROP FUNCTION fencing_trigger_sql")
        self.server.cli_file(INSTALL_SQL)
        self.assertEqual(self.stale()[1], "FN001")

    def test_unprotect_keeps_the_marks(self):
        self.a.execute("CALL fencing.unprotect(%s)", (f"{self.db}.orders",))
        self.assertEqual(one(self.a, "SELECT high_water FROM fencing.fences WHERE schema_name = DATABASE() AND resource = 'o-1'"), 34)
        self.a.execute("CALL fencing.protect(%s, 'id', 'token')", (f"{self.db}.orders",))
        self.assertEqual(self.stale()[1], "FN001")


class OperatorsToolsInRow(OperatorsTools):
    in_row = True


class DumpAndRestore(unittest.TestCase):
    def test_mariadb_dump_and_restore_keep_every_fence(self):
        server = shared()
        db = fresh_database(server)
        with server.client(database=db) as admin, admin.cursor() as a:
            a.execute("CREATE TABLE orders (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT, token BIGINT)")
            a.execute("CREATE TABLE order_lines (id INT PRIMARY KEY, order_id VARCHAR(64), token BIGINT)")
            a.execute("CALL fencing.protect_with(%s, 'id', 'token', NULL, NULL, 'non-decreasing', TRUE)", (f"{db}.orders",))
            a.execute("CALL fencing.protect(%s, 'order_id', 'token')", (f"{db}.order_lines",))
            a.execute("INSERT INTO orders VALUES ('o-1', 'B', 34)")
            a.execute("INSERT INTO order_lines VALUES (1, 'l-1', 34)")
        dump = subprocess.run(["mariadb-dump", "--no-defaults", "-h", "127.0.0.1", "-P", str(server.port), "-u", "root",
                               "--routines", "--triggers", "--single-transaction", "--databases", db, "fencing"],
                              capture_output=True, text=True, check=True).stdout
        # Restored into another server with the library installed (the dump's fencing schema replaces the installed one).
        other = Server()
        try:
            other.cli(dump)
            with other.client(database=db) as admin, admin.cursor() as a:
                a.execute("SET @fencing_token = 33")
                self.assertEqual(refusal(a, "UPDATE orders SET body = 'late', token = 33 WHERE id = 'o-1'")[1], "FN001")
                self.assertEqual(refusal(a, "INSERT INTO order_lines VALUES (2, 'l-1', 33)")[1], "FN001")
                a.execute("UPDATE orders SET body = 'new', token = 35 WHERE id = 'o-1'")
                self.assertEqual(rows(a, "SELECT fence_triggers FROM fencing.protection WHERE table_name LIKE %s ORDER BY table_name",
                                      (f"{db}.%",)), ((3,), (4,)))
        finally:
            other.destroy()


class Replication(unittest.TestCase):
    def test_a_replica_holds_the_fences_and_keeps_them_when_promoted(self):
        primary = Server(server_id=1, log_bin=True, install=False)
        replica = Server(server_id=2, install=False)
        try:
            with primary.client() as p, p.cursor() as c:
                c.execute("CREATE USER 'repl'@'%' IDENTIFIED BY 'pw'")
                c.execute("GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'")
            with replica.client() as r, r.cursor() as c:
                c.execute(f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, MASTER_USER='repl', "
                          "MASTER_PASSWORD='pw', MASTER_USE_GTID=slave_pos")
                c.execute("START SLAVE")
            # Installed on the primary, the functions and the schema reach the replica through the binlog.
            primary.cli_file(INSTALL_SQL)
            with primary.client() as p, p.cursor() as c:
                c.execute("CREATE DATABASE app")
                c.execute("CREATE TABLE app.orders (id VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, body TEXT, token BIGINT)")
                c.execute("CREATE TABLE app.docs (id VARCHAR(64), body TEXT, token BIGINT)")
                c.execute("CALL fencing.protect_with('app.orders', 'id', 'token', NULL, NULL, 'non-decreasing', TRUE)")
                c.execute("CALL fencing.protect('app.docs', 'id', 'token')")
                c.execute("INSERT INTO app.orders VALUES ('o-1', 'B', 34)")
                c.execute("INSERT INTO app.docs VALUES ('d-1', 'B', 34)")
                self.assertEqual(refusal(c, "UPDATE app.orders SET token = 33")[1], "FN001")
                gtid = one(c, "SELECT @@gtid_binlog_pos")
            with replica.client() as r, r.cursor() as c:
                self.assertEqual(one(c, "SELECT MASTER_GTID_WAIT(%s, 30)", (gtid,)), 0)
                self.assertEqual(rows(c, "SELECT resource, high_water, carrier FROM fencing.fences ORDER BY resource"),
                                 ((b"d-1", 34, None), (b"o-1", 34, "app.orders")))
                # Promoted: replication stopped, the replica takes writes, and the fences hold.
                # Replicated row events fire no trigger on the replica (the default the docs ask to keep).
                self.assertEqual(one(c, "SELECT @@slave_run_triggers_for_rbr"), "NO")
                c.execute("STOP SLAVE")
                c.execute("RESET SLAVE ALL")
                self.assertEqual(refusal(c, "UPDATE app.orders SET body = 'late', token = 33")[1], "FN001")
                self.assertEqual(refusal(c, "INSERT INTO app.docs VALUES ('d-1', 'late', 33)")[1], "FN001")
                c.execute("UPDATE app.orders SET body = 'new primary', token = 35")
        finally:
            replica.destroy()
            primary.destroy()


@unittest.skipUnless(MISBEHAVING, "set FENCING_MISBEHAVING_WASM (scripts/test-mariadb does)")
class MisbehavingComponent(unittest.TestCase):
    def test_a_component_that_loops_traps_or_hogs_fails_the_write_and_mariadbd_lives_on(self):
        server = shared()
        db = fresh_database(server)
        with server.client(database=db) as admin, admin.cursor() as a:
            a.execute("CREATE TABLE t (id VARCHAR(64), lk VARCHAR(64), token BIGINT)")
            a.execute("CALL fencing.protect_with(%s, 'id', 'token', 'lk', NULL, 'non-decreasing', FALSE)", (f"{db}.t",))
            # Only a .wasm file in mariadbd's plugin directory, which the machine's administrator writes.
            for outside in ("/nonexistent.wasm", MISBEHAVING, "../plugins/../files", "/dev/zero"):
                _, sqlstate, message = refusal(a, "CALL fencing.set_plugin(%s)", (outside,))
                self.assertEqual(sqlstate, "22023", message)
                self.assertIn("plugin directory", message)
            shutil.copy(MISBEHAVING, os.path.join(server.plugins, "misbehaving.wasm"))
            a.execute("CALL fencing.set_plugin('misbehaving.wasm')")
            try:
                for lock, failure in (("loop", "guard_timeout"), ("trap", "guard_trap"), ("hog", "guard_out_of_memory")):
                    _, sqlstate, message = refusal(a, "INSERT INTO t VALUES ('r', %s, 5)", (lock,))
                    self.assertEqual(sqlstate, "FN010", message)
                    self.assertIn(failure, message)
                a.execute("INSERT INTO t VALUES ('r', 'fine', 5)")
            finally:
                a.execute("CALL fencing.set_plugin(NULL)")
            self.assertEqual(one(a, "SELECT COUNT(*) FROM t"), 1)


class Races(unittest.TestCase):
    def race(self, in_row):
        server = shared()
        db = fresh_database(server)
        with server.client(database=db) as admin, admin.cursor() as a:
            a.execute("CREATE TABLE acc (id VARCHAR(8) COLLATE utf8mb4_bin PRIMARY KEY, token BIGINT, n INT)")
            a.execute("CALL fencing.protect_with(%s, 'id', 'token', NULL, NULL, 'non-decreasing', %s)", (f"{db}.acc", in_row))
            a.execute("INSERT INTO acc VALUES ('r', 1, 0)")
        admitted, lock = [], threading.Lock()

        def client(seed):
            rng = random.Random(seed)
            with writer(server, db, user=f"w{seed}_{db}") as w, w.cursor() as c:
                for _ in range(60):
                    t = rng.randint(1, 200)
                    try:
                        c.execute("SET @fencing_token = %s", (t,))
                        c.execute("UPDATE acc SET token = %s, n = n + 1 WHERE id = 'r'", (t,))
                        with lock:
                            admitted.append(t)
                    except pymysql.err.Error as e:
                        if e.args[0] == 1213:  # a deadlock victim changes nothing
                            continue
                        assert e.sqlstate == "FN001", e

        threads = [threading.Thread(target=client, args=(s,)) for s in (1, 2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with server.client(database=db) as admin, admin.cursor() as a:
            token, n = rows(a, "SELECT token, n FROM acc")[0]
        # Every admitted write was counted, and the mark is the highest admitted token.
        self.assertEqual(n, len(admitted))
        self.assertEqual(token, max(admitted))

    def test_writers_racing_with_fence_rows(self):
        self.race(False)

    def test_writers_racing_with_the_fence_in_the_row(self):
        self.race(True)


if __name__ == "__main__":
    unittest.main()
