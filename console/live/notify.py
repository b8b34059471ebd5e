"""Send-after-commit helpers for live messages."""

from __future__ import annotations

import json

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def token_group(token_id: int) -> str:
    return f"token.{token_id}"


def user_group(user_id: int) -> str:
    return f"user.{user_id}"


def close_token_sockets(token_id: int) -> None:
    """Tell every socket opened with this token to close (called after the revoke commits)."""
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(token_group(token_id), {"type": "access.revoked"})


def close_user_sockets(user_id: int) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(user_group(user_id), {"type": "access.revoked"})


def fabric_group(fabric_id: int) -> str:
    return f"fabric.{fabric_id}"


def tenant_group(tenant_id: int) -> str:
    return f"tenant.{tenant_id}"


def change_group(change_id: int) -> str:
    return f"change.{change_id}"


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
    from django.db import transaction

    if not messages:
        return

    def send() -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        from console.telemetry.store import next_seq

        bodies = [(g, dict(m, group=g, seq=next_seq(g))) for g, m in messages]

        async def go() -> None:
            import asyncio

            await asyncio.gather(*(layer.group_send(g, wire(b)) for g, b in bodies))

        async_to_sync(go)()

    transaction.on_commit(send)
