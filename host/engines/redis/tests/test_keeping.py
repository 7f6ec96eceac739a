"""What Redis and its operators do to keys and files must not cost a fence
or a token: eviction, expiry, DEL/UNLINK/RENAME/MOVE/COPY/RESTORE/DECRBY,
FLUSHDB, FLUSHALL, SWAPDB, MODULE UNLOAD/LOAD, an AOF rewrite, an RDB load,
a replica's full sync. Each test is a row of the table in docs/redis.md."""

import json
import os
import time
import unittest

from servers import MODULE, Server, free_port
from test_module import PROOFS, WithServer, error_of


def six_tokens(r, lock="orders", key="orders:invoice"):
    """Grants tokens 1 to 6 (each released) and writes `key` with 6."""
    for _ in range(6):
        token, lease = r.execute_command("FENCING.ACQUIRE", lock, "w", 60000)
        r.execute_command("FENCING.RELEASE", lock, lease)
    r.execute_command("FENCING.SET", key, lock, token, "from 6")
    return token


class Kept(unittest.TestCase):
    def assertKept(self, r, token=6, lock="orders", key="orders:invoice"):
        """The fence refuses a stale token and the next grant is above `token`."""
        self.assertEqual(error_of(lambda: r.execute_command("FENCING.SET", key, lock, 1, "stale")),
                         f"STALE_TOKEN presented=1 high_water={token}")
        self.assertEqual(r.execute_command("FENCING.FENCE", key), [lock.encode(), str(token).encode(), None])
        self.assertEqual(r.execute_command("FENCING.LOCK", lock), [None, token, 0])


