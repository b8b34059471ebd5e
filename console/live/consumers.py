"""Base consumer: authenticated, tracked by user and token so revocation closes the socket."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.live.auth import token_from_scope
from console.live.notify import token_group, user_group
from console.tenancy.models import Principal

CLOSE_UNAUTHENTICATED = 4401
CLOSE_REVOKED = 4403
MAX_FRAME_BYTES = 4096


class AuthenticatedConsumer(AsyncJsonWebsocketConsumer):
    """Refuses anonymous sockets; joins ``user.<id>`` and ``token.<id>`` for revocation."""

    principal: Principal

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        token = self.scope.get("api_token")
        self.principal = await database_sync_to_async(Principal.of)(user, token)
        if self.principal.role is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.control_groups = [user_group(user.pk)]
        if token is not None:
            self.control_groups.append(token_group(token.pk))
        for group in self.control_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        subprotocol = None
        raw = token_from_scope(self.scope)
        if raw is not None:
            subprotocol = "bearer." + raw
        await self.accept(subprotocol=subprotocol)
        await self.send_json(
            {"type": "hello", "user": user.get_username(), "role": self.principal.role}
        )

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "control_groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs) -> None:
        if bytes_data is not None or (text_data is not None and len(text_data) > MAX_FRAME_BYTES):
            await self.send_json(
                {
                    "type": "error",
                    "code": "frame_refused",
                    "detail": f"text frames up to {MAX_FRAME_BYTES} bytes only",
                }
            )
            return
        await super().receive(text_data=text_data, **kwargs)

    @classmethod
    async def decode_json(cls, text_data):
        import json

        try:
            return json.loads(text_data)
        except ValueError:
            return {"type": "__malformed__"}

    async def receive_json(self, content, **kwargs) -> None:
        if not isinstance(content, dict) or content.get("type") == "__malformed__":
            await self.send_json(
                {"type": "error", "code": "malformed", "detail": "send JSON objects"}
            )
            return
        if content.get("type") == "ping":
            await self.send_json({"type": "pong"})
            return
        await self.send_json(
            {
                "type": "error",
                "code": "unknown_type",
                "detail": f"unknown message type {content.get('type')!r}",
            }
        )

    async def access_revoked(self, event: dict) -> None:
        await self.send_json({"type": "access.revoked"})
        await self.close(code=CLOSE_REVOKED)


class NotificationsConsumer(AuthenticatedConsumer):
    """``/ws/notifications/``: the per-user stream (later issues add fabric and tenant views)."""
