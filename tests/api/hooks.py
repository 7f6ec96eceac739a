"""What the published contract cannot say, checked on every answer of the
schemathesis run against a live `fencing serve` (scripts/test-api):

- every 4xx is the one JSON error body and names the field, parameter or
  header at fault (the fence's own refusals, 409 bodies with their evidence,
  are the documented exception);
- a refused write changes nothing: the fence and the object it named are the
  same before and after.

Waits on held locks are capped at 100 ms, or one generated acquisition of a
lock another generated request holds for an hour would stall the run.
"""

import json
import os
import urllib.error
import urllib.parse
import urllib.request

import schemathesis

BASE = os.environ["FENCING_API_BASE"]
SNAPSHOTS = {}


def _get(path, params):
    url = f"{BASE}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _target(case):
    """The resource and object a write names, if it names them validly."""
    body = case.body
    if case.path != "/v1/storage/write" or not isinstance(body, dict):
        return None
    payload = body.get("write_payload")
    resource = body.get("resource_id")
    path = payload.get("file_path") if isinstance(payload, dict) else None
    if not isinstance(resource, str) or not isinstance(path, str):
        return None
    return resource, path


def _snapshot(target):
    resource, path = target
    return (
        _get("/v1/storage/fence", {"resource_id": resource}),
        _get("/v1/storage/read", {"resource_id": resource, "file_path": path}),
    )


@schemathesis.hook
def map_body(ctx, body):
    # An integral float (`146400.0`) is a wait as well as an integer is.
    wait = body.get("wait_ms") if isinstance(body, dict) else None
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > 100:
        body["wait_ms"] = 100
    return body


@schemathesis.hook
def before_call(ctx, case, kwargs):
    target = _target(case)
    if target is not None:
        SNAPSHOTS[id(case)] = (target, _snapshot(target))


@schemathesis.check
def errors_name_the_field(ctx, response, case):
    status = response.status_code
    if not 400 <= status < 500:
        return
    try:
        body = json.loads(response.content)
    except ValueError:
        raise AssertionError(f"{status} answer is not JSON: {response.content[:200]!r}")
    if status == 409 and isinstance(body, dict) and ("accepted" in body or "lock_acquired" in body):
        return  # a refusal by the fence or the lock, with its evidence
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str) or not error.get("message"):
        raise AssertionError(f"{status} answer is not the error body: {body}")
    if not isinstance(error.get("field"), str) or not error["field"]:
        raise AssertionError(f"{status} {error['code']} names no field: {body}")


@schemathesis.check
def refused_writes_change_nothing(ctx, response, case):
    if not 400 <= response.status_code < 500:
        return
    target = _target(case)
    saved = SNAPSHOTS.get(id(case))
    # Keyed by id(case), which Python reuses: only a snapshot this write's own before_call took counts.
    if target is None or saved is None or saved[0] != target:
        return
    before = saved[1]
    after = _snapshot(target)
    if after != before:
        raise AssertionError(f"a refused write ({response.status_code}) changed {target}: {before} -> {after}")