class Keys(WithServer, Kept):
    def test_eviction_under_every_policy_reaches_no_fence_counter_or_lease(self):
        r = self.r
        self.assertEqual(six_tokens(r), 6)
        held, lease = r.execute_command("FENCING.ACQUIRE", "held", "w", 600000)
        for policy in ("allkeys-lru", "allkeys-random", "volatile-lru", "allkeys-lfu"):
            r.config_set("maxmemory", 0)
            r.flushdb()
            r.config_set("maxmemory-policy", policy)
            r.config_set("maxmemory", r.info("memory")["used_memory"] + 1024 * 1024)
            pipe = r.pipeline(transaction=False)
            for i in range(600):
                pipe.set(f"fill:{policy}:{i}", b"x" * 10000, ex=3600 if policy.startswith("volatile") else None)
            pipe.execute()
            self.assertGreater(r.info("stats")["evicted_keys"], 0, policy)
            with self.subTest(policy=policy):
                self.assertEqual(error_of(lambda: r.execute_command("FENCING.SET", "orders:invoice", "orders", 1, "stale")),
                                 "STALE_TOKEN presented=1 high_water=6")
                self.assertEqual(r.execute_command("FENCING.LOCK", "held")[:2], [b"w", held])
        r.config_set("maxmemory", 0)
        self.assertEqual(r.execute_command("FENCING.RELEASE", "held", lease), b"OK")
        self.assertEqual(r.execute_command("FENCING.ACQUIRE", "orders", "w", 1000)[0], 7)

    def test_commands_on_keys_reach_no_fence_or_counter(self):
        r = self.r
        six_tokens(r)
        r.set("orders:invoice", "data")
        dump = r.dump("orders:invoice")
        operations = [
            ("DEL", "orders:invoice"), ("SET", "orders:invoice", "data"), ("UNLINK", "orders:invoice"),
            ("SET", "orders:invoice", "data"), ("RENAME", "orders:invoice", "moved"), ("RENAME", "moved", "orders:invoice"),
            ("MOVE", "orders:invoice", 1), ("COPY", "other", "orders:invoice"), ("RESTORE", "orders:invoice", 0, dump, "REPLACE"),
            ("EXPIRE", "orders:invoice", 1), ("PEXPIRE", "orders:invoice", 1),
            # Where earlier layouts kept the counter, the fence and the lease.
            ("DEL", "fencing:token:{orders}", "fencing:fence:{orders:invoice}", "fencing:lock:{orders}"),
            ("DECRBY", "fencing:token:{orders}", 100), ("SET", "fencing:token:orders", 0),
            ("HSET", "fencing:fence:{orders:invoice}", "high_water", 0),
        ]
        for op in operations:
            with self.subTest(op=op[0]):
                r.execute_command(*op)
                self.assertKept(r)
        time.sleep(0.05)  # the expiry ran out
        self.assertIsNone(r.get("orders:invoice"))
        self.assertKept(r)
        self.assertEqual(r.execute_command("FENCING.ACQUIRE", "orders", "w", 1000)[0], 7)

    def test_flushdb_flushall_and_swapdb_keep_every_databases_fences_and_counters(self):
        r = self.r
        six_tokens(r)
        one = self.server.client()
        one.execute_command("SELECT", 1)
        # A client of database 1 has its own lock and fence (state is per database number).
        self.assertEqual(one.execute_command("FENCING.ACQUIRE", "orders", "w", 1000)[0], 1)
        one.execute_command("FENCING.SET", "orders:invoice", "orders", 1, "db1")
        for op in (("FLUSHDB",), ("FLUSHALL",), ("SWAPDB", 0, 1), ("FLUSHALL", "ASYNC"), ("SWAPDB", 1, 0)):
            with self.subTest(op=op):
                r.execute_command(*op)
                self.assertKept(r)
                self.assertEqual(one.execute_command("FENCING.FENCE", "orders:invoice"), [b"orders", b"1", None])
        self.assertIn("the flush removed keys only; 2 fences and 2 locks' token counters are kept", self.server.log_text())
        self.assertEqual(r.execute_command("FENCING.ACQUIRE", "orders", "w", 1000)[0], 7)

    def test_a_restore_payload_of_the_modules_type_is_refused(self):
        r = self.r
        payload = module_payload("fencestat", 1)
        self.assertIn("Bad data format", error_of(lambda: r.execute_command("RESTORE", "forged", 0, payload)))
        self.assertIsNone(r.get("forged"))
        self.assertTrue(self.server.alive())

    def test_fenced_writes_to_distinct_names_never_share_state(self):
        r = self.r
        r.execute_command("FENCING.SET", "x", "l", 5, "v")
        self.assertEqual(r.execute_command("FENCING.SET", "{x}", "other", 3, "v"), b"OK")
        self.assertEqual(r.execute_command("FENCING.FENCE", "{x}"), [b"other", b"3", None])
        self.assertEqual(r.execute_command("FENCING.FENCE", "x"), [b"l", b"5", None])
        t1, lease = r.execute_command("FENCING.ACQUIRE", "orders", "a", 10000)
        t2, _ = r.execute_command("FENCING.ACQUIRE", "{orders}", "b", 10000)
        self.assertEqual((t1, t2), (1, 1))
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.RELEASE", "{orders}", lease)).startswith("WRONG_LEASE"))
        self.assertEqual(r.execute_command("FENCING.LOCK", "{orders}")[0], b"b")
        nfc, nfd = "caf\u00e9", "cafe\u0301"
        self.assertEqual(r.execute_command("FENCING.ACQUIRE", nfc, "a", 10000)[0], 1)
        self.assertEqual(r.execute_command("FENCING.ACQUIRE", nfd, "b", 10000)[0], 1)


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected, no final xor)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x95AC9329AC4BC9B5 if crc & 1 else crc >> 1
    return crc


def module_payload(type_name, encver):
    """A DUMP payload claiming a value of the module type `type_name`."""
    charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ident = 0
    for ch in type_name:
        ident = (ident << 6) | charset.index(ch)
    ident = (ident << 10) | encver
    body = bytes([7, 0x81]) + ident.to_bytes(8, "big") + bytes([0]) + (10).to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


