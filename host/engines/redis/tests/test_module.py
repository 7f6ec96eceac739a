"""The fencing module inside a real redis-server, through redis-py."""

import glob
import json
import os
import subprocess
import threading
import time
import unittest

import redis

from servers import Server

VECTORS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "tests", "vectors")
MISBEHAVING = os.environ.get("FENCING_MISBEHAVING_WASM", "")


def raw(r, *args):
    """A reply as Redis sent it, past redis-py's parsing of known commands."""
    conn = r.connection_pool.get_connection("_")
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def error_of(call):
    try:
        call()
    except redis.ResponseError as e:
        return str(e)
    raise AssertionError("expected an error reply")


class WithServer(unittest.TestCase):
    """A fresh redis-server with the module for each test (self.server, self.r)."""

    def setUp(self):
        self.server = Server()
        self.r = self.server.client()

    def tearDown(self):
        self.server.stop()


class GcPause(WithServer):
    def test_a_paused_holders_late_write_is_refused_and_the_value_keeps_the_new_holders_data(self):
        r = self.r
        token_a, lease_a = r.execute_command("FENCING.ACQUIRE", "orders", "client-a", 200)
        self.assertEqual(r.execute_command("FENCING.SET", "orders:invoice", "orders", token_a, "from a"), b"OK")
        # Client A pauses past its lease; B takes the lock after it expires.
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.ACQUIRE", "orders", "client-b", 30000)).startswith("LOCKED"))
        time.sleep(0.3)
        token_b, lease_b = r.execute_command("FENCING.ACQUIRE", "orders", "client-b", 30000)
        self.assertGreater(token_b, token_a)
        self.assertEqual(r.execute_command("FENCING.SET", "orders:invoice", "orders", token_b, "from b"), b"OK")
        # A wakes and writes with its old token.
        err = error_of(lambda: r.execute_command("FENCING.SET", "orders:invoice", "orders", token_a, "late"))
        self.assertEqual(err, f"STALE_TOKEN presented={token_a} high_water={token_b}")
        self.assertEqual(r.get("orders:invoice"), b"from b")
        # A's lease is gone: it cannot renew or release B's.
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.RENEW", "orders", lease_a, 1000)).startswith("WRONG_LEASE"))
        self.assertEqual(r.execute_command("FENCING.RELEASE", "orders", lease_b), b"OK")
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.RENEW", "orders", lease_b, 1000)).startswith("LEASE_EXPIRED"))
        holder, last, _ = r.execute_command("FENCING.LOCK", "orders")
        self.assertEqual((holder, last), (None, token_b))
        # A lease ends by Redis's clock: renewing after that is refused.
        _, lease_c = r.execute_command("FENCING.ACQUIRE", "orders", "client-c", 50)
        time.sleep(0.15)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.RENEW", "orders", lease_c, 1000)).startswith("LEASE_EXPIRED"))

    def test_every_write_form_is_fenced(self):
        r = self.r
        r.execute_command("FENCING.SET", "k", "l", 5, "a")
        self.assertEqual(r.execute_command("FENCING.APPEND", "k", "l", 5, "b"), 2)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.APPEND", "k", "l", 4, "x")).startswith("STALE_TOKEN"))
        self.assertEqual(r.execute_command("FENCING.EXEC", "h", "l", 6, "HSET", "h", "f", "v"), 1)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.EXEC", "h", "l", 5, "HSET", "h", "f", "late")).startswith("STALE_TOKEN"))
        self.assertEqual(r.hgetall("h"), {b"f": b"v"})
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.DEL", "k", "other", 9)).startswith("WRONG_LOCK"))
        self.assertEqual(r.execute_command("FENCING.DEL", "k", "l", 6), 1)
        self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"l", b"6", None])
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 6, "s", "SEQ", 2, "POLICY", "strictly-increasing")).startswith("TOKEN_REUSED"))
        r.execute_command("FENCING.SET", "k", "l", 6, "s", "SEQ", 2)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 6, "s", "SEQ", 2)).startswith("SEQUENCE_REGRESSED"))
        stats = r.execute_command("FENCING.STATS")
        self.assertEqual(dict(zip(stats[::2], stats[1::2])),
                         {b"writes_admitted": 5, b"writes_refused": 5, b"guard_failures": 0, b"resets": 0,
                          b"fences": 2, b"locks": 0})

    def test_the_story_through_redis_cli(self):
        # Thirty-two leases before the story begins: client A's is the 33rd.
        for _ in range(32):
            _, lease = self.r.execute_command("FENCING.ACQUIRE", "orders", "earlier", 10000)
            self.r.execute_command("FENCING.RELEASE", "orders", lease)

        def cli(*args):
            out = subprocess.run(["redis-cli", "-p", str(self.server.port), *map(str, args)],
                                 capture_output=True, text=True, check=True)
            return out.stdout.strip()

        token_a, _ = cli("FENCING.ACQUIRE", "orders", "client-a", 200).splitlines()
        self.assertEqual(token_a, "33")
        self.assertEqual(cli("FENCING.SET", "orders:invoice", "orders", 33, "from a"), "OK")
        time.sleep(0.3)  # A pauses past its lease
        token_b, _ = cli("FENCING.ACQUIRE", "orders", "client-b", 30000).splitlines()
        self.assertEqual(token_b, "34")
        self.assertEqual(cli("FENCING.SET", "orders:invoice", "orders", 34, "from b"), "OK")
        self.assertEqual(cli("FENCING.SET", "orders:invoice", "orders", 33, "late"),
                         "STALE_TOKEN presented=33 high_water=34")  # an error reply (redis-cli shows "(error)" on a terminal)
        self.assertEqual(cli("GET", "orders:invoice"), "from b")


