"""Calls from the console (a worker's push, an audit, a web request) to a fabric's agent.

The request goes over the channel layer to the group of the agent's socket
(``console/live/agent_consumer.py``), which hands it to the agent and sends the agent's answers
back to the caller's own reply channel: ``accepted`` at once (else the agent is not there),
``progress`` as the agent's steps start (the pipeline renews its lease on each), ``alive`` on each
of the agent's heartbeats, then ``result`` or ``error``; ``lost`` when the socket closes under a
request (the caller retries: every agent operation is set-style). A caller that hears nothing for
``AGENT_SILENT_AFTER_S`` counts the agent lost too: the server holding its socket died (killed,
no ``lost`` sent) and the agent's next socket is on another server or the same one restarted.
One coroutine does the whole exchange, so the layer's connections stay on one event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import BaseChannelLayer, InMemoryChannelLayer, channel_layers, get_channel_layer
from django.conf import settings
from django.utils import timezone

from console.broadcast import agent_group
from console.fabric.agents.wire import SM_DOWN
from console.fabric.drivers.base import DriverError
from console.fabric.models import Fabric, FabricAgent
from console.fabric.opensm import ha

#: How long an agent has to say it took a request before it counts as not there.
ACCEPT_TIMEOUT_S = 5.0


group = agent_group


class AgentError(DriverError):
    """The agent ran the operation and it failed (its message says why)."""


class AgentLost(RuntimeError):
    """No agent is connected, it went away under a request, or it did not answer in time: the
    caller retries (the pipeline counts it transient: every agent operation is set-style)."""


class SmNotAnswering(AgentLost):
    """The agent is there and its subnet manager does not answer: what needs it waits (the
    change is retried, and resumed the moment the agent reports its OpenSM back)."""


def agent_for(fabric: Fabric) -> FabricAgent:
    """The agent that speaks for ``fabric`` now: connected, not revoked, heard from recently, the
    master's SM host's when one reports MASTER."""
    recent = timezone.now() - dt.timedelta(seconds=settings.AGENT_SILENT_AFTER_S)
    live = FabricAgent.objects.filter(fabric=fabric, connected=True, revoked_at__isnull=True, last_seen__gte=recent)
    # the master's SM host first (with a standby, the reads and checks are the master's)
    agent = live.filter(sm_state="MASTER").order_by("-last_seen").first() or live.order_by("-last_seen").first()
    if agent is None:
        raise AgentLost(f"waiting for the subnet manager's agent of fabric {fabric.name!r}: none connected")
    return agent


@dataclass(frozen=True)
class SmHosts:
    """A fabric's SM hosts as their agents last reported: the master's agent, the other agents
    connected now (standbys, or hosts whose OpenSM is down), and the ones away (not connected,
    silent): what a push to every SM host sees."""

    master: FabricAgent
    others: list[FabricAgent]
    away: list[FabricAgent]

    def in_step(self) -> bool:
        """True when no other SM host's files can claim more than a standby's priority: all are
        connected and their opensm.conf says so."""
        return ha.all_in_step((a.conf_priority for a in self.others), any_away=bool(self.away))


def sm_hosts(fabric: Fabric) -> SmHosts:
    """The fabric's SM hosts (:class:`SmHosts`); :class:`AgentLost` when no agent is connected,
    :class:`SmNotAnswering` when none reports its OpenSM MASTER (a takeover under way, or every
    OpenSM down): the push waits and is resumed when one does."""
    recent = timezone.now() - dt.timedelta(seconds=settings.AGENT_SILENT_AFTER_S)
    agents = list(FabricAgent.objects.filter(fabric=fabric, revoked_at__isnull=True).order_by("name"))
    live = [a for a in agents if a.connected and a.last_seen is not None and a.last_seen >= recent]
    if not live:
        raise AgentLost(f"waiting for the subnet manager's agent of fabric {fabric.name!r}: none connected")
    masters = [a for a in live if a.sm_state == "MASTER"]
    if not masters and len(agents) == 1 and not live[0].sm_state:
        masters = live  # a single SM host that has not reported yet: try it (its push says)
    if not masters:
        states = ", ".join(f"{a.name} {a.sm_state or 'not reported'}" for a in live)
        raise SmNotAnswering(f"waiting for a master subnet manager on fabric {fabric.name!r} ({states})")
    master = max(masters, key=lambda a: a.master_since or a.last_seen or timezone.now())
    return SmHosts(master, [a for a in live if a.pk != master.pk], [a for a in agents if a not in live])


def note_config(agent: FabricAgent, config: dict[str, Any]) -> None:
    """Record what an agent's files hash to and the priority they set (from a push's answer)."""
    priority = config.get("priority")
    FabricAgent.objects.filter(pk=agent.pk).update(
        config_hash=str(config["hash"])[:64], conf_priority=priority if isinstance(priority, int) else None
    )


def call(
    to: Fabric | FabricAgent,
    op: str,
    payload: dict[str, Any],
    *,
    timeout: float | None = None,
    progress: Callable[[str, str], None] | None = None,
    on_part: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run ``op`` on the fabric's agent (or on ``to``, an agent already chosen: no database
    query, so a thread of its own may ask) and return its result (JSON). ``on_part`` receives the
    parts of the result an operation sends ahead (a sweep's chunks), as they come, on the layer's
    event loop: it must not block."""
    agent = to if isinstance(to, FabricAgent) else agent_for(to)
    limit = timeout if timeout is not None else settings.AGENT_CALL_TIMEOUT_S
    loop = _embedded_loop()
    if loop is not None:
        future = asyncio.run_coroutine_threadsafe(
            _call(agent.pk, agent.name, op, payload, limit, progress, on_part), loop
        )
        return future.result(limit + ACCEPT_TIMEOUT_S + 5)
    result: dict[str, Any] = async_to_sync(_call)(agent.pk, agent.name, op, payload, limit, progress, on_part)
    return result


