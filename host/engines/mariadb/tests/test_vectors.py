"""Every shared vector through the library's SQL functions, inside mariadbd:
the decisions (tests/vectors/*.json) through fencing_admit, the signed
writes (tests/vectors/proofs) through fencing_admit_signed, and what a host
accepts (tests/vectors/arguments) through the functions' arguments, both as
constants (the statement fails at the function's init) and as values from a
row (the answer names the refusal)."""

import glob
import json
import os
import unicodedata
import unittest

from support import VECTORS, fresh_database, one, refusal, shared

POLICY = {"non_decreasing": "non-decreasing", "strictly_increasing": "strictly-increasing"}


def text(n):
    """A u64 as the decimal text fencing_admit takes for any u64 (SQL integers stop at 2^63-1)."""
    return None if n is None else str(n)


def verdict(answer):
    """fencing_admit's JSON as a vector's verdict."""
    a = json.loads(answer)
    if "error" in a:
        raise AssertionError(f"an argument was refused: {a}")
    if a.pop("admitted"):
        return {"verdict": "admitted", **a}
    return {"verdict": a.pop("reason"), **a}


class Decisions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.conn = shared().client()
        cls.cur = cls.conn.cursor()

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def admit(self, fence, lock, token, sequence, policy):
        fl, fh, fs = (fence["lock"], fence["high_water"], fence.get("sequence")) if fence else (None, None, None)
        answer = one(self.cur, "SELECT fencing_admit(%s, %s, %s, %s, %s, %s, %s)",
                     (fl, text(fh), text(fs), lock, text(token), text(sequence), policy))
        return verdict(answer)

    def test_every_decision_vector(self):
        """Each case decided as the vector says; a case whose lock names the
        hosts' name rule refuses (empty, edge whitespace, over 256
        characters: the contract takes any string) must be refused by that
        rule's code instead."""
        passed = refused = 0
        for path in sorted(glob.glob(os.path.join(VECTORS, "*.json"))):
            with open(path) as f:
                cases = json.load(f)["cases"]
            for case in cases:
                with self.subTest(case=case["name"]):
                    refused += self.decide_or_refuse(case)
                    passed += 1
        self.assertGreater(passed - refused, 100)
        print(f"\ndecision vectors: {passed} passed ({refused} by refusing a name the hosts' rule refuses), 0 failed")

    def decide_or_refuse(self, case):
        """Runs `case`; 1 when its lock names are ones the hosts' name rule
        refuses, and the function refused them with that rule's code."""
        bad = [n for n in lock_names(case) if name_code(n)]
        if not bad:
            self.run_case(case)
            return 0
        errno, _, message = refusal(self.cur, "SELECT fencing_admit(NULL, NULL, NULL, %s, 1)", (bad[0],))
        self.assertEqual(errno, 1123)
        self.assertIn(f"; {name_code(bad[0])}: ", message)
        return 1

    def run_case(self, case):
        policy = POLICY[case["policy"]]
        if case["kind"] == "admit":
            s = case["sequencer"]
            got = self.admit(case["fence"], s["lock"], s["token"], s.get("sequence"), policy)
            self.assertEqual(got, normal(case["expect"]))
        elif case["kind"] == "batch":
            fence, got = case["fence"], []
            for w in case["writes"]:
                v = self.admit(fence, case["lock"], w["token"], w.get("sequence"), policy)
                got.append(v)
                if v["verdict"] == "admitted":
                    fence = {"lock": case["lock"], "high_water": v["high_water"], "sequence": v["sequence"]}
            self.assertEqual(got, [normal(v) for v in case["expect"]["verdicts"]])
            want = case["expect"]["fence"]
            have = None if fence is None else {"high_water": fence["high_water"], "sequence": fence.get("sequence")}
            self.assertEqual(have, None if want is None else {"high_water": want["high_water"], "sequence": want.get("sequence")})
        else:
            mark = case["high_water"]
            got = []
            for t in case["tokens"]:
                fence = {"lock": "stream", "high_water": mark} if mark else None
                v = self.admit(fence, "stream", t, None, policy)
                got.append(v["verdict"])
                if v["verdict"] == "admitted":
                    mark = v["high_water"]
            self.assertEqual(got, case["expect"]["verdicts"])
            self.assertEqual(mark, case["expect"]["high_water"])

    def test_random_cases_agree_with_the_native_rules(self):
        path = os.environ.get("FENCING_RANDOM_VECTORS")
        if not path:
            self.skipTest("set FENCING_RANDOM_VECTORS (scripts/test-mariadb does when the fencing binary is built)")
        with open(path) as f:
            cases = json.load(f)["cases"]
        refused = 0
        for case in cases:
            with self.subTest(case=case["name"]):
                refused += self.decide_or_refuse(case)
        print(f"\nrandom cases: {len(cases)} passed ({refused} by refusing a name the hosts' rule refuses), 0 failed")