class BadInput(WithServer):
    def test_bad_input_is_a_clear_error_naming_the_rule_and_writes_nothing(self):
        r = self.r
        cases = [
            (("FENCING.SET", "k", "l", 1), "wrong number of arguments"),
            (("FENCING.SET", "k", "l", "x", "v"), "token must be a decimal integer from 0 to 18446744073709551615 (number_not_decimal)"),
            (("FENCING.SET", "k", "l", "-1", "v"), "(number_not_decimal)"),
            (("FENCING.SET", "k", "l", "007", "v"), "token must be written without leading zeros (number_leading_zero)"),
            (("FENCING.SET", "k", "l", "18446744073709551616", "v"), "(number_too_large)"),
            (("FENCING.SET", "k", "", 1, "v"), "lock must not be empty (name_empty)"),
            (("FENCING.SET", "k", "x" * 257, 1, "v"), "lock is 257 characters, longer than 256 (name_too_long)"),
            (("FENCING.SET", "k", b"\xff\xfe", 1, "v"), "lock is not UTF-8 text (name_not_utf8)"),
            (("FENCING.SET", "k", "app:\x00", 1, "v"), "lock contains control character U+0000 (name_control)"),
            (("FENCING.SET", "k", " l", 1, "v"), "(name_whitespace)"),
            (("FENCING.SET", "k", "l", 1, "v", "SEQ"), "SEQ needs a value"),
            (("FENCING.SET", "k", "l", 1, "v", "SEQ", 1, "SEQ", 2), "SEQ is given twice"),
            (("FENCING.SET", "k", "l", 1, "v", "POLICY", "sometimes"), "POLICY must be non-decreasing or strictly-increasing (policy_unknown)"),
            (("FENCING.SET", "k", "l", 1, "v", "POLICY", "non_decreasing"), "(policy_unknown)"),
            (("FENCING.SET", "k", "l", 1, "v", "POLICY", "Non-Decreasing"), "(policy_unknown)"),
            (("FENCING.SET", "k", "l", 1, "v", "PROOF", "0x00"), "(proof_not_hex)"),
            (("FENCING.EXEC", "k", "l", 1, "SET", "other", "v"), "the command's first argument must be the fenced key"),
            (("FENCING.ACQUIRE", "l", "me", 5), "ttl_ms must be 10 to 3600000"),
            (("FENCING.ACQUIRE", "l", "me", "0100"), "(number_leading_zero)"),
            (("FENCING.ACQUIRE", "l", "me\tyou", 1000), "holder contains control character U+0009 (name_control)"),
            (("FENCING.ACQUIRE", "l", "me"), "wrong number of arguments"),
            (("FENCING.STATS", "junk"), "wrong number of arguments"),
        ]
        for args, expected in cases:
            self.assertIn(expected, error_of(lambda: r.execute_command(*args)), args)
        self.assertEqual(r.keys("*"), [], "nothing was written")
        self.assertEqual(r.execute_command("FENCING.STATS")[-3::2], [0, 0], "no fence and no lock either")
        # Binary values are stored as given, and the u64 limit itself is a token.
        r.execute_command("FENCING.SET", "bin", "l", 18446744073709551615, b"\x00\xff\r\n")
        self.assertEqual(r.get("bin"), b"\x00\xff\r\n")
        self.assertEqual(r.execute_command("FENCING.FENCE", "bin")[1], b"18446744073709551615")


