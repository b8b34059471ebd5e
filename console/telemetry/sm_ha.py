"""Subnet-manager HA as events, from what the agents report (``telemetry.agent_watch``):

- **takeover**: an SM host whose OpenSM became MASTER after another state (``master_since``,
  set by its heartbeat) opens an ``sm_takeover`` event with its time, for the operators and in the
  notifications of the tenants whose reservations are on the fabric ("fabric maintenance:
  subnet manager failover, no action needed": if their ports lost anything, the wire check's own
  ``wire_drift`` event says so). It resolves once every SM host of the fabric is back and in step.
- **config differs**: a connected SM host whose files hash otherwise than the master's while no
  change is being pushed (one is, briefly, between the master's swap and its own) opens a
  ``config_drift`` event with the diff of the two hosts' files (per-host lines left out); it
  clears when the hashes match again (the next reconcile pushes to it).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable

from console.fabric.agents import rpc
from console.fabric.agents.services import out_of_step, silent
from console.fabric.changes.pipeline import RUNNING
from console.fabric.models import Fabric, FabricAgent
from console.fabric.opensm import ha
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent
from scheduling.models import Reservation

log = logging.getLogger(__name__)

#: what a tenant reads of a takeover (nothing of the operators' hosts)
TAKEOVER_NOTICE = "fabric maintenance: subnet manager failover, no action needed"


def takeover_subject(agent: FabricAgent) -> str:
    assert agent.master_since is not None
    return f"takeover-{agent.pk}-{int(agent.master_since.timestamp())}"


def affected(fabric_id: int) -> list[tuple[int, int]]:
    """(reservation, tenant) of every reservation holding nodes of the fabric."""
    rows = Reservation.objects.live().filter(fabric_id=fabric_id).values_list("pk", "tenant_id")
    return [(int(r), int(t)) for r, t in rows]


def transitions(fabric: Fabric, agents: Iterable[FabricAgent]) -> tuple[list[Transition], dict[str, list]]:
    """The takeover and config-difference transitions of one fabric, and who each affects."""
    agents = [a for a in agents if a.revoked_at is None]
    out: list[Transition] = []
    hits: dict[str, list[tuple[int, int]]] = {}
    known = dict(
        FabricEvent.objects.filter(fabric=fabric, kind=FabricEvent.Kind.SM_TAKEOVER).values_list("subject", "status")
    )
    healthy = all(a.connected and not silent(a) for a in agents) and not out_of_step(fabric)
    for agent in agents:
        if agent.master_since is None:
            continue
        subject = takeover_subject(agent)
        if subject not in known:
            out.append(
                Transition(
                    "open",
                    FabricEvent.Kind.SM_TAKEOVER,
                    subject,
                    "info",
                    TAKEOVER_NOTICE,
                    {"agent": agent.pk, "name": agent.name, "host": agent.host, "at": agent.master_since.isoformat()},
                )
            )
            hits[subject] = affected(fabric.pk)
        if healthy and known.get(subject, "open") != "resolved":
            out.append(
                Transition(
                    "clear",
                    FabricEvent.Kind.SM_TAKEOVER,
                    subject,
                    message=f"failover complete: {agent.name} is master, every SM host holds the same files",
                )
            )
    out += _config_differences(fabric, agents)
    return out, hits


def _config_differences(fabric: Fabric, agents: list[FabricAgent]) -> list[Transition]:
    live = [a for a in agents if a.connected and not silent(a)]
    master = next((a for a in live if a.sm_state == "MASTER"), None)
    if master is None or not master.config_hash:
        return []
    pushing = fabric.changes.filter(status__in=RUNNING).exists()
    open_subjects = set(
        FabricEvent.objects.filter(fabric=fabric, kind=FabricEvent.Kind.CONFIG_DRIFT, subject__startswith="sm-config-")
        .unresolved()
        .values_list("subject", flat=True)
    )
    out = []
    for agent in live:
        if agent.pk == master.pk or not agent.config_hash:
            continue
        subject = f"sm-config-{agent.pk}"
        if agent.config_hash == master.config_hash:
            if subject in open_subjects:
                out.append(Transition("clear", FabricEvent.Kind.CONFIG_DRIFT, subject, message="same files again"))
        elif not pushing and subject not in open_subjects:
            message = (
                f"SM host {agent.host or agent.name} runs other files than the master ({master.host or master.name}): "
                "a push to it is pending"
            )
            detail = {"agent": agent.pk, "master": master.pk, "diff": config_diff(master, agent)}
            out.append(Transition("open", FabricEvent.Kind.CONFIG_DRIFT, subject, "warning", message, detail))
    return out


def config_diff(master: FabricAgent, other: FabricAgent) -> str:
    """The unified diff of what the two SM hosts run (per-host lines left out), read through their
    agents; '' when either cannot be asked."""
    texts = []
    for agent in (master, other):
        try:
            texts.append(ha.shared_config(rpc.call(agent, "read_live", {}, timeout=15)["files"]))
        except (rpc.AgentLost, rpc.AgentError, KeyError) as exc:
            log.info("config diff of %s: %s", agent.name, exc)
            return ""
    lines = difflib.unified_diff(
        texts[0].splitlines(), texts[1].splitlines(), master.name, other.name, lineterm="", n=1
    )
    return "\n".join(lines)[:8000]