def lock_names(case):
    fence = case.get("fence")
    names = [fence["lock"]] if fence else []
    if case["kind"] == "admit":
        names.append(case["sequencer"]["lock"])
    elif case["kind"] == "batch":
        names.append(case["lock"])
    return names


def name_code(name):
    """The code the hosts' name rule refuses `name` with (guest/src/accept.rs), or None."""
    if name == "":
        return "name_empty"
    if len(name) > 256:
        return "name_too_long"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "name_control"
    if name != name.strip():
        return "name_whitespace"
    return None


def normal(expect):
    """A vector's verdict with its optional fields as fencing_admit answers them."""
    e = dict(expect)
    if e["verdict"] == "admitted":
        e.setdefault("sequence", None)
    if e["verdict"] == "sequence_regressed":
        e.setdefault("presented", None)
    return e


class Proofs(unittest.TestCase):
    def test_every_proof_vector(self):
        with open(os.path.join(VECTORS, "proofs", "signed.json")) as f:
            data = json.load(f)
        keys = data["keys"]
        with shared().client() as c, c.cursor() as cur:
            for case in data["cases"]:
                with self.subTest(case=case["name"]):
                    ring = "\n".join(f"{keys[k]['id']} {keys[k]['algorithm']} {keys[k]['material']}" for k in case["verifier"])
                    fence, s = case["fence"], case["sequencer"]
                    fl, fh, fs = (fence["lock"], fence["high_water"], fence.get("sequence")) if fence else (None, None, None)
                    answer = one(cur, "SELECT fencing_admit_signed(%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                                 (fl, text(fh), text(fs), s["lock"], text(s["token"]), text(s.get("sequence")),
                                  case["proof"]["hex"], ring, POLICY[case["policy"]]))
                    self.assertEqual(verdict(answer), normal(case["expect"]))
        print(f"\nproof vectors: {len(data['cases'])} passed, 0 failed")