class Keys(WithServer):
    """Where the module keeps its state, and what it tells Redis about its keys."""

    def test_the_module_keeps_no_key_of_its_own(self):
        r = self.r
        token, lease = r.execute_command("FENCING.ACQUIRE", "orders", "w", 10000)
        r.execute_command("FENCING.SET", "orders:invoice", "orders", token, "v")
        r.execute_command("FENCING.EXEC", "h", "orders", token, "HSET", "h", "f", "v")
        r.execute_command("FENCING.RESET", "h", "a test", "REBIND", "orders", token)
        self.assertEqual(sorted(r.keys("*")), [b"h", b"orders:invoice"], "only the data")
        stats = r.execute_command("FENCING.STATS")
        self.assertEqual(dict(zip(stats[::2], stats[1::2]))[b"fences"], 2)
        self.assertEqual(r.execute_command("FENCING.LOCK", "orders")[:2], [b"w", token])
        # A key under `fencing:` is an ordinary key.
        self.assertEqual(r.execute_command("FENCING.SET", "fencing:fence:{x}", "orders", token, "v"), b"OK")

    def test_command_info_names_the_keys_so_cluster_clients_route_them(self):
        r = self.r
        self.assertEqual(raw(r, "COMMAND", "GETKEYS", "FENCING.SET", "k", "l", 1, "v"), [b"k"])
        self.assertEqual(raw(r, "COMMAND", "GETKEYS", "FENCING.EXEC", "h", "l", 1, "HSET", "h", "f", "v"), [b"h"])
        self.assertEqual(raw(r, "COMMAND", "GETKEYS", "FENCING.ACQUIRE", "orders", "me", 1000), [b"orders"])
        info = raw(r, "COMMAND", "INFO", "FENCING.SET")[0]
        self.assertIn(b"write", info[2])
        self.assertIn(b"denyoom", info[2])
        self.assertIn(b"readonly", raw(r, "COMMAND", "INFO", "FENCING.LOCK")[0][2])

    def test_module_load_into_a_running_server(self):
        plain = Server("--enable-module-command", "local", load_module=False)
        try:
            r = plain.client()
            self.assertIn("unknown command", error_of(lambda: r.execute_command("FENCING.LOCK", "l")))
            self.assertEqual(r.execute_command("MODULE", "LOAD", os.environ["FENCING_REDIS_MODULE"]), b"OK")
            self.assertEqual(r.execute_command("FENCING.SET", "k", "l", 3, "v"), b"OK")
            self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"l", b"3", None])
        finally:
            plain.stop()

    def test_info_counts_admitted_refused_and_reset_and_names_the_guard(self):
        r = self.r
        r.execute_command("FENCING.SET", "k", "l", 5, "a")
        error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 4, "b"))
        r.execute_command("FENCING.RESET", "k", "test")
        info = r.info("fencing")
        self.assertEqual((info["fencing_writes_admitted"], info["fencing_writes_refused"]), (1, 1))
        self.assertEqual((info["fencing_guard_failures"], info["fencing_resets"]), (0, 1))
        self.assertEqual(info["fencing_guard_source"], "<embedded>")
        self.assertEqual(len(info["fencing_guard_sha256"]), 64)
        self.assertTrue(info["fencing_guard_contract"].startswith("fencing:guard/check@"))


def resets(r, count=10):
    """FENCING.RESETS as a list of dicts, newest first."""
    return [dict(zip(e[::2], e[1::2])) for e in r.execute_command("FENCING.RESETS", count)]


