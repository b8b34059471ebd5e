"""Agents that went silent: beat's ``telemetry.agent_watch`` (every AGENT_HEARTBEAT_S × 2)
opens an ``agent_silent`` alarm for every agent of a fabric not heard from within
AGENT_SILENT_AFTER_S (its heartbeat period, three times over) and clears it when it is heard
again. A revoked agent raises nothing."""

from __future__ import annotations

from celery import shared_task

from console.fabric.agents.services import silent
from console.fabric.agents.wire import SM_UP
from console.fabric.models import FabricAgent
from console.telemetry import services
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor

WATCH = "telemetry.agent_watch"
ACTOR = Actor.system("task:telemetry.agent_watch")


def transitions(agent: FabricAgent) -> list[Transition]:
    """Open or clear the agent's ``agent_silent`` alarm, and the ``sm_state`` alarm of its
    OpenSM (it answers no SMInfo while the agent still heartbeats)."""
    subject = f"agent-{agent.pk}"
    sm_subject = f"sm-{agent.name}"
    if silent(agent):
        seen = f"since {agent.last_seen:%H:%M:%S} UTC" if agent.last_seen else "never heard from"
        return [
            Transition(
                "open",
                FabricEvent.Kind.AGENT_SILENT,
                subject,
                "critical",
                f"agent {agent.name} ({agent.host or 'host unknown'}) silent {seen}: pushes to this fabric wait",
                {"agent": agent.pk, "name": agent.name},
            )
        ]
    out = [Transition("clear", FabricEvent.Kind.AGENT_SILENT, subject, message=f"agent {agent.name} heard again")]
    if agent.sm_state and agent.sm_state not in SM_UP:
        out.append(
            Transition(
                "open",
                FabricEvent.Kind.SM_STATE,
                sm_subject,
                "critical",
                f"the subnet manager on {agent.host or agent.name} does not answer ({agent.sm_state}): "
                "pushes wait for it",
                {"agent": agent.pk, "state": agent.sm_state},
            )
        )
    elif agent.sm_state:
        out.append(Transition("clear", FabricEvent.Kind.SM_STATE, sm_subject, message=f"{agent.sm_state} again"))
    return out


@shared_task(name=WATCH, ignore_result=True, time_limit=60, soft_time_limit=50)
def watch() -> int:
    """Apply every agent's alarm transition (idempotent: an open alarm is never opened twice)."""
    agents = list(FabricAgent.objects.filter(revoked_at__isnull=True))
    for agent in agents:
        services.apply_transitions(agent.fabric_id, transitions(agent), {}, actor=ACTOR)
    return len(agents)