class Files(Kept):
    """Restarts and reloads: the RDB's aux field and the AOF's effects."""

    def test_an_aof_rewrite_then_more_grants_then_a_restart(self):
        server = Server()
        try:
            r = server.client()
            six_tokens(r)
            r.execute_command("BGREWRITEAOF")
            server.wait_for("persistence", "aof_rewrite_in_progress", 0)
            server.wait_for("persistence", "aof_rewrite_scheduled", 0)
            six_tokens(r, lock="later", key="later:k")  # into the AOF's newer part
            server.restart()
            r = server.client()
            self.assertKept(r)
            self.assertKept(r, lock="later", key="later:k")
        finally:
            server.stop()

    def test_an_rdb_save_and_restart_and_debug_reload(self):
        server = Server("--appendonly", "no", "--enable-debug-command", "yes")
        try:
            r = server.client()
            six_tokens(r)
            held, _ = r.execute_command("FENCING.ACQUIRE", "held", "w", 600000)
            r.execute_command("FENCING.RESET", "orders:invoice", "rebind", "REBIND", "orders", 6)
            r.execute_command("DEBUG", "RELOAD")
            self.assertKept(r)
            r.save()
            server.restart()
            r = server.client()
            self.assertKept(r)
            self.assertEqual(r.execute_command("FENCING.LOCK", "held")[:2], [b"w", held], "a lease outlives a restart")
            self.assertEqual(r.execute_command("FENCING.RESETS")[0][11], b"rebind")
        finally:
            server.stop()

    def test_an_aof_rewrite_that_would_drop_the_state_is_refused(self):
        server = Server()
        try:
            r = server.client()
            six_tokens(r)
            r.config_set("aof-use-rdb-preamble", "no")
            deadline = time.monotonic() + 5
            while r.info("fencing")["fencing_aof_safe"] != 0:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            for args in (("FENCING.SET", "orders:invoice", "orders", 6, "v"), ("FENCING.ACQUIRE", "orders", "w", 1000),
                         ("FENCING.RESET", "orders:invoice", "why")):
                self.assertIn("set aof-use-rdb-preamble yes", error_of(lambda: r.execute_command(*args)), args)
            self.assertIn("a rewritten AOF would lose", server.log_text())
            r.config_set("aof-use-rdb-preamble", "yes")
            deadline = time.monotonic() + 5
            while r.info("fencing")["fencing_aof_safe"] != 1:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            self.assertEqual(r.execute_command("FENCING.ACQUIRE", "orders", "w", 1000)[0], 7)
        finally:
            server.stop()

    def test_a_replica_that_syncs_after_the_writes_gets_the_state(self):
        primary = Server()
        try:
            p = primary.client()
            six_tokens(p)
            replica = Server("--replicaof", "127.0.0.1", str(primary.port))
            try:
                rr = replica.client()
                replica.wait_for("replication", "master_link_status", "up", timeout=60)
                self.assertGreaterEqual(p.execute_command("WAIT", 1, 30000), 1)
                self.assertEqual(rr.execute_command("FENCING.FENCE", "orders:invoice"), [b"orders", b"6", None])
                self.assertEqual(rr.execute_command("FENCING.LOCK", "orders"), [None, 6, 0])
                # The module's replication command is the link's, never a client's.
                self.assertIn("read only replica", error_of(lambda: rr.execute_command("FENCING.APPLY", "RESET", 1)))
                rr.config_set("replica-read-only", "no")
                self.assertIn("replication link", error_of(lambda: rr.execute_command("FENCING.APPLY", "RESET", 1)))
                # A write a client makes on a writable replica goes nowhere else: refused.
                for args in (("FENCING.SET", "orders:invoice", "orders", 7, "v"), ("FENCING.ACQUIRE", "orders", "w", 1000),
                             ("FENCING.RESET", "orders:invoice", "why")):
                    self.assertIn("this is a replica", error_of(lambda: rr.execute_command(*args)), args)
                rr.execute_command("REPLICAOF", "NO", "ONE")
                self.assertKept(rr)
            finally:
                replica.stop()
        finally:
            primary.stop()