class Reset(WithServer):
    """The operator's reset: removes or re-binds a fence, and is recorded."""

    def test_a_rebind_unbricks_a_key_and_every_reset_is_recorded(self):
        r = self.r
        r.execute_command("FENCING.SET", "k", "l", 18446744073709551615, "pushed too far", "SEQ", 4)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 40, "x")).startswith("STALE_TOKEN"))
        first_id = r.execute_command("FENCING.RESET", "k", "a client sent u64::MAX", "REBIND", "l", 39)
        self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"l", b"39", None])
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.SET", "k", "l", 38, "x")).startswith("STALE_TOKEN"))
        self.assertEqual(r.execute_command("FENCING.SET", "k", "l", 40, "x"), b"OK")
        second_id = r.execute_command("FENCING.RESET", "k", "start over")
        self.assertEqual(second_id, first_id + 1)
        self.assertIsNone(r.execute_command("FENCING.FENCE", "k"))
        self.assertEqual(r.execute_command("FENCING.SET", "k", "other", 1, "y"), b"OK")
        second, first = resets(r)
        self.assertEqual((first[b"id"], first[b"user"], first[b"key"], first[b"db"]), (first_id, b"default", b"k", 0))
        self.assertEqual(first[b"reason"], b"a client sent u64::MAX")
        self.assertEqual(first[b"before"], b'lock="l" high_water=18446744073709551615 sequence=4')
        self.assertEqual(first[b"after"], b'lock="l" high_water=39')
        self.assertEqual((second[b"before"], second[b"after"]), (b'lock="l" high_water=40', b"none"))
        self.assertEqual(len(resets(r, 1)), 1)
        self.assertIn(f'reset {second_id} of the fence of key "k" in db 0 by user "default" because "start over"',
                      self.server.log_text())

    def test_bad_resets_change_nothing(self):
        r = self.r
        r.execute_command("FENCING.SET", "k", "l", 7, "v")
        cases = [
            (("FENCING.RESET", "k"), "wrong number of arguments"),
            (("FENCING.RESET", "k", ""), "reason must be 1 to 1024 characters"),
            (("FENCING.RESET", "k", "r" * 1025), "reason must be 1 to 1024 characters"),
            (("FENCING.RESET", "k", b"\xff"), "reason must be 1 to 1024 characters of text"),
            (("FENCING.RESET", "k", "line\nbreak"), "without control characters"),
            (("FENCING.RESET", "k", "why", "REBIND", "l"), "wrong number of arguments"),
            (("FENCING.RESET", "k", "why", "REBIND", "l", 0), "high_water must be 1 or more"),
            (("FENCING.RESET", "k", "why", "REBIND", "l", "-3"), "(number_not_decimal)"),
            (("FENCING.RESET", "k", "why", "REBIND", "", 3), "(name_empty)"),
            (("FENCING.RESET", "k", "why", "REBIND", "l\x00", 3), "(name_control)"),
            (("FENCING.RESETS", "x"), "(number_not_decimal)"),
        ]
        for args, expected in cases:
            self.assertIn(expected, error_of(lambda: r.execute_command(*args)), args)
        self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"l", b"7", None])
        self.assertEqual(resets(r), [])


@unittest.skipUnless(MISBEHAVING, "set FENCING_MISBEHAVING_WASM (scripts/test-redis builds it)")
class Plugin(unittest.TestCase):
    """A component loaded with `PLUGIN path` decides instead of the embedded one."""

    def test_a_misbehaving_plugin_fails_writes_closed_and_the_server_keeps_serving(self):
        server = Server(module_args=["PLUGIN", MISBEHAVING])
        try:
            r = server.client()
            self.assertEqual(r.info("fencing")["fencing_guard_source"], MISBEHAVING)
            for lock, reason in (("loop", "guard_timeout"), ("trap", "guard_trap"), ("hog", "guard_out_of_memory")):
                with self.subTest(lock=lock):
                    err = error_of(lambda: r.execute_command("FENCING.SET", f"k-{lock}", lock, 1, "v"))
                    self.assertTrue(err.startswith(f"GUARD_FAILURE {reason}"), err)
                    self.assertIsNone(r.get(f"k-{lock}"))
                    self.assertIsNone(r.execute_command("FENCING.FENCE", f"k-{lock}"))
                    self.assertTrue(r.ping())
            self.assertEqual(r.execute_command("FENCING.SET", "k", "fine", 1, "v"), b"OK")  # the real rules for other names
            self.assertEqual(r.info("fencing")["fencing_guard_failures"], 3)
        finally:
            server.stop()

    def test_a_plugin_that_cannot_load_stops_the_module_loading_with_a_reason(self):
        for args, reason in ((["PLUGIN", "/nonexistent.wasm"], "cannot load the plugin /nonexistent.wasm"),
                             (["PLUGINS"], "the module takes `PLUGIN"),
                             (["VERIFY", "7", "rsa", "00"], "VERIFY: key 7: algorithm \"rsa\" is not ed25519"),
                             (["VERIFY", "7", "ed25519", "00ff"], "VERIFY: verifier key 7 is not a key of its algorithm"),
                             (["SIGN", "7", "ed25519", "zz"], "SIGN: key 7: the key is not hex")):
            with self.subTest(args=args):
                with self.assertRaises(RuntimeError) as e:
                    Server(module_args=args)
                self.assertIn(reason, str(e.exception))


