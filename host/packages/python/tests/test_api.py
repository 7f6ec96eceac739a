"""The package's own API: values in, values out, bad input refused before it crosses."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from fencing_guard import (
    Admission,
    ArgumentError,
    BatchWrite,
    Fence,
    Guard,
    Policy,
    Reason,
    Rejection,
    Sequencer,
    Verdict,
    check_name,
)

U64_MAX = (1 << 64) - 1


@pytest.fixture(scope="module")
def guard() -> Guard:
    return Guard()


def test_the_gc_pause_story(guard: Guard) -> None:
    fence = None
    for token in range(1, 35):
        d = guard.admit(fence, Sequencer("orders", token))
        assert isinstance(d, Admission) and d.high_water == token
        fence = Fence("orders", d.high_water, d.sequence)
    late = guard.admit(fence, Sequencer("orders", 33))
    assert late == Rejection(Reason.STALE_TOKEN, presented=33, high_water=34)
    assert not late.admitted and late.reason == "stale_token"


def test_strict_policy_by_name_or_value(guard: Guard) -> None:
    fence = Fence("orders", 5)
    for policy in (Policy.STRICTLY_INCREASING, "strictly-increasing"):
        assert guard.admit(fence, Sequencer("orders", 5), policy).reason is Reason.TOKEN_REUSED  # type: ignore[union-attr]
    assert guard.admit(fence, Sequencer("orders", 5)).admitted
    assert guard.admit(fence, Sequencer("orders", 5), "non-decreasing").admitted
    # The contract's spelling only, as every host takes it.
    for other in ("strictly_increasing", "STRICTLY-INCREASING", "strictly-increasing "):
        with pytest.raises(ArgumentError, match=r"\(policy_unknown\)$") as refused:
            guard.admit(fence, Sequencer("orders", 5), other)
        assert refused.value.code == "policy_unknown"


def test_lock_names_compare_as_bytes(guard: Guard) -> None:
    composed, decomposed = "caf\u00e9", "cafe\u0301"
    assert guard.admit(Fence(composed, 1), Sequencer(decomposed, 2)).reason is Reason.WRONG_LOCK  # type: ignore[union-attr]
    assert guard.admit(Fence("Orders", 1), Sequencer("orders", 2)).reason is Reason.WRONG_LOCK  # type: ignore[union-attr]


def test_a_name_the_rule_refuses_is_refused_wherever_it_is_given(guard: Guard) -> None:
    """A NUL inside a name is refused, never compared or truncated at: as the
    fence's lock, the presented lock and a batch's lock, every time (a refused
    name is never interned, so it is checked again)."""
    calls = [
        lambda n: guard.admit(Fence(n, 1), Sequencer("a", 2)),
        lambda n: guard.admit(Fence("a", 1), Sequencer(n, 2)),
        lambda n: guard.admit(None, Sequencer(n, 2)),
        lambda n: guard.admit_batch(None, n, [1]),
        lambda n: guard.admit_columns(Fence(n, 1), "a", [2]),
    ]
    for call in calls * 2:
        with pytest.raises(ArgumentError) as refused:
            call("a\0b")
        assert refused.value.code == "name_control" and isinstance(refused.value, ValueError)
        assert str(refused.value).endswith("contains control character U+0000 (name_control)")
    assert check_name("a b") == "a b"
    with pytest.raises(ArgumentError, match="name_whitespace"):
        check_name("a ")


def test_u64_edges_cross_exactly(guard: Guard) -> None:
    d = guard.admit(Fence("l", U64_MAX - 1, U64_MAX), Sequencer("l", U64_MAX))
    assert d == Admission(U64_MAX, None, True)
    assert guard.admit_stream(U64_MAX, [U64_MAX, U64_MAX - 1]).verdicts == [Verdict.ADMITTED, Verdict.STALE_TOKEN]


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda g: g.admit(None, Sequencer("l", -1)), ValueError, "presented.token"),
        (lambda g: g.admit(None, Sequencer("l", 1 << 64)), ValueError, "presented.token"),
        (lambda g: g.admit(None, Sequencer("l", 1.0)), TypeError, "presented.token"),  # type: ignore[arg-type]
        (lambda g: g.admit(None, Sequencer("l", True)), TypeError, "presented.token"),
        (lambda g: g.admit(None, Sequencer("l", 1, -2)), ValueError, "presented.sequence"),
        (lambda g: g.admit(Fence("l", -1), Sequencer("l", 1)), ValueError, "current.high_water"),
        (lambda g: g.admit(None, Sequencer(b"l", 1)), TypeError, "presented.lock"),  # type: ignore[arg-type]
        (lambda g: g.admit(None, Sequencer("\ud800", 1)), ValueError, "presented.lock"),
        (lambda g: g.admit(None, Sequencer("l", 1), "newest"), ValueError, "policy"),
        (lambda g: g.admit({"lock": "l"}, Sequencer("l", 1)), TypeError, "current"),  # type: ignore[arg-type]
        (lambda g: g.admit_batch(None, "l", [1, BatchWrite(2, -1)]), ValueError, "writes[1].sequence"),
        (lambda g: g.admit_batch(None, "l", [None]), TypeError, "writes[0]"),  # type: ignore[list-item]
        (lambda g: g.admit_stream(0, [1, 1 << 64]), ValueError, "tokens[1]"),
        (lambda g: g.admit_stream(-1, []), ValueError, "high_water"),
    ],
)
def test_bad_values_are_refused_before_they_cross(guard: Guard, call, error, words) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        call(guard)
    # The guard is still usable and its state unharmed.
    assert guard.admit(Fence("l", 7), Sequencer("l", 6)).reason is Reason.STALE_TOKEN  # type: ignore[union-attr]


def test_batches_take_plain_ints_and_leave_the_fence(guard: Guard) -> None:
    out = guard.admit_batch(Fence("l", 3), "l", [4, 2, BatchWrite(4, 1), BatchWrite(4, 1)])
    assert [v.admitted for v in out.verdicts] == [True, False, True, False]
    assert out.verdicts[3] == Rejection(Reason.SEQUENCE_REGRESSED, token=4, presented=1, last=1)
    assert out.fence is not None and (out.fence.high_water, out.fence.sequence) == (4, 1)
    assert guard.admit_batch(None, "l", [0]).fence is None


def test_every_shape_of_batch_decides_as_one_admit_per_write(guard: Guard) -> None:
    """Plain ints, BatchWrites with and without sequences, a mix, an iterator,
    int subclasses and u64 edges: each batch's decisions are those of admitting
    its writes one by one, each against the fence the admitted ones left."""
    import enum
    import random

    class Big(enum.IntEnum):
        TOP = U64_MAX

    rng = random.Random(7)
    shapes = [
        [rng.randrange(1, 40) for _ in range(200)],
        [BatchWrite(rng.randrange(1, 40), rng.randrange(0, 5)) for _ in range(200)],
        [BatchWrite(rng.randrange(1, 40), rng.choice([None, 1, 2, 3])) for _ in range(200)],
        [rng.choice([rng.randrange(0, 40), BatchWrite(rng.randrange(0, 40), rng.choice([None, 2]))]) for _ in range(200)],
        [U64_MAX - 1, BatchWrite(U64_MAX, U64_MAX), Big.TOP, BatchWrite(Big.TOP, 0), 0],
    ]
    for writes in shapes:
        for start in (None, Fence("l", 20), Fence("l", 20, 1), Fence("other", 20)):
            out = guard.admit_batch(start, "l", iter(writes))
            fence = start
            for w, got in zip(writes, out.verdicts):
                w = w if isinstance(w, BatchWrite) else BatchWrite(w)
                one = guard.admit(fence, Sequencer("l", w.token, w.sequence))
                assert got == one, (start, w)
                if one.admitted:
                    fence = Fence("l", w.token, w.sequence)
            assert len(out.verdicts) == len(writes)


def test_columns_decide_as_the_batch_of_the_same_writes(guard: Guard) -> None:
    """`admit_columns` with arrays, with lists and without sequences gives
    the outcome `admit_batch` gives for the same writes, and the outcome's
    `admitted` and `admitted_count` agree with its verdicts."""
    import random
    from array import array

    rng = random.Random(11)
    tokens = [rng.randrange(0, 40) for _ in range(300)]
    sequences = [rng.randrange(0, 5) for _ in range(300)]
    for start in (None, Fence("l", 20), Fence("l", 20, 1), Fence("other", 20)):
        with_seq = guard.admit_batch(start, "l", [BatchWrite(t, s) for t, s in zip(tokens, sequences)])
        without = guard.admit_batch(start, "l", tokens)
        assert guard.admit_columns(start, "l", array("Q", tokens), array("Q", sequences)) == with_seq
        assert guard.admit_columns(start, "l", tokens, sequences) == with_seq
        assert guard.admit_columns(start, "l", iter(tokens)) == without
        for out in (with_seq, without):
            assert out.admitted == [v.admitted for v in out.verdicts]
            assert out.admitted_count == sum(out.admitted)
            assert (out.admitted_count > 0) == (start is None or start.lock == "l")
    # The outcome keeps its own copy of the writes: changing the caller's arrays changes nothing.
    ts, ss = array("Q", [4, 2]), array("Q", [1, 1])
    out = guard.admit_columns(Fence("l", 3), "l", ts, ss)
    ts[0], ss[0] = 1, 9
    assert out.verdicts[0] == Admission(4, 1, True) and out.verdicts[1].reason is Reason.STALE_TOKEN  # type: ignore[union-attr]
    empty = guard.admit_columns(Fence("l", 3), "l", array("Q"))
    assert empty.verdicts == [] and empty.fence is not None and empty.fence.high_water == 3


@pytest.mark.parametrize(
    "tokens, sequences, error, words",
    [
        ([1, -1], None, ValueError, "tokens[1]"),
        ([1, 2], [0, 1 << 64], ValueError, "sequences[1]"),
        ([1, True], None, TypeError, "tokens[1]"),
        ([1, 2], [1], ValueError, "sequences has 1 values for 2 tokens"),
        ("12", None, TypeError, "tokens must be an array('Q')"),
        ([1, None], None, TypeError, "tokens[1]"),
    ],
)
def test_bad_columns_are_refused_naming_the_value(guard: Guard, tokens, sequences, error, words) -> None:
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        guard.admit_columns(None, "l", tokens, sequences)


def test_a_batch_answer_that_cannot_be_the_writes_fails_closed() -> None:
    """An unknown code, or a fence after the batch that is not the last
    admitted write's, is a broken module: ContractError before the outcome."""
    from array import array

    from fencing_guard import ContractError
    from fencing_guard._guard import _check_batch

    tokens, sequences = array("Q", [4, 2, 5]), array("Q", [1, 1, 1])
    assert _check_batch(bytes([1, 4, 1]), (3, None), (5, 1), tokens, sequences) == bytes([1, 0, 1])
    assert _check_batch(bytes([4, 4, 4]), (9, None), (9, None), tokens, sequences) == bytes(3)
    for codes, state in [
        (bytes([1, 4, 7]), (5, 1)),  # no such code
        (bytes([1, 4, 1]), (4, 1)),  # the fence of a write that was not the last admitted
        (bytes([1, 4, 1]), (5, None)),  # the last write's sequence lost
        (bytes([4, 4, 4]), (5, 1)),  # a fence moved with nothing admitted
    ]:
        with pytest.raises(ContractError):
            _check_batch(codes, (3, None), state, tokens, sequences)