class Caller:
    """Calls to agents from a thread of their own with one event loop for its whole life, so the
    channel layer's connections are made once: :func:`call` from a plain thread runs each call on
    a new loop (``async_to_sync``), with new connections to the broker, which a caller asking
    every second (the live collector) would pay on every sweep. ``ask`` returns at once; the
    future holds the result."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def ask(
        self,
        agent: FabricAgent,
        op: str,
        payload: dict[str, Any],
        *,
        timeout: float,
        on_part: Callable[[dict[str, Any]], None] | None = None,
    ) -> concurrent.futures.Future[dict[str, Any]]:
        loop = _embedded_loop() or self.loop
        return asyncio.run_coroutine_threadsafe(_call(agent.pk, agent.name, op, payload, timeout, None, on_part), loop)

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


def _embedded_loop() -> asyncio.AbstractEventLoop | None:
    """In embedded mode, the server's event loop, where every call to an agent must run: the
    in-memory layer's queues belong to it (where the agent's socket lives), and a reply awaited
    on another loop is not woken when it comes. None otherwise."""
    loop = _server_loop
    if isinstance(get_channel_layer(), InMemoryChannelLayer) and loop is not None and loop.is_running():
        return loop
    return None


#: The event loop the agents' sockets run on in this process (set by their consumer).
_server_loop: asyncio.AbstractEventLoop | None = None


def remember_server_loop() -> None:
    """Called on the server's loop by the agents' consumer (see :func:`call`)."""
    global _server_loop
    _server_loop = asyncio.get_running_loop()


_local = threading.local()


def _layer() -> BaseChannelLayer:
    """This thread's channel layer. A caller waits for its answer on a reply channel of the
    layer, and a Redis layer lets one event loop at a time receive: two threads of one process
    (two web requests, a worker task and a request) asking agents at once would collide on the
    shared one, so each thread gets its own (the in-memory layer of embedded mode is shared: its
    calls run on the server's loop)."""
    shared = get_channel_layer()
    assert shared is not None, "the console runs with a channel layer"
    if isinstance(shared, InMemoryChannelLayer):
        return shared
    layer = getattr(_local, "layer", None)
    if layer is None:
        layer = _local.layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    return layer


async def _call(
    agent_id: int,
    name: str,
    op: str,
    payload: dict[str, Any],
    timeout: float,
    progress: Callable[[str, str], None] | None,
    on_part: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    layer = _layer()
    reply = await layer.new_channel()
    request = {"type": "agent.request", "id": uuid.uuid4().hex, "op": op, "payload": payload, "reply_to": reply}
    await layer.group_send(group(agent_id), request)
    loop = asyncio.get_running_loop()
    accepted = False
    deadline = loop.time() + ACCEPT_TIMEOUT_S
    silent_after = float(settings.AGENT_SILENT_AFTER_S)
    heard = loop.time()
    while True:
        now = loop.time()
        if now >= deadline:
            raise AgentLost(f"agent {name!r} did not {'answer' if accepted else 'take'} {op} in time")
        if accepted and now - heard >= silent_after:
            # the server holding the agent's socket died under the request (its "lost" never
            # comes): the caller retries, through the agent's next socket
            raise AgentLost(f"agent {name!r}: its socket went silent during {op}")
        limit = min(deadline, heard + silent_after) if accepted else deadline
        try:
            message = await asyncio.wait_for(layer.receive(reply), limit - now)
        except TimeoutError:
            continue
        heard = loop.time()
        kind = message.get("kind")
        if kind == "accepted":
            accepted = True
            deadline = loop.time() + timeout
        elif kind == "progress" and message.get("result") is not None:
            if on_part is not None:
                on_part(dict(message["result"]))
        elif kind == "progress" and progress is not None:
            await sync_to_async(progress)(str(message.get("step", "")), "running")
        elif kind == "result":
            out: dict[str, Any] = message.get("result") or {}
            return out
        elif kind == "error" and message.get("code") == SM_DOWN:
            raise SmNotAnswering(f"waiting for the subnet manager on {name}: {message.get('detail', '')}")
        elif kind == "error":
            raise AgentError(f"agent {name!r}: {message.get('detail', 'failed')}")
        elif kind == "lost":
            raise AgentLost(f"agent {name!r} disconnected during {op}")