PROOFS = os.path.join(VECTORS, "proofs", "signed.json")


class Signed(unittest.TestCase):
    """Signed tokens: the module signs its grants (SIGN) and checks every
    write's PROOF (VERIFY), with the shared proof vectors' ed-7 key."""

    def setUp(self):
        with open(PROOFS) as f:
            key = json.load(f)["keys"]["ed-7"]
        self.server = Server(module_args=["VERIFY", "7", "ed25519", key["material"], "SIGN", "7", "ed25519", key["secret"]])
        self.r = self.server.client()

    def tearDown(self):
        self.server.stop()

    def test_forged_tokens_are_refused_and_the_paused_holder_still_loses(self):
        r = self.r
        token_a, lease_a, proof_a = r.execute_command("FENCING.ACQUIRE", "orders", "client-a", 200)
        self.assertEqual(len(proof_a), 138, "version, key id, Ed25519 signature, in hex")
        self.assertEqual(r.execute_command("FENCING.SET", "orders:invoice", "orders", token_a, "from a", "PROOF", proof_a), b"OK")
        forged = token_a + 1
        err = error_of(lambda: r.execute_command("FENCING.SET", "orders:invoice", "orders", forged, "forged"))
        self.assertTrue(err.startswith("PROOF_MISSING"), err)
        err = error_of(lambda: r.execute_command("FENCING.SET", "orders:invoice", "orders", forged, "forged", "PROOF", proof_a))
        self.assertTrue(err.startswith("PROOF_BAD"), err)
        err = error_of(lambda: r.execute_command("FENCING.APPEND", "orders:invoice", "orders", forged, "x", "PROOF", "zz"))
        self.assertIn("PROOF must be hex digits", err)
        self.assertEqual(r.get("orders:invoice"), b"from a")
        self.assertEqual(r.execute_command("FENCING.FENCE", "orders:invoice")[1], str(token_a).encode(), "no forged write moved the mark")
        time.sleep(0.3)  # A pauses past its lease.
        token_b, _, proof_b = r.execute_command("FENCING.ACQUIRE", "orders", "client-b", 30000)
        self.assertEqual(r.execute_command("FENCING.SET", "orders:invoice", "orders", token_b, "from b", "PROOF", proof_b), b"OK")
        err = error_of(lambda: r.execute_command("FENCING.SET", "orders:invoice", "orders", token_a, "late", "PROOF", proof_a))
        self.assertEqual(err, f"STALE_TOKEN presented={token_a} high_water={token_b}")
        self.assertEqual(r.get("orders:invoice"), b"from b")
        self.assertEqual(r.info("fencing")["fencing_writes_refused"], 3)


