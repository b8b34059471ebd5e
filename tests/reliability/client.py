"""An API client that retries what a crash cut off, safely: every mutation carries an
``Idempotency-Key`` and a retry sends the same key, so a server that honours keys answers the
first outcome instead of acting twice.

The outcome of every call is kept: the answer of the first attempt (``None`` when the
connection died or the server answered 5xx), the final answer, and how many attempts it took.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Call:
    """One logical API call and what became of it."""

    method: str
    path: str
    body: dict[str, Any] | None
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    first_status: int | None = None  # None: no answer (connection reset, refused, timeout)
    status: int | None = None
    answer: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0

    @property
    def lost_answer(self) -> bool:
        """The first attempt got no usable answer (the case a retry must make safe)."""
        return self.first_status is None or self.first_status >= 500


@dataclass
class Client:
    url: str
    token: str
    tenant_id: int = 0
    retry_for_s: float = 60.0

    def _once(self, call: Call) -> tuple[int | None, dict[str, Any]]:
        data = json.dumps(call.body).encode() if call.body is not None else None
        request = urllib.request.Request(self.url + call.path, data=data, method=call.method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        if call.method != "GET":
            request.add_header("Idempotency-Key", call.key)
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                return response.status, _json(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (OSError, urllib.error.URLError):  # refused, reset, timed out: no answer
            return None, {}

    def send(self, call: Call) -> Call:
        """Send ``call``; on no answer or a 5xx, retry with the same key until an answer comes."""
        deadline = time.monotonic() + self.retry_for_s
        while True:
            call.attempts += 1
            status, answer = self._once(call)
            if call.attempts == 1:
                call.first_status = status
            call.status, call.answer = status, answer
            if status is not None and status < 500:
                return call
            if time.monotonic() > deadline:
                return call
            time.sleep(0.3)

    def get(self, path: str) -> dict[str, Any]:
        return self.send(Call("GET", path, None)).answer


def _json(raw: bytes) -> dict[str, Any]:
    try:
        value = json.loads(raw or b"{}")
    except ValueError:
        return {"_raw": raw[:200].decode(errors="replace")}
    return value if isinstance(value, dict) else {"_list": value}
