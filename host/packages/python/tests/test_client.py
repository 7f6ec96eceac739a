"""The HTTP client and `HeldLock` against a real `fencing serve`."""

from __future__ import annotations

import time

import pytest

from fencing_guard.client import ApiError, Client, Grant, LockHeldError, LockRefused, TransportError, WriteAdmitted, WriteRefused


def test_the_gc_pause_story_over_http(server: str) -> None:
    c = Client(server)
    a = c.acquire("orders", "client-a", 200)
    assert isinstance(a, Grant)
    assert isinstance(c.acquire("orders", "client-b", 200), LockRefused)
    assert isinstance(c.write("orders", a.fencing_token, "invoice", b"from A"), WriteAdmitted)
    time.sleep(0.4)  # A is paused past its lease.
    b = c.acquire("orders", "client-b", 5000)
    assert isinstance(b, Grant) and b.fencing_token > a.fencing_token
    assert isinstance(c.write("orders", b.fencing_token, "invoice", b"from B"), WriteAdmitted)
    late = c.write("orders", a.fencing_token, "invoice", b"from A, late")
    assert isinstance(late, WriteRefused)
    assert (late.reason, late.presented, late.high_water, late.status) == ("stale_token", a.fencing_token, b.fencing_token, 409)
    got = c.read("orders", "invoice")
    assert got.data == b"from B" and got.fence is not None and got.fence["high_water"] == b.fencing_token


def test_held_lock_renews_and_releases(server: str) -> None:
    c = Client(server)
    with c.hold("jobs", "worker", 300) as held:
        token = held.token
        assert token is not None
        time.sleep(1.0)  # Three leases long: only renewals keep it.
        assert held.token == token and held.lost is None
        assert isinstance(c.acquire("jobs", "other", 300), LockRefused)
        assert isinstance(c.write("jobs", token, "f", b"x"), WriteAdmitted)
    assert held.token is None
    assert isinstance(c.acquire("jobs", "other", 300), Grant)


def test_held_lock_stops_handing_out_the_token_when_renewal_fails(server: str) -> None:
    c = Client(server)
    held = c.hold("queue", "worker", 300)
    assert held.token is not None
    c.release("queue", held.grant.lock_token)  # The lease ends behind the holder's back.
    deadline = time.monotonic() + 5
    while held.token is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held.token is None
    assert held.lost is not None and "renewal refused" in held.lost
    held.release()  # Nothing left to release; no error.


def test_hold_of_a_held_lock_raises_with_the_refusal(server: str) -> None:
    c = Client(server)
    with c.hold("exclusive", "first", 5000):
        with pytest.raises(LockHeldError) as e:
            c.hold("exclusive", "second", 5000)
        assert e.value.refusal.remaining_lease_ms > 0


def test_server_errors_name_the_field(server: str) -> None:
    c = Client(server)
    with pytest.raises(ApiError) as e:
        c.acquire("r", "c", 1)  # below the 10 ms minimum
    assert e.value.status == 400 and e.value.field == "lease_duration_ms"
    with pytest.raises(ApiError) as e:
        c.renew("r", "0" * 32)
    assert e.value.status in (409, 410)
    with pytest.raises(ValueError, match="fencing_token"):
        c.write("r", -1, "f", b"x")
    with pytest.raises(ApiError) as e:
        c.read("r", "missing")
    assert e.value.status == 404


def test_an_unreachable_server_is_a_transport_error() -> None:
    with pytest.raises(TransportError):
        Client("http://127.0.0.1:9", timeout=2).acquire("r", "c", 100)
    with pytest.raises(ValueError, match="base_url"):
        Client("127.0.0.1:7070")