class ProofVectors(unittest.TestCase):
    """Every shared proof vector through FENCING.DECIDE ... PROOF, one
    module load per verifier key set the vectors name (VERIFY arguments)."""

    def test_every_proof_vector(self):
        with open(PROOFS) as f:
            file = json.load(f)
        by_keys = {}
        for case in file["cases"]:
            by_keys.setdefault(tuple(case["verifier"]), []).append(case)
        ran = 0
        for names, cases in by_keys.items():
            args = []
            for name in names:
                k = file["keys"][name]
                args += ["VERIFY", str(k["id"]), k["algorithm"], k["material"]]
            server = Server(module_args=args)
            try:
                r = server.client()
                for c in cases:
                    with self.subTest(case=c["name"]):
                        self.assertEqual(self.decide(r, c), self.expected(c["expect"]))
                    ran += 1
            finally:
                server.stop()
        self.assertEqual(ran, len(file["cases"]))
        self.assertGreaterEqual(ran, 21)

    @staticmethod
    def decide(r, c):
        s, f = c["sequencer"], c["fence"]
        # The vectors name policies as the rules' serde does; the contract's spelling has hyphens.
        args = ["FENCING.DECIDE", c["policy"].replace("_", "-"), s["lock"], s["token"]]
        if s.get("sequence") is not None:
            args += ["SEQ", s["sequence"]]
        if f is not None:
            args += ["FENCE", f["lock"], f["high_water"]]
            if f.get("sequence") is not None:
                args += ["SEQ", f["sequence"]]
        if c["proof"]["hex"]:
            args += ["PROOF", c["proof"]["hex"]]
        reply = r.execute_command(*args)
        verdict = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
        num = lambda v: None if v is None else int(v)
        if verdict == "admitted":
            return {"verdict": verdict, "high_water": num(reply[1]), "sequence": num(reply[2]), "new_term": bool(reply[3])}
        if verdict in ("stale_token", "token_reused"):
            return {"verdict": verdict, "presented": num(reply[1]), "high_water": num(reply[2])}
        if verdict == "proof_unknown_key":
            return {"verdict": verdict, "key_id": num(reply[1])}
        return {"verdict": verdict}

    @staticmethod
    def expected(e):
        e = dict(e)
        if e["verdict"] == "admitted":
            e.setdefault("sequence", None)
        return e


def vector_cases():
    for path in sorted(glob.glob(os.path.join(VECTORS, "*.json"))):
        with open(path) as f:
            yield from json.load(f)["cases"]