def test_a_missing_component_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="no component"):
        Guard(tmp_path / "nothing.wasm")


def test_threads_share_one_guard(guard: Guard) -> None:
    wrong = []

    def work(n: int) -> None:
        for t in range(1, 300):
            d = guard.admit(Fence(f"lock-{n}", t), Sequencer(f"lock-{n}", t - 1 or 1))
            if d.admitted != (t <= 1):
                wrong.append((n, t, d))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_codes_the_inputs_cannot_produce_fail_closed() -> None:
    """A module answering a code impossible for the write is a broken module: ContractError, never a guess."""
    from fencing_guard import ContractError
    from fencing_guard._guard import _decision

    fenced = (5, None)
    assert _decision(4, fenced, 4, None) == Rejection(Reason.STALE_TOKEN, presented=4, high_water=5)
    for code, fence, token in [
        (4, None, 4),  # nothing is stale against no fence
        (4, fenced, 9),  # 9 is above the mark
        (0, None, 4),  # a first write begins a term
        (1, fenced, 5),  # 5 does not begin a term over 5
        (2, fenced, 5),  # 5 is a valid token
        (6, fenced, 5),  # the fence holds no sequence to regress from
        (3, None, 5),  # no fence, no lock to be wrong about
        (7, fenced, 5),  # no such code
    ]:
        with pytest.raises(ContractError):
            _decision(code, fence, token, None)


@pytest.mark.skipif(os.environ.get("FENCING_INSTALLED") != "1", reason="run against an installed wheel only")
def test_the_package_is_the_installed_wheel() -> None:
    """Nothing of the checkout is imported: the package and its component come from site-packages."""
    import sysconfig

    import fencing_guard

    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(fencing_guard.__file__).resolve().is_relative_to(site)
    assert fencing_guard.bundled_component().resolve().is_relative_to(site)
    assert fencing_guard.bundled_component().stat().st_size > 1000
