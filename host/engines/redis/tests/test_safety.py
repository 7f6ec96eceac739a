"""Nothing a client sends stops redis-server: NUL bytes, format strings,
characters that narrow to a NUL or a line break, binary replies; every
argument read by the hosts' one set of rules (the shared argument vectors);
FENCING.EXEC runs only writes to the fenced key."""

import json
import os
import unittest

import redis

from servers import Server
from test_module import VECTORS, WithServer, error_of

ARGUMENTS = os.path.join(VECTORS, "arguments", "arguments.json")


class NoCrash(WithServer):
    """Each call here aborted redis-server through the module binding's
    unwrap() on a C string, or printf read a client's text as its format."""

    def assertServing(self):
        self.assertTrue(self.server.alive(), "redis-server is running")
        self.assertTrue(self.r.ping())

    def test_nul_bytes_in_every_argument(self):
        r = self.r
        # Keys are binary-safe: a raw UUID with NUL bytes is an honest key.
        uuid = bytes.fromhex("00112233445566778899aabbccddee00")
        self.assertIsNone(r.execute_command("FENCING.FENCE", b"app:\x00"))
        self.assertEqual(r.execute_command("FENCING.SET", uuid, "orders", 5, b"v\x00"), b"OK")
        self.assertEqual(r.get(uuid), b"v\x00")
        self.assertEqual(r.execute_command("FENCING.FENCE", uuid), [b"orders", b"5", None])
        self.assertIsNone(r.execute_command("FENCING.FENCE", uuid[:-1]), "a key's fence is its bytes, all of them")
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.SET", uuid, "orders", 4, "x")).startswith("STALE_TOKEN"))
        self.assertEqual(r.execute_command("FENCING.EXEC", b"\xff\x00", "orders", 5, "HSET", b"\xff\x00", "f", "v"), 1)
        # Names are text without control characters: refused, by the rule's code.
        for args in (("FENCING.ACQUIRE", "orders\x00", "w", 1000), ("FENCING.ACQUIRE", "orders", "w\x00", 1000),
                     ("FENCING.SET", "k", "a\x00b", 1, "v"), ("FENCING.LOCK", "\x00"),
                     ("FENCING.RELEASE", "\x00", "lease"), ("FENCING.RENEW", "l\x00", "lease", 1000),
                     ("FENCING.RESET", uuid, "why", "REBIND", "l\x00", 3)):
            self.assertIn("contains control character U+0000 (name_control)", error_of(lambda: r.execute_command(*args)), args)
        self.assertIn("without control characters", error_of(lambda: r.execute_command("FENCING.RESET", uuid, "wh\x00y")))
        # A reset of a binary key is recorded with the key as it is, and logged escaped.
        r.execute_command("FENCING.RESET", uuid, "raw uuid", "REBIND", "orders", 9)
        self.assertEqual(r.execute_command("FENCING.FENCE", uuid), [b"orders", b"9", None])
        self.assertEqual(r.execute_command("FENCING.RESETS")[0][7], uuid)
        self.assertIn('of key "\\x00\\x11\\"3DUfw\\x88\\x99\\xaa\\xbb\\xcc\\xdd\\xee\\x00"', self.server.log_text())
        self.assertServing()

    def test_the_docs_read_only_user_cannot_stop_the_server_with_a_nul(self):
        r = self.r
        r.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "resetkeys", "~app:*", "-@all", "+fencing.fence", "+ping")
        reader = redis.Redis(host="127.0.0.1", port=self.server.port, username="reader", password="pw")
        self.assertIsNone(reader.execute_command("FENCING.FENCE", b"app:\x00"))
        self.assertServing()

    def test_text_that_narrows_to_a_nul_or_a_line_break_and_printf_formats(self):
        r = self.r
        # U+0100 narrowed to one byte is NUL; U+010A is a line feed.
        r.execute_command("FENCING.SET", "k", "\u0100\u010a", 3, "v")
        err = error_of(lambda: r.execute_command("FENCING.SET", "k", "other", 4, "v"))
        self.assertEqual(err, 'WRONG_LOCK the key is fenced by lock "\\xc4\\x80\\xc4\\x8a"')
        r.execute_command("FENCING.ACQUIRE", "l", "\u010aholder", 10000)
        self.assertTrue(error_of(lambda: r.execute_command("FENCING.ACQUIRE", "l", "w", 10000)).startswith("LOCKED holder="))
        # A reason is logged as text, never read as a format.
        r.execute_command("FENCING.RESET", "k", "%s%s%s%s%s%s%s%s%n%n", "REBIND", "l", 3)
        self.assertIn('because "%s%s%s%s%s%s%s%s%n%n"', self.server.log_text())
        self.assertServing()

    def test_exec_with_a_nul_in_the_command_and_a_binary_reply(self):
        r = self.r
        self.assertIn("unknown command", error_of(lambda: r.execute_command("FENCING.EXEC", "k", "l", 1, "SET\x00", "k", "v")))
        r.set("k", b"a\x00b")
        # SET ... GET answers the old value: a bulk string with a NUL, passed on as it is.
        self.assertEqual(r.execute_command("FENCING.EXEC", "k", "l", 1, "SET", "k", "new", "GET"), b"a\x00b")
        self.assertEqual(r.get("k"), b"new")
        self.assertServing()


