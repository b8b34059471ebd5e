"""Agents that went silent: beat's ``telemetry.agent_watch`` (every AGENT_HEARTBEAT_S × 2)
opens an ``agent_silent`` alarm for every agent of a fabric not heard from within
AGENT_SILENT_AFTER_S (its heartbeat period, three times over) and clears it when it is heard
again. A revoked agent raises nothing."""

from __future__ import annotations

from celery import shared_task

from console.fabric.agents.services import silent
from console.fabric.agents.wire import SM_UP
from console.fabric.models import FabricAgent
from console.telemetry import services, sm_ha
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor

WATCH = "telemetry.agent_watch"
ACTOR = Actor.system("task:telemetry.agent_watch")


def transitions(agent: FabricAgent, master: FabricAgent | None = None) -> list[Transition]:
    """Open or clear the agent's ``agent_silent`` alarm, and the ``sm_state`` alarm of its
    OpenSM (it answers no SMInfo while the agent still heartbeats). ``master``: another SM host
    of the fabric that is master (this one is then a standby: changes are pending on it, not
    waiting for it)."""
    subject = f"agent-{agent.pk}"
    sm_subject = f"sm-{agent.name}"
    if silent(agent):
        seen = f"since {agent.last_seen:%H:%M:%S} UTC" if agent.last_seen else "never heard from"
        then = (
            f"changes are pending on {agent.name} (the master, {master.name}, takes them)"
            if master is not None
            else "pushes to this fabric wait"
        )
        return [
            Transition(
                "open",
                FabricEvent.Kind.AGENT_SILENT,
                subject,
                "critical",
                f"agent {agent.name} ({agent.host or 'host unknown'}) silent {seen}: {then}",
                {"agent": agent.pk, "name": agent.name},
            )
        ]
    out = [Transition("clear", FabricEvent.Kind.AGENT_SILENT, subject, message=f"agent {agent.name} heard again")]
    if agent.sm_state and agent.sm_state not in SM_UP:
        then = f"the master, {master.name}, takes the changes" if master is not None else "pushes wait for it"
        out.append(
            Transition(
                "open",
                FabricEvent.Kind.SM_STATE,
                sm_subject,
                "critical",
                f"the subnet manager on {agent.host or agent.name} does not answer ({agent.sm_state}): {then}",
                {"agent": agent.pk, "state": agent.sm_state},
            )
        )
    elif agent.sm_state:
        out.append(Transition("clear", FabricEvent.Kind.SM_STATE, sm_subject, message=f"{agent.sm_state} again"))
    return out


@shared_task(name=WATCH, ignore_result=True, time_limit=60, soft_time_limit=50)
def watch() -> int:
    """Apply every agent's alarm transition, and each fabric's SM takeovers and config
    differences (:mod:`console.telemetry.sm_ha`); idempotent: an open alarm is never opened twice."""
    agents = list(FabricAgent.objects.filter(revoked_at__isnull=True).select_related("fabric"))
    by_fabric: dict[int, list[FabricAgent]] = {}
    for agent in agents:
        by_fabric.setdefault(agent.fabric_id, []).append(agent)
        services.apply_transitions(
            agent.fabric_id, transitions(agent, by_fabric_master(agents, agent)), {}, actor=ACTOR
        )
    for fabric_agents in by_fabric.values():
        ha_transitions, hits = sm_ha.transitions(fabric_agents[0].fabric, fabric_agents)
        services.apply_transitions(fabric_agents[0].fabric_id, ha_transitions, hits, actor=ACTOR)
    return len(agents)


def by_fabric_master(agents: list[FabricAgent], agent: FabricAgent) -> FabricAgent | None:
    """Another agent of the same fabric whose OpenSM is master and still heard from."""
    return next(
        (
            a
            for a in agents
            if a.fabric_id == agent.fabric_id and a.pk != agent.pk and a.sm_state == "MASTER" and not silent(a)
        ),
        None,
    )
