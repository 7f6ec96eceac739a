"""A small client for the fencing HTTP API (`fencing serve`), and `HeldLock`,
which keeps a lease alive in the background and is where a writer takes its
fencing token from.

Refusals that are part of the protocol come back as values: an acquisition
of a held lock is a `LockRefused`, a write refused by the fence is a
`WriteRefused`. Everything else the server refuses raises `ApiError` with the
server's `code`, `message` and `field`; a server that cannot be reached
raises `TransportError`.

`HeldLock` invariants (the same as the Rust client's `HeldLock`):
- the lease's validity is measured on the local monotonic clock from the
  moment the acquire (or renew) request was sent, less a margin, so the local
  view never outlives the server's lease;
- it renews every `renew_fraction` of the lease in a daemon thread;
- `token` is None from the moment a renewal is refused or the lease may have
  expired, so a writer cannot knowingly present a token it no longer holds.
  A pause after the writer read the token is what the storage fence is for.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Optional, Union

from ._types import check_optional_u64, check_u64


class ClientError(Exception):
    """A call to the fencing server failed."""


class TransportError(ClientError):
    """The server could not be reached or its answer could not be read."""


class ApiError(ClientError):
    """The server answered with an error body `{"error": {code, message, field}}`."""

    def __init__(self, status: int, code: str, message: str, field: Optional[str]) -> None:
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Grant:
    """A granted lease. `lock_token` is the lease id renew and release need."""

    resource_id: str
    lock_token: str
    fencing_token: int
    lease_duration_ms: int
    acquired_at: str
    #: The lock service's proof for this token and lock (hex), when it signs grants.
    fencing_proof: Optional[str] = None


@dataclass(frozen=True)
class LockRefused:
    """The lock is held by someone else; it frees within `remaining_lease_ms` unless renewed."""

    resource_id: str
    reason: str
    remaining_lease_ms: int


@dataclass(frozen=True)
class WriteAdmitted:
    """The write was admitted and is durable."""

    resource_id: str
    high_water: int
    sequence: Optional[int]
    new_term: bool

    @property
    def accepted(self) -> bool:
        return True


@dataclass(frozen=True)
class WriteRefused:
    """The write was refused (409 by the fence, 503 when the guard could not decide); nothing changed."""

    reason: str
    presented: int
    high_water: int
    status: int
    body: dict[str, Any]

    @property
    def accepted(self) -> bool:
        return False


@dataclass(frozen=True)
class ReadAnswer:
    """An object and its resource's fence, from one snapshot."""

    resource_id: str
    file_path: str
    data: bytes
    fence: Optional[dict[str, Any]]