class Arguments(unittest.TestCase):
    """tests/vectors/arguments: names, policies, numbers as text and as
    signed integers, proofs: each through an argument of a SQL function."""

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(VECTORS, "arguments", "arguments.json")) as f:
            cls.cases = json.load(f)["cases"]
        with open(os.path.join(VECTORS, "proofs", "signed.json")) as f:
            k = json.load(f)["keys"]["ed-7"]
        cls.ring = f"{k['id']} {k['algorithm']} {k['material']}"
        cls.conn = shared().client(database=fresh_database(shared()))
        cls.cur = cls.conn.cursor()
        cls.cur.execute("CREATE TABLE vs (x LONGBLOB)")
        cls.cur.execute("CREATE TABLE vi (x BIGINT)")

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def value_of(self, case):
        if "bytes_hex" in case:
            return bytes.fromhex(case["bytes_hex"])
        if "text" in case:
            return case["text"] * case.get("repeat", 1)
        return case["value"]

    def call(self, kind, value):
        """(SQL, arguments) of the entry point for `kind`, with `value` at the checked argument."""
        if kind == "name":
            return "SELECT fencing_admit(NULL, NULL, NULL, {}, 1)", value
        if kind == "policy":
            return "SELECT fencing_admit(NULL, NULL, NULL, 'l', 1, NULL, {})", value
        if kind in ("number", "from_signed"):
            return "SELECT fencing_admit(NULL, NULL, NULL, 'l', {})", value
        if kind == "proof":
            return "SELECT fencing_admit_signed(NULL, NULL, NULL, 'l', 1, NULL, {}, %s)", value
        raise AssertionError(kind)

    def params(self, kind, value):
        return (value, self.ring) if kind == "proof" else (value,)

    def check_answer(self, case, answer):
        a = json.loads(answer)
        if case["expect"] != "ok":
            self.assertEqual(a.get("error"), case["expect"], a)
            self.assertIn(f"({case['expect']})", a["message"])
            return
        self.assertNotIn("error", a)
        if case["kind"] in ("number", "from_signed"):
            if case["value"] == 0:
                self.assertEqual(a["reason"], "invalid_token")
            else:
                self.assertEqual(a["high_water"], case["value"])

    def test_every_argument_vector_as_a_constant_and_from_a_row(self):
        counted = 0
        for case in self.cases:
            kind = case["kind"]
            with self.subTest(case=case["name"]):
                value = self.value_of(case)
                if kind == "to_signed":
                    self.to_signed(case)
                    counted += 1
                    continue
                sql, _ = self.call(kind, value)
                # As a constant: the function refuses it at init, naming the rule's code.
                literal = sql.format("%s")
                if case["expect"] == "ok":
                    self.check_answer(case, one(self.cur, literal, self.params(kind, value)))
                else:
                    errno, _, message = refusal(self.cur, literal, self.params(kind, value))
                    self.assertEqual(errno, 1123, message)  # ER_CANT_INITIALIZE_UDF
                    self.assertIn(f"; {case['expect']}: ", message)
                # From a row (not a constant): the answer names the refusal.
                table = "vi" if isinstance(value, int) else "vs"
                self.cur.execute(f"DELETE FROM {table}")
                self.cur.execute(f"INSERT INTO {table} VALUES (%s)", (value,))
                from_row = sql.format("x") + f" FROM {table}"
                self.check_answer(case, one(self.cur, from_row, self.params(kind, value)[1:] or None))
                counted += 1
        self.assertEqual(counted, len(self.cases))
        print(f"\nargument vectors: {counted} passed, 0 failed")

    def to_signed(self, case):
        """A token handed to the triggers' path, which carries SQL's signed 64-bit tokens."""
        args = ("r", None, None, None, "r", str(case["value"]), None, None, None, None, None)
        code = one(self.cur, "SELECT fencing_check(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", args)
        if case["expect"] == "ok":
            self.assertEqual(code, 0)
        else:
            self.assertEqual(code, 21)
            message = one(self.cur, "SELECT fencing_refusal(%s, 't', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, NULL)",
                          (code, *args)).decode()
            self.assertIn(f"({case['expect']})", message)


class BadCalls(unittest.TestCase):
    def test_wrong_argument_counts_and_types_are_errors_naming_the_function(self):
        with shared().client() as c, c.cursor() as cur:
            errno, _, message = refusal(cur, "SELECT fencing_admit('a', 1)")
            self.assertEqual(errno, 1123)
            self.assertIn("fencing_admit takes (current_lock", message)
            _, _, message = refusal(cur, "SELECT fencing_admit(NULL, NULL, NULL, 'l', 1.5)")
            self.assertIn("; argument_type: token must be", message)
            answer = json.loads(one(cur, "SELECT fencing_admit('l', NULL, NULL, 'l', 3)"))
            self.assertEqual(answer["error"], "argument_missing")
            self.assertIn("current_high_water", answer["message"])
            self.assertIsNone(one(cur, "SELECT fencing_keys_check('')"))
            self.assertIn(b"line 1", one(cur, "SELECT fencing_keys_check('1 rsa 00')"))
            self.assertIn(b"fencing:guard/check@0.3.0", one(cur, "SELECT fencing_guard_info()"))
            # Any account may call the functions: no file outside the plugin directory is ever read.
            for path in ("/dev/zero", "/etc/passwd", "../../etc/passwd"):
                self.assertIn(b"must be a .wasm file in mariadbd's plugin directory", one(cur, "SELECT fencing_guard_info(%s)", (path,)))
            self.assertIn(b"more than 16384", one(cur, "SELECT fencing_keys_check(REPEAT('1 ed25519 00,', 2000))"))


if __name__ == "__main__":
    unittest.main()
