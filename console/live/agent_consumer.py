"""``/ws/agent/``: the socket a subnet-manager host's agent keeps open to the console.

The agent authenticates with its own token (``Authorization: Bearer ibca_…``; no session, no
cookie, so no Origin check applies), says hello (its fabric, host and version: any other fabric
than its own is refused, audited, and the socket closed), sends heartbeats (its OpenSM's SMInfo)
and answers the requests the console sends to its group (``console.fabric.agents.rpc``): each
answer goes back to the caller's reply channel. A reply to a request it was not sent is refused
and audited. Revoking the agent closes the socket.
"""

from __future__ import annotations

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.fabric.agents import rpc, services
from console.fabric.agents.rpc import group
from console.fabric.models import FabricAgent

CLOSE_UNAUTHENTICATED = 4401
CLOSE_REFUSED = 4403
MAX_FRAME_BYTES = 8 * 1024 * 1024  # a push's result with its step logs fits
ANSWERS = ("progress", "result", "error")


def bearer(scope: dict[str, Any]) -> str | None:
    """The token of an ``Authorization: Bearer …`` header of the upgrade request."""
    for name, value in scope.get("headers") or []:
        if name.lower() == b"authorization":
            text = value.decode("latin-1")
            if text.lower().startswith("bearer "):
                return text[7:].strip()
    return None


class AgentConsumer(AsyncJsonWebsocketConsumer):
    """One agent's socket (see the module docstring)."""

    agent: FabricAgent | None = None

    async def connect(self) -> None:
        rpc.remember_server_loop()
        try:
            self.agent = await database_sync_to_async(services.resolve_agent)(bearer(dict(self.scope)))
        except services.AgentRefused:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.pending: dict[str, str] = {}  # request id → the caller's reply channel
        self.parts: dict[str, list[str]] = {}  # request id → the parts of its result so far
        self.greeted = False
        await self.channel_layer.group_add(group(self.agent.pk), self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if self.agent is None:
            return
        await self.channel_layer.group_discard(group(self.agent.pk), self.channel_name)
        for reply in getattr(self, "pending", {}).values():
            await self.channel_layer.send(reply, {"kind": "lost"})
        await database_sync_to_async(services.disconnected)(self.agent.pk, self.channel_name)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any) -> None:
        if text_data is None or len(text_data) > MAX_FRAME_BYTES:
            await self.send_json({"type": "error", "detail": f"text frames up to {MAX_FRAME_BYTES} bytes"})
            return
        try:
            content = json.loads(text_data)
        except (ValueError, RecursionError):  # (a few KB of "[[[[" is a RecursionError)
            content = None
        if not isinstance(content, dict):
            await self.send_json({"type": "error", "detail": "send JSON objects"})
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        assert self.agent is not None
        kind = content.get("type")
        if kind == "hello":
            try:
                await database_sync_to_async(services.hello)(
                    self.agent,
                    fabric=str(content.get("fabric", "")),
                    host=str(content.get("host", "")),
                    version=str(content.get("version", "")),
                    channel=self.channel_name,
                )
            except services.AgentRefused as exc:
                await self.send_json({"type": "refused", "detail": str(exc)})
                await self.close(code=CLOSE_REFUSED)
                return
            self.greeted = True
            await self.send_json({"type": "welcome", "fabric": self.agent.fabric.name, "agent": self.agent.name})
        elif kind == "heartbeat" and self.greeted:
            # in its group again: a broker that lost its keys (restarted without persistence,
            # flushed) finds the socket again within one heartbeat
            await self.channel_layer.group_add(group(self.agent.pk), self.channel_name)
            # the callers waiting on this socket hear it is alive: one that hears nothing for a
            # while knows this server died under its request (no "lost" comes from a dead one)
            for waiting in list(self.pending.values()):
                await self.channel_layer.send(waiting, {"kind": "alive"})
            await database_sync_to_async(services.heartbeat)(
                self.agent.pk, dict(content.get("sm") or {}), dict(content.get("config") or {})
            )
        elif kind == "result_part":
            await self._part(content)
        elif kind in ANSWERS:
            rid = str(content.get("id", ""))
            reply = self.pending.get(rid)
            if reply is None:
                await database_sync_to_async(services.refuse)(
                    self.agent, f"sent a {kind} for request {rid!r} it was not sent"
                )
                await self.send_json({"type": "error", "detail": f"no request {rid!r}"})
                return
            if kind != "progress":
                del self.pending[rid]
            answer = {
                "kind": kind,
                "step": content.get("step"),
                "result": content.get("result"),
                "detail": content.get("detail"),
                "code": content.get("code"),
            }
            await self.channel_layer.send(reply, answer)
        else:
            await self.send_json({"type": "error", "detail": f"unknown message type {kind!r}"})

    async def _part(self, content: dict[str, Any]) -> None:
        """One part of a result sent in parts; the last one completes it."""
        assert self.agent is not None
        rid = str(content.get("id", ""))
        if rid not in self.pending:
            await database_sync_to_async(services.refuse)(
                self.agent, f"sent a result part for request {rid!r} it was not sent"
            )
            return
        parts = self.parts.setdefault(rid, [])
        parts.append(str(content.get("data", "")))
        if len(parts) < int(content.get("of", 0)):
            return
        reply = self.pending.pop(rid)
        text = "".join(self.parts.pop(rid))
        try:
            answer = {"kind": "result", "result": json.loads(text)}
        except ValueError:
            answer = {"kind": "error", "detail": "the agent's result did not reassemble"}
        await self.channel_layer.send(reply, answer)

    async def agent_request(self, event: dict[str, Any]) -> None:
        """A caller's request (from ``rpc.call``): taken, and handed to the agent."""
        if not self.greeted:
            return  # not accepted: the caller treats the agent as not there
        self.pending[event["id"]] = event["reply_to"]
        # to the agent first: the caller's "accepted" is a broker round trip the agent need not wait for
        await self.send_json({"type": "request", "id": event["id"], "op": event["op"], "payload": event["payload"]})
        await self.channel_layer.send(event["reply_to"], {"kind": "accepted"})

    async def agent_revoked(self, event: dict[str, Any]) -> None:
        await self.send_json({"type": "revoked"})
        await self.close(code=CLOSE_UNAUTHENTICATED)