class Client:
    """Calls one fencing server. `auth_token`: the bearer token of `--auth-token-file`."""

    def __init__(self, base_url: str = "http://127.0.0.1:7070", *, auth_token: Optional[str] = None, timeout: float = 10.0) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.auth_token = auth_token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Optional[dict[str, Any]] = None, ok: tuple[int, ...] = (200,)) -> tuple[int, dict[str, Any]]:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.auth_token is not None:
            headers["Authorization"] = f"Bearer {self.auth_token}"
        req = urllib.request.Request(self.base_url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            status, raw = e.code, e.read()
        except (urllib.error.URLError, OSError) as e:
            raise TransportError(f"{method} {path}: {e}") from e
        try:
            answer = json.loads(raw)
        except ValueError as e:
            raise TransportError(f"{method} {path}: answer {status} is not JSON") from e
        if status in ok:
            return status, answer
        err = answer.get("error") if isinstance(answer, dict) else None
        if isinstance(err, dict):
            raise ApiError(status, str(err.get("code")), str(err.get("message")), err.get("field"))
        raise TransportError(f"{method} {path}: unexpected answer {status}: {answer!r}")

    # -- locks ---------------------------------------------------------------

    def acquire(self, resource_id: str, client_id: str, lease_duration_ms: int) -> Union[Grant, LockRefused]:
        """Asks for the lock; a held lock is a `LockRefused`, not an error."""
        check_u64(lease_duration_ms, "lease_duration_ms")
        body = {"resource_id": resource_id, "client_id": client_id, "lease_duration_ms": lease_duration_ms}
        status, a = self._request("POST", "/v1/locks/acquire", body, ok=(200, 409))
        if status == 409:
            return LockRefused(a["resource_id"], a["reason"], a["remaining_lease_ms"])
        return Grant(
            a["resource_id"], a["lock_token"], a["fencing_token"], a["lease_duration_ms"], a["acquired_at"], a.get("fencing_proof")
        )

    def renew(self, resource_id: str, lock_token: str) -> int:
        """Extends the lease; returns its duration in ms. A lost lease raises `ApiError` (409/410)."""
        _, a = self._request("POST", "/v1/locks/renew", {"resource_id": resource_id, "lock_token": lock_token})
        return int(a["lease_duration_ms"])

    def release(self, resource_id: str, lock_token: str) -> None:
        """Gives the lock up."""
        self._request("POST", "/v1/locks/release", {"resource_id": resource_id, "lock_token": lock_token})

    def hold(self, resource_id: str, client_id: str, lease_duration_ms: int = 10_000, *, renew_fraction: float = 1 / 3, margin_fraction: float = 0.05) -> "HeldLock":
        """Acquires and keeps the lease alive until the `with` block ends.
        Raises `LockHeldError` when someone else holds the lock."""
        sent = time.monotonic()
        got = self.acquire(resource_id, client_id, lease_duration_ms)
        if isinstance(got, LockRefused):
            raise LockHeldError(got)
        return HeldLock(self, got, sent, renew_fraction, margin_fraction)

    # -- storage -------------------------------------------------------------

    def write(
        self,
        resource_id: str,
        fencing_token: int,
        file_path: str,
        data: Optional[bytes] = None,
        *,
        mutation: str = "PUT",
        lock_id: Optional[str] = None,
        sequence: Optional[int] = None,
        proof: Optional[str] = None,
    ) -> Union[WriteAdmitted, WriteRefused]:
        """One fenced write (`PUT`, `APPEND` or `DELETE`); a refusal is a `WriteRefused`.
        `proof` is the grant's `fencing_proof`, for a server that checks signed writes."""
        check_u64(fencing_token, "fencing_token")
        check_optional_u64(sequence, "sequence")
        payload: dict[str, Any] = {"file_path": file_path, "mutation_type": mutation}
        if data is not None:
            payload["bytes"] = base64.b64encode(data).decode()
        body: dict[str, Any] = {"resource_id": resource_id, "fencing_token": fencing_token, "write_payload": payload}
        if lock_id is not None:
            body["lock_id"] = lock_id
        if sequence is not None:
            body["sequence"] = sequence
        if proof is not None:
            body["fencing_proof"] = proof
        status, a = self._request("POST", "/v1/storage/write", body, ok=(200, 409, 503))
        if status != 200:
            if "reason" not in a:
                err = a.get("error", {})
                raise ApiError(status, str(err.get("code")), str(err.get("message")), err.get("field"))
            return WriteRefused(a["reason"], a["presented"], a["high_water"], status, a)
        return WriteAdmitted(a["resource_id"], a["high_water"], a.get("sequence"), a["new_term"])

    def read(self, resource_id: str, file_path: str) -> ReadAnswer:
        """An object and its fence; a missing object raises `ApiError` 404."""
        query = urllib.parse.urlencode({"resource_id": resource_id, "file_path": file_path})
        _, a = self._request("GET", f"/v1/storage/read?{query}")
        return ReadAnswer(a["resource_id"], a["file_path"], base64.b64decode(a["bytes"]), a.get("fence"))


class LockHeldError(ClientError):
    """`Client.hold` found the lock held by someone else."""

    def __init__(self, refusal: LockRefused) -> None:
        super().__init__(f"lock {refusal.resource_id} is held ({refusal.reason}); free within {refusal.remaining_lease_ms} ms")
        self.refusal = refusal


class HeldLock:
    """A lease kept alive in the background; use as a context manager."""

    def __init__(self, client: Client, grant: Grant, sent: float, renew_fraction: float, margin_fraction: float) -> None:
        self.client = client
        self.grant = grant
        lease = grant.lease_duration_ms / 1000
        self._margin = min(max(margin_fraction, 0.0), 0.9)
        self._every = lease * min(max(renew_fraction, 0.01), 0.9)
        self._mutex = threading.Lock()
        self._valid_until: Optional[float] = sent + lease * (1 - self._margin)
        self._lost: Optional[str] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name=f"fencing-renew-{grant.resource_id}", daemon=True)
        self._thread.start()

    @property
    def token(self) -> Optional[int]:
        """The fencing token while the lease is surely held, else None."""
        with self._mutex:
            if self._valid_until is None or time.monotonic() >= self._valid_until:
                return None
            return self.grant.fencing_token

    @property
    def lost(self) -> Optional[str]:
        """Why the lease was lost, once it was."""
        with self._mutex:
            if self._lost is None and self._valid_until is not None and time.monotonic() >= self._valid_until:
                return "the lease may have expired: renewals did not get through in time"
            return self._lost

    def _lose(self, why: str) -> None:
        with self._mutex:
            self._valid_until = None
            if self._lost is None:
                self._lost = why

    def _keep(self) -> None:
        while not self._stop.wait(self._every):
            sent = time.monotonic()
            try:
                ms = self.client.renew(self.grant.resource_id, self.grant.lock_token)
            except ApiError as e:
                self._lose(f"renewal refused: {e}")
                return
            except ClientError:
                continue  # The validity is not extended; the next attempt may get through.
            with self._mutex:
                if self._valid_until is not None:
                    self._valid_until = sent + ms / 1000 * (1 - self._margin)

    def release(self) -> None:
        """Stops renewing and releases the lease if it is still held."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        held = self.token is not None
        self._lose("released")
        if held:
            self.client.release(self.grant.resource_id, self.grant.lock_token)

    def __enter__(self) -> "HeldLock":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.release()
        except ClientError:
            if exc[0] is None:
                raise
