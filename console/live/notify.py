"""Send-after-commit helpers for live messages."""

from __future__ import annotations

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
