"""Base consumer: authenticated, tracked by user and token so revocation closes the socket."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.utils import timezone

from console.broadcast import current_seq, session_group, token_group, user_group
from console.fabric.models import ChangeRequest, Fabric
from console.live.auth import api_token_of, token_from_scope
from console.live.expiry import access_ends_at
from console.telemetry.services import change_progress
from console.tenancy.models import Principal

CLOSE_UNAUTHENTICATED = 4401
CLOSE_REVOKED = 4403
CLOSE_NO_ROUTE = 4404
#: RFC 6455: "data within a message that was not consistent with the type of the message".
CLOSE_INCONSISTENT_DATA = 1007
#: What :meth:`AuthenticatedConsumer.decode_json` gives for a frame that is not JSON, and for one
#: nested deeper than the parser goes (a few KB of ``[[[[``: RecursionError, not ValueError).
MALFORMED = {"type": "__malformed__"}
TOO_DEEP = {"type": "__too_deep__"}


def decode_frame(text_data: str) -> Any:
    """A frame's JSON, or :data:`MALFORMED` / :data:`TOO_DEEP` (never an exception)."""
    try:
        return json.loads(text_data)
    except ValueError:
        return MALFORMED
    except RecursionError:
        return TOO_DEEP


class NoRouteConsumer(AsyncJsonWebsocketConsumer):
    """A socket on a path the console does not serve: taken and closed at once with 4404 (the
    router would raise, and the server answer 500 with a traceback)."""

    async def connect(self) -> None:
        await self.accept()
        await self.close(code=CLOSE_NO_ROUTE)


MAX_FRAME_BYTES = 4096
#: waking this long after a session's or token's expiry makes sure it has ended when rechecked
EXPIRY_GRACE_S = 0.05