class Module(Kept):
    def test_apply_is_refused_to_clients_however_sent(self):
        server = Server()
        try:
            r = server.client()
            six_tokens(r)
            for args in (("FENCING.APPLY", "UNFENCE", "orders:invoice"), ("FENCING.APPLY", "GRANT", "orders", 1, "me", "x", 9e12)):
                self.assertIn("runs only from the replication link or the AOF", error_of(lambda: r.execute_command(*args)))
            self.assertIn("not allowed from script",
                          error_of(lambda: r.eval("return redis.call('FENCING.APPLY', 'UNFENCE', KEYS[1])", 1, "orders:invoice")))
            pipe = r.pipeline(transaction=True)
            pipe.execute_command("FENCING.APPLY", "UNFENCE", "orders:invoice")
            self.assertIn("replication link", str(pipe.execute(raise_on_error=False)[0]))
            self.assertKept(r)
        finally:
            server.stop()

    def test_unload_is_refused_and_a_restart_rotates_the_keys(self):
        with open(PROOFS) as f:
            keys = json.load(f)["keys"]
        k7, k8 = keys["ed-7"], keys["ed-8"]
        args7 = ["VERIFY", "7", "ed25519", k7["material"], "SIGN", "7", "ed25519", k7["secret"]]
        args8 = ["VERIFY", "8", "ed25519", k8["material"], "SIGN", "8", "ed25519", k8["secret"]]
        server = Server("--enable-module-command", "local", module_args=args7)
        try:
            r = server.client()
            token, _, proof7 = r.execute_command("FENCING.ACQUIRE", "orders", "w", 60000)
            r.execute_command("FENCING.SET", "k", "orders", token, "v", "PROOF", proof7)
            self.assertIn("can't unload", error_of(lambda: r.execute_command("MODULE", "UNLOAD", "fencing")))
            self.assertIn("PROOF_MISSING", error_of(lambda: r.execute_command("FENCING.SET", "k", "orders", token, "v")))
            server.restart(module_args=args8)
            r = server.client()
            self.assertIn("PROOF_UNKNOWN_KEY key_id=7",
                          error_of(lambda: r.execute_command("FENCING.SET", "k", "orders", token, "v", "PROOF", proof7)))
            self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"orders", str(token).encode(), None], "kept")
            token8, _, proof8 = r.execute_command("FENCING.ACQUIRE", "other", "w", 60000)
            self.assertEqual(r.execute_command("FENCING.SET", "k2", "other", token8, "v", "PROOF", proof8), b"OK")
        finally:
            server.stop()

    def test_a_load_applies_its_arguments_or_fails_with_the_reason(self):
        with open(PROOFS) as f:
            k7 = json.load(f)["keys"]["ed-7"]
        plain = Server("--enable-module-command", "local", load_module=False)
        try:
            r = plain.client()
            self.assertIn("Error loading the extension",
                          error_of(lambda: r.execute_command("MODULE", "LOAD", MODULE, "PLUGIN", "/nonexistent.wasm")))
            self.assertIn("cannot load the plugin /nonexistent.wasm", plain.log_text())
            self.assertEqual(r.execute_command("MODULE", "LOAD", MODULE, "VERIFY", "7", "ed25519", k7["material"]), b"OK")
            self.assertIn("PROOF_MISSING", error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 1, "v")))
            self.assertIsNone(r.get("k"))
        finally:
            plain.stop()

    def test_a_cluster_node_refuses_to_load_the_module(self):
        port = next(p for p in iter(lambda: free_port(), None) if p <= 55535)  # the cluster bus is port + 10000
        with self.assertRaises(RuntimeError) as e:
            Server("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", port=port)
        self.assertIn("Redis Cluster is not supported", str(e.exception))


if __name__ == "__main__":
    unittest.main()
