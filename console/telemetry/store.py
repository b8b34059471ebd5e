"""Where the collector leaves the latest sweep for the web processes, and its heartbeat.

With ``REDIS_URL`` both live in Redis (one key per fabric); embedded, in this process's memory
(the collector then runs as a thread of the web process). The live sequence numbers the
snapshots refer to are :mod:`console.broadcast`'s.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from django.conf import settings

from console.broadcast import current_seq

_memory: dict[str, Any] = {}
_lock = threading.Lock()
_client: Any = None  # a redis.Redis, as console.broadcast's: redis-py types its replies Awaitable | Any
SNAPSHOT_TTL_S = 120


def _redis() -> Any:
    global _client
    if not settings.REDIS_URL:
        return None
    if _client is None:
        import redis

        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return _client


def _key(kind: str, name: str | int) -> str:
    return f"ibc:telemetry:{kind}:{name}"


def snapshot_seq(snapshot: dict[str, Any], group: str) -> int:
    """The seq of ``group`` that ``snapshot``'s links are current with, which a client resyncing
    from it continues after. The collector publishes a sweep's deltas before it rewrites the
    snapshot, so the group's current seq can be ahead of it. A group the snapshot does not cover
    (no links in it, or no snapshot yet) has nothing in it that a message could repeat."""
    return int((snapshot.get("seqs") or {}).get(group, current_seq(group)))


def save_snapshot(fabric_id: int, snapshot: dict[str, Any]) -> None:
    r = _redis()
    if r is not None:
        r.set(_key("snap", fabric_id), json.dumps(snapshot), ex=SNAPSHOT_TTL_S)
    else:
        with _lock:
            _memory[_key("snap", fabric_id)] = snapshot


def load_snapshot(fabric_id: int) -> dict[str, Any] | None:
    r = _redis()
    if r is not None:
        raw = r.get(_key("snap", fabric_id))
        return json.loads(raw) if raw else None
    return _memory.get(_key("snap", fabric_id))


def heartbeat(fabric_id: int, ttl: float) -> None:
    """The collector process of ``fabric_id`` is alive for the next ``ttl`` seconds."""
    r = _redis()
    if r is not None:
        r.set(_key("beat", fabric_id), "1", px=int(ttl * 1000))
    else:
        import time

        _memory[_key("beat", fabric_id)] = time.monotonic() + ttl


def alive(fabric_id: int) -> bool:
    r = _redis()
    if r is not None:
        return bool(r.exists(_key("beat", fabric_id)))
    import time

    return _memory.get(_key("beat", fabric_id), 0) > time.monotonic()