class Exec(WithServer):
    """FENCING.EXEC runs one write command on the fenced key, nothing else."""

    def test_reads_module_commands_and_other_keys_are_refused_and_move_no_fence(self):
        r = self.r
        r.execute_command("FENCING.SET", "k", "l", 5, "v")
        cases = [
            (("GET", "k"), "does not write (a read must not raise the fence)"),
            (("TYPE", "k"), "does not write"),
            (("FENCING.ACQUIRE", "k", "w", 1000), "runs Redis's own write commands, not FENCING.ACQUIRE"),
            (("fencing.set", "k", "l", 999, "v"), "not fencing.set"),
            (("NOSUCH", "k"), "unknown command"),
            (("DEL", "k", "other"), "touches keys other than the fenced key"),
            (("FLUSHALL", "k"), "writes no key"),
            (("EVAL", "k", "0"), "EVAL does not write"),
        ]
        for command, expected in cases:
            self.assertIn(expected, error_of(lambda: r.execute_command("FENCING.EXEC", "k", "l", 999, *command)), command)
        self.assertEqual(r.execute_command("FENCING.FENCE", "k"), [b"l", b"5", None], "no refused command raised the fence")
        self.assertIsNone(r.execute_command("FENCING.LOCK", "k")[0], "FENCING.ACQUIRE did not run")
        self.assertEqual(r.get("k"), b"v")
        self.assertEqual(r.execute_command("FENCING.EXEC", "k", "l", 6, "APPEND", "k", "w"), 2)


def vector_input(case):
    if "bytes_hex" in case:
        return bytes.fromhex(case["bytes_hex"])
    return (case["text"] * case.get("repeat", 1)).encode()


class ArgumentVectors(WithServer):
    """The shared argument vectors (tests/vectors/arguments) through the
    module's commands: names as a lock and as a holder (bytes_hex cases
    too: Redis arguments are bytes), policies, tokens and sequences as text,
    proofs as hex. Every refusal names the rule's code."""

    def outcome(self, call):
        try:
            call()
            return "ok"
        except redis.ResponseError as e:
            text = str(e)
            if text.startswith("INVALID_TOKEN"):
                return "ok"  # the argument was taken; token 0 is then refused by the rules
            return text[text.rindex("(") + 1:-1] if text.endswith(")") else text

    def test_every_argument_vector_of_the_kinds_redis_takes(self):
        r = self.r
        with open(ARGUMENTS) as f:
            cases = json.load(f)["cases"]
        ran = {}
        for i, c in enumerate(cases):
            kind, expect = c["kind"], c["expect"]
            if kind not in ("name", "policy", "number", "proof"):
                continue  # from_signed, to_signed: no signed integer reaches the module from Redis
            text = vector_input(c)
            with self.subTest(case=c["name"]):
                if kind == "name":
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.ACQUIRE", text, "holder", 60000)), expect)
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.ACQUIRE", f"lock-{i}", text, 60000)), expect)
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.SET", f"k-{i}", text, 1, "v")), expect)
                    if expect == "ok":
                        self.assertEqual(r.execute_command("FENCING.LOCK", text)[:2], [b"holder", 1], "its own lock")
                        self.assertEqual(r.execute_command("FENCING.LOCK", f"lock-{i}")[0], text)
                elif kind == "policy":
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.SET", f"k-{i}", "l", 1, "v", "POLICY", text)), expect)
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.DECIDE", text, "l", 1)), expect)
                elif kind == "number":
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.SET", f"k-{i}", "l", text, "v")), expect)
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.DECIDE", "non-decreasing", "l", 1, "SEQ", text)), expect)
                    if expect == "ok" and c["value"] > 0:
                        self.assertEqual(r.execute_command("FENCING.FENCE", f"k-{i}")[1], str(c["value"]).encode())
                elif kind == "proof":
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.DECIDE", "non-decreasing", "l", 1, "PROOF", text)), expect)
                    self.assertEqual(self.outcome(lambda: r.execute_command("FENCING.SET", f"k-{i}", "l", 1, "v", "PROOF", text)), expect)
                ran[kind] = ran.get(kind, 0) + 1
        self.assertEqual(set(ran), {"name", "policy", "number", "proof"})
        self.assertEqual(sum(ran.values()), sum(1 for c in cases if c["kind"] in ran))
        print(f"\nredis: argument vectors {ran}")
        self.assertTrue(self.server.alive())
