"""Publish to a group: the one way live messages leave the server.

The platform layer's helper that every producer calls (telemetry's collector and events,
tenancy's revocations): the group names, the per-group sequence numbers, the after-commit send
and the long-lived publishing loop. It imports nothing of the console's apps; the Channels
consumers in :mod:`console.live` join these groups and forward what arrives.

Sequence numbers live in Redis with ``REDIS_URL`` (``INCR`` per group, so every process numbers a
group's messages in one sequence); embedded, in this process's memory (the collector then runs as
a thread of the web process).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction

SEND_TIMEOUT_S = 30.0
_loop_lock = threading.Lock()
_loop: tuple[int, asyncio.AbstractEventLoop] | None = None  # (pid, loop) of this process
_seq_lock = threading.Lock()
_seqs: dict[str, int] = {}  # embedded mode's sequence numbers
_client: Any = None


# --- group names ------------------------------------------------------------------------------


def fabric_group(fabric_id: int) -> str:
    return f"fabric.{fabric_id}"


def tenant_group(tenant_id: int) -> str:
    return f"tenant.{tenant_id}"


def change_group(change_id: int) -> str:
    return f"change.{change_id}"


def token_group(token_id: int) -> str:
    return f"token.{token_id}"


def agent_group(agent_id: int) -> str:
    """The socket of a subnet-manager host's agent (console/live/agent_consumer.py)."""
    return f"agent.{agent_id}"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def session_group(session_key: str) -> str:
    """The sockets a browser session opened. Named by a digest: the key is the session cookie's
    value, which must not sit in Redis key names."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


# --- sequence numbers -------------------------------------------------------------------------


def _redis() -> Any:
    global _client
    if not settings.REDIS_URL:
        return None
    if _client is None:
        import redis

        _client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=5)
    return _client


def _seq_key(group: str) -> str:
    # The key predates this module (it lived in the telemetry store); kept so a running Redis
    # continues its sequences across an upgrade.
    return f"ibc:telemetry:seq:{group}"


def next_seq(group: str) -> int:
    """The next sequence number of a live group (1, 2, …; never repeats while Redis lives)."""
    r = _redis()
    if r is not None:
        return int(r.incr(_seq_key(group)))
    with _seq_lock:
        _seqs[group] = _seqs.get(group, 0) + 1
        return _seqs[group]


def current_seq(group: str) -> int:
    """The last sequence number sent to ``group`` (0 before the first)."""
    r = _redis()
    if r is not None:
        return int(r.get(_seq_key(group)) or 0)
    return int(_seqs.get(group, 0))


def current_seqs(groups: list[str]) -> dict[str, int]:
    """:func:`current_seq` of several groups in one round trip."""
    r = _redis()
    if r is not None:
        values = r.mget([_seq_key(g) for g in groups]) if groups else []
        return {g: int(v or 0) for g, v in zip(groups, values, strict=True)}
    return {g: int(_seqs.get(g, 0)) for g in groups}


# --- sending ----------------------------------------------------------------------------------


def _send_loop() -> asyncio.AbstractEventLoop:
    """This process's publishing event loop, in a daemon thread (started on first use, again
    in a forked child)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop[0] != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="live-send", daemon=True).start()
            _loop = (os.getpid(), loop)
        return _loop[1]


def _group_send(events: list[tuple[str, dict]]) -> None:
    """Send channel-layer events to groups and wait until they are handed over.

    ``async_to_sync`` from a plain thread (the collector, a Celery task) starts a new event
    loop, a thread, and — channels-redis pools connections per loop — a new Redis connection
    for every call: 6-8 ms per publish, up to 100 ms now and then. A Redis layer is sent to from
    one long-lived loop instead. The in-memory layer (embedded mode) keeps ``async_to_sync``,
    which runs on the server's own loop when there is one."""
    layer = get_channel_layer()
    if layer is None or not events:
        return

    async def go() -> None:
        await asyncio.gather(*(layer.group_send(g, e) for g, e in events))

    if isinstance(layer, InMemoryChannelLayer):
        async_to_sync(go)()
        return
    asyncio.run_coroutine_threadsafe(go(), _send_loop()).result(SEND_TIMEOUT_S)


def close_token_sockets(token_id: int) -> None:
    """Tell every socket opened with this token to close (called after the revoke commits)."""
    _group_send([(token_group(token_id), {"type": "access.revoked"})])


def close_agent_socket(agent_id: int) -> None:
    """Tell a revoked agent's socket to close (called after the revoke commits)."""
    _group_send([(agent_group(agent_id), {"type": "agent.revoked"})])


def close_user_sockets(user_id: int) -> None:
    """Tell every socket of this user to close (called after the user's access ends)."""
    _group_send([(user_group(user_id), {"type": "access.revoked"})])


def close_other_session_sockets(user_id: int, keep_session_key: str | None) -> None:
    """Tell every socket this user opened with a browser session, but ``keep_session_key``'s, to
    close (after a password change: the other sessions are signed out; API tokens stay)."""
    _group_send([(user_group(user_id), {"type": "access.password_changed", "keep": keep_session_key or ""})])


def close_session_sockets(session_key: str) -> None:
    """Tell every socket a browser session opened to close (called once the user logged out)."""
    _group_send([(session_group(session_key), {"type": "access.ended"})])


def wire(body: dict) -> dict:
    """The channel-layer event for a live message, serialised once for every socket of the
    group: each consumer sends the text as it is instead of encoding the same dict again (the
    fabric group's delta can carry every link of the fabric)."""
    return {"type": "live.message", "text": json.dumps(body, separators=(",", ":"))}


def publish(group: str, message: dict) -> None:
    """The one way live messages leave the server: numbered per group, sent after commit.

    Inside a transaction the send waits for the commit (a rolled-back change is never
    announced); outside one it goes at once.
    """
    publish_many([(group, message)])


def publish_many(messages: list[tuple[str, dict]]) -> None:
    """:func:`publish` for a batch (one event-loop hop for the collector's whole sweep)."""
    if not messages:
        return

    def send() -> None:
        if get_channel_layer() is None:
            return
        _group_send([(g, wire(dict(m, group=g, seq=next_seq(g)))) for g, m in messages])

    transaction.on_commit(send)