class Vectors(unittest.TestCase):
    """Every shared vector through FENCING.DECIDE: single writes as they are,
    batches and streams as the sequence of single decisions they stand for."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server()
        cls.r = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def decide(self, policy, fence, lock, token, sequence):
        args = ["FENCING.DECIDE", policy.replace("_", "-"), lock, token]
        if sequence is not None:
            args += ["SEQ", sequence]
        if fence is not None:
            args += ["FENCE", fence["lock"], fence["high_water"]]
            if fence.get("sequence") is not None:
                args += ["SEQ", fence["sequence"]]
        reply = self.r.execute_command(*args)
        verdict = reply[0].decode()
        num = lambda v: None if v is None else int(v)
        if verdict == "admitted":
            return {"verdict": "admitted", "high_water": num(reply[1]), "sequence": num(reply[2]), "new_term": bool(reply[3])}
        if verdict in ("stale_token", "token_reused"):
            return {"verdict": verdict, "presented": num(reply[1]), "high_water": num(reply[2])}
        if verdict == "sequence_regressed":
            return {"verdict": verdict, "token": num(reply[1]), "presented": num(reply[2]), "last": num(reply[3])}
        return {"verdict": verdict}

    def run_case(self, c):
        policy = c["policy"]
        if c["kind"] == "admit":
            s = c["sequencer"]
            return self.decide(policy, c["fence"], s["lock"], s["token"], s.get("sequence"))
        if c["kind"] == "batch":
            fence, verdicts = c["fence"], []
            for w in c["writes"]:
                v = self.decide(policy, fence, c["lock"], w["token"], w.get("sequence"))
                if v["verdict"] == "admitted":
                    fence = {"lock": c["lock"], "high_water": v["high_water"], "sequence": v["sequence"]}
                verdicts.append(v)
            after = None if fence is None else {"high_water": fence["high_water"], "sequence": fence.get("sequence")}
            return {"verdicts": verdicts, "fence": after}
        lock = "stream"
        fence = None if c["high_water"] == 0 else {"lock": lock, "high_water": c["high_water"]}
        verdicts = []
        for t in c["tokens"]:
            v = self.decide(policy, fence, lock, t, None)
            if v["verdict"] == "admitted":
                fence = {"lock": lock, "high_water": v["high_water"]}
            verdicts.append(v["verdict"])
        return {"verdicts": verdicts, "high_water": 0 if fence is None else fence["high_water"]}

    @staticmethod
    def normalised(expect):
        def fill(v):
            if isinstance(v, dict):
                if v.get("verdict") == "admitted":
                    v.setdefault("sequence", None)
                if v.get("verdict") == "sequence_regressed":
                    v.setdefault("presented", None)
                for x in v.values():
                    fill(x)
            elif isinstance(v, list):
                for x in v:
                    fill(x)
            return v
        return fill(json.loads(json.dumps(expect)))

    def test_every_shared_vector(self):
        cases = list(vector_cases())
        self.assertGreaterEqual(len(cases), 100)
        failed = [c["name"] for c in cases if self.run_case(c) != self.normalised(c["expect"])]
        print(f"\nredis: {len(cases)} shared cases, {len(cases) - len(failed)} passed")
        self.assertEqual(failed, [])


class Durability(unittest.TestCase):
    def test_kill9_under_load_reissues_no_token_and_loses_no_acknowledged_fence(self):
        server = Server()
        try:
            r = server.client()
            acked_tokens, acked_fences, stop = [], {}, threading.Event()

            def load():
                c = server.client()
                i = 0
                while not stop.is_set():
                    try:
                        token, lease = c.execute_command("FENCING.ACQUIRE", "l", "w", 200)
                        acked_tokens.append(token)
                        c.execute_command("FENCING.SET", f"k{i % 20}", "l", token, str(token))
                        acked_fences[f"k{i % 20}"] = token
                        c.execute_command("FENCING.RELEASE", "l", lease)
                        i += 1
                    except (redis.ConnectionError, redis.TimeoutError):
                        return

            t = threading.Thread(target=load)
            t.start()
            deadline = time.monotonic() + 60
            while len(acked_tokens) < 30 and time.monotonic() < deadline:  # load for a while, however slow the machine
                time.sleep(0.1)
            server.kill9()
            stop.set()
            t.join()
            server.start()
            r = server.client()
            self.assertGreater(len(acked_tokens), 20)
            time.sleep(0.3)  # a lease granted just before the kill runs out
            token, _ = r.execute_command("FENCING.ACQUIRE", "l", "after", 10000)
            self.assertGreater(token, max(acked_tokens), "no token issued again after kill -9")
            for key, t_acked in acked_fences.items():
                fence = r.execute_command("FENCING.FENCE", key)
                self.assertGreaterEqual(int(fence[1]), t_acked, key)
            print(f"\nredis: kill -9 after {len(acked_tokens)} acknowledged grants; the next grant is {token}")
        finally:
            server.stop()


class Replication(unittest.TestCase):
    def test_a_replica_after_wait_holds_writes_fences_and_leases_and_once_promoted_refuses_and_grants_on(self):
        primary = Server()
        replica = Server("--replicaof", "127.0.0.1", str(primary.port))
        try:
            p, rr = primary.client(), replica.client()
            deadline = time.monotonic() + 60
            while rr.info("replication").get("master_link_status") != "up":
                self.assertLess(time.monotonic(), deadline, "the replica never finished its first sync")
                time.sleep(0.05)
            token, _ = p.execute_command("FENCING.ACQUIRE", "l", "w", 5000)
            p.execute_command("FENCING.SET", "k", "l", token + 1, "v")
            p.execute_command("FENCING.EXEC", "list", "l", token + 1, "LPUSH", "list", "a")
            self.assertGreaterEqual(p.execute_command("WAIT", 1, 30000), 1)
            self.assertEqual(rr.get("k"), b"v")
            self.assertEqual(rr.lrange("list", 0, -1), [b"a"])
            self.assertEqual(rr.execute_command("FENCING.FENCE", "k"), [b"l", str(token + 1).encode(), None])
            self.assertEqual(rr.execute_command("FENCING.LOCK", "l")[0], b"w")
            rr.execute_command("REPLICAOF", "NO", "ONE")
            self.assertTrue(error_of(lambda: rr.execute_command("FENCING.SET", "k", "l", token, "stale")).startswith("STALE_TOKEN"))
            self.assertEqual(rr.get("k"), b"v")
            # The lease runs out by the promoted replica's clock; its next grant is the next token.
            deadline = time.monotonic() + 15
            while rr.execute_command("FENCING.LOCK", "l")[0] is not None:
                self.assertLess(time.monotonic(), deadline, "the lease never expired on the promoted replica")
                time.sleep(0.1)
            self.assertEqual(rr.execute_command("FENCING.ACQUIRE", "l", "next", 5000)[0], token + 1)
        finally:
            replica.stop()
            primary.stop()


if __name__ == "__main__":
    unittest.main()