class AuthenticatedConsumer(AsyncJsonWebsocketConsumer):
    """Refuses anonymous sockets; joins ``user.<id>`` and ``token.<id>`` for revocation and
    ``session.<digest>`` for logout, and closes itself when its session or token expires."""

    principal: Principal
    _expiry_watch: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        self._closed_early = True
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        token = api_token_of(self.scope)
        self.principal = await database_sync_to_async(Principal.of)(user, token)
        if self.principal.role is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self._closed_early = False
        self.control_groups = [user_group(user.pk)]
        self.token_id = token.pk if token is not None else None
        self.session_key: str | None = None
        if token is not None:
            self.control_groups.append(token_group(token.pk))
        else:
            session = self.scope.get("session")
            self.session_key = session.session_key if session is not None else None
            if self.session_key:
                self.control_groups.append(session_group(self.session_key))
        access = await database_sync_to_async(access_ends_at)(session_key=self.session_key, token_id=self.token_id)
        if not access.valid:
            self._closed_early = True
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        for group in self.control_groups:
            await self.channel_layer.group_add(group, self.channel_name)
        subprotocol = None
        raw = token_from_scope(self.scope)
        if raw is not None:
            subprotocol = "bearer." + raw
        await self.accept(subprotocol=subprotocol)
        await self.send_json({"type": "hello", "user": user.get_username(), "role": self.principal.role})
        if access.ends_at is not None:
            self._expiry_watch = asyncio.create_task(self._close_at_expiry(access.ends_at))

    async def _close_at_expiry(self, ends_at: dt.datetime) -> None:
        """Sleep until the session or token expires, recheck (a session may have been extended)
        and close the socket once it has ended: at that moment, not at the next connect."""
        while True:
            await asyncio.sleep(max((ends_at - timezone.now()).total_seconds(), 0.0) + EXPIRY_GRACE_S)
            access = await database_sync_to_async(access_ends_at)(session_key=self.session_key, token_id=self.token_id)
            if not access.valid:
                await self._end(CLOSE_UNAUTHENTICATED, "access.expired")
                return
            if access.ends_at is None:
                return
            ends_at = access.ends_at

    async def _end(self, code: int, message: str) -> None:
        await self.send_json({"type": message})
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        if self._expiry_watch is not None:
            self._expiry_watch.cancel()
        for group in getattr(self, "control_groups", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
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
    async def decode_json(cls, text_data: str) -> Any:
        return decode_frame(text_data)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if content is TOO_DEEP:
            await self.send_json({"type": "error", "code": "too_deep", "detail": "JSON nested too deeply"})
            await self.close(code=CLOSE_INCONSISTENT_DATA)
            return
        if not isinstance(content, dict) or content is MALFORMED:
            await self.send_json({"type": "error", "code": "malformed", "detail": "send JSON objects"})
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

    async def access_revoked(self, event: dict[str, Any]) -> None:
        await self._end(CLOSE_REVOKED, "access.revoked")

    async def access_password_changed(self, event: dict[str, Any]) -> None:
        """The user changed the password: a socket of another browser session ends (that session
        is signed out); the changing browser's and the API tokens' stay."""
        if self.token_id is None and self.session_key != (event.get("keep") or None):
            await self._end(CLOSE_UNAUTHENTICATED, "access.ended")

    async def access_ended(self, event: dict[str, Any]) -> None:
        """The session this socket was opened with was logged out."""
        await self._end(CLOSE_UNAUTHENTICATED, "access.ended")


class NotificationsConsumer(AuthenticatedConsumer):
    """``/ws/notifications/``: the per-user stream (later issues add fabric and tenant views)."""


class LiveConsumer(AuthenticatedConsumer):
    """Base of the live streams: one group per socket, access checked before joining, the
    group's current sequence number sent on subscribe (the client resyncs from REST on a gap)."""

    kind = ""

    async def connect(self) -> None:
        await super().connect()
        if not hasattr(self, "control_groups") or getattr(self, "_closed_early", False):
            return
        object_id = int(self.scope["url_route"]["kwargs"]["object_id"])
        if not await database_sync_to_async(self.allowed)(object_id):
            await self.send_json(
                {"type": "error", "code": "not_found", "detail": f"no {self.kind} {object_id} for you"}
            )
            await self.close(code=CLOSE_REVOKED)
            return
        self.group = f"{self.kind}.{object_id}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.control_groups.append(self.group)
        seq = await database_sync_to_async(current_seq)(self.group)
        await self.send_json({"type": "subscribed", "group": self.group, "seq": seq})
        await self.after_subscribe(object_id)

    def allowed(self, object_id: int) -> bool:
        raise NotImplementedError

    async def after_subscribe(self, object_id: int) -> None:
        return None

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Live messages go straight out. channels' own dispatch first runs Django's
        ``close_old_connections`` through ``sync_to_async`` for every message, a hop through the
        one thread-sensitive executor thread: with a fabric's sockets in one process, a delta was
        queued behind one such hop per socket (tenant p99 300 ms with the server otherwise idle).
        Sending a prepared text touches no database, so it skips that hop; every other message
        (connect, frames from the client, revocation) takes the usual path."""
        if message.get("type") == "live.message":
            await self.live_message(message)
            return
        await super().dispatch(message)

    async def live_message(self, event: dict[str, Any]) -> None:
        await self.send(text_data=event["text"])


class FabricConsumer(LiveConsumer):
    """``/ws/live/fabric/<id>/``: every link and event of a fabric (operators and auditors)."""

    kind = "fabric"

    def allowed(self, object_id: int) -> bool:
        return self.principal.sees_all_tenants and Fabric.objects.filter(pk=object_id).exists()


class TenantConsumer(LiveConsumer):
    """``/ws/live/tenant/<id>/``: a tenant's reservations' links and events (that tenant only)."""

    kind = "tenant"

    def allowed(self, object_id: int) -> bool:
        return self.principal.tenant_id == object_id and not self.principal.sees_all_tenants


class ChangeConsumer(LiveConsumer):
    """``/ws/live/change/<id>/``: push progress of one change request (operators, auditors)."""

    kind = "change"

    def allowed(self, object_id: int) -> bool:
        return self.principal.sees_all_tenants and ChangeRequest.objects.filter(pk=object_id).exists()

    async def after_subscribe(self, object_id: int) -> None:
        message = await database_sync_to_async(change_progress)(object_id)
        if message is not None:
            await self.send_json(dict(message, group=self.group, seq=0))
