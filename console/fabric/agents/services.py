"""Agent credentials and what agents report: create (a token shown once), revoke, resolve a
presented token, hello (an agent may act for its own fabric only: anything else is refused and
audited), heartbeats (its OpenSM's state), and the list the API and pages show."""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.broadcast import close_agent_socket
from console.fabric.agents.wire import SM_UP
from console.fabric.enqueue import enqueue_apply, enqueue_reconcile
from console.fabric.models import AGENT_DRIVERS, ChangeRequest, Fabric, FabricAgent
from console.fabric.opensm import ha
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal, Role, hash_token_secret
from console.tenancy.permissions import require_operator

TOKEN_PREFIX = "ibca"


class AgentRefused(RuntimeError):
    """A presented agent token is unknown, revoked, or the agent asked for another fabric."""


@dataclass(frozen=True)
class NewAgent:
    """An agent just created, with its token (shown this once)."""

    agent: FabricAgent
    token: str


def create_agent(actor: Actor, principal: Principal, fabric: Fabric, *, name: Any) -> NewAgent:
    """A credential for the agent ``name`` of ``fabric`` (operators only; audited)."""
    require_operator(principal, to="create fabric agents")
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise Invalid("name the agent (1-64 characters, e.g. the SM host's name)", fields={"name": ["required"]})
    prefix, secret = secrets.token_hex(4), secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            agent = FabricAgent.objects.create(
                fabric=fabric, name=name.strip(), prefix=prefix, secret_hash=hash_token_secret(secret)
            )
            audit.record(actor, "agent.create", agent, after=audit.snapshot(agent))
    except IntegrityError as exc:
        raise Conflict(f"fabric {fabric.name!r} has an agent named {name!r}") from exc
    return NewAgent(agent, f"{TOKEN_PREFIX}_{prefix}_{secret}")


def rotate_agent(actor: Actor, principal: Principal, agent: FabricAgent) -> NewAgent:
    """A new token for an agent (the old one stops working; a revoked agent is active again):
    how ``manage.py up`` gives each demo lab's agent a token on every start. Audited."""
    require_operator(principal, to="rotate agent tokens")
    prefix, secret = secrets.token_hex(4), secrets.token_urlsafe(32)
    with transaction.atomic():
        agent = FabricAgent.objects.select_for_update().get(pk=agent.pk)
        before = audit.snapshot(agent)
        agent.prefix, agent.secret_hash, agent.revoked_at = prefix, hash_token_secret(secret), None
        agent.save(update_fields=["prefix", "secret_hash", "revoked_at"])
        audit.record(actor, "agent.rotate", agent, before=before, after=audit.snapshot(agent))
        agent_id = agent.pk
        transaction.on_commit(lambda: close_agent_socket(agent_id))  # the old token's socket
    return NewAgent(agent, f"{TOKEN_PREFIX}_{prefix}_{secret}")


def lab_agent(actor: Actor, fabric: Fabric, *, name: str = "lab") -> NewAgent:
    """The agent of a lab fabric's SM host (``lab``, ``lab-standby``), created or given a new
    token."""
    operator = Principal(None, Role.OPERATOR, None)
    agent = FabricAgent.objects.filter(fabric=fabric, name=name).first()
    if agent is None:
        return create_agent(actor, operator, fabric, name=name)
    return rotate_agent(actor, operator, agent)


def revoke_agent(actor: Actor, principal: Principal, agent: FabricAgent) -> FabricAgent:
    """Revoke an agent's token: its next call is refused and its socket closed (audited)."""
    require_operator(principal, to="revoke fabric agents")
    with transaction.atomic():
        agent = FabricAgent.objects.select_for_update().get(pk=agent.pk)
        if agent.revoked_at is not None:
            raise Conflict(f"agent {agent.name!r} is already revoked")
        before = audit.snapshot(agent)
        agent.revoked_at = timezone.now()
        agent.connected = False
        agent.save(update_fields=["revoked_at", "connected"])
        audit.record(actor, "agent.revoke", agent, before=before, after=audit.snapshot(agent))
        agent_id = agent.pk
        transaction.on_commit(lambda: close_agent_socket(agent_id))
    return agent


def resolve_agent(raw: str | None) -> FabricAgent:
    """The active agent a presented token belongs to; :class:`AgentRefused` otherwise."""
    parts = (raw or "").split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        raise AgentRefused("malformed agent token")
    agent = FabricAgent.objects.select_related("fabric").filter(prefix=parts[1]).first()
    if agent is None or not hmac.compare_digest(agent.secret_hash, hash_token_secret(parts[2])):
        raise AgentRefused("unknown agent token")
    if agent.revoked_at is not None:
        raise AgentRefused("agent token revoked")
    return agent


def refuse(agent: FabricAgent | None, why: str, *, address: str = "") -> None:
    """Audit a refused agent (a wrong fabric, an operation not its own)."""
    with transaction.atomic():
        audit.record(
            Actor.system(f"agent:{agent.name}" if agent else "agent:?"),
            "agent.refused",
            object_type="fabric.fabricagent",
            object_id=str(agent.pk) if agent else "",
            object_repr=agent.name if agent else "unknown agent",
            after={"why": why[:500], "address": address},
        )


def hello(agent: FabricAgent, *, fabric: str, host: str, version: str, channel: str = "") -> None:
    """The agent says who it is; it may speak for its own fabric only. ``channel`` names the
    socket that said it: that socket is the agent's live one from now on."""
    if fabric not in (agent.fabric.name, str(agent.fabric_id)):
        refuse(agent, f"asked for fabric {fabric!r}; it is the agent of {agent.fabric.name!r}")
        raise AgentRefused(f"this agent belongs to fabric {agent.fabric.name!r}, not {fabric!r}")
    with transaction.atomic():
        FabricAgent.objects.filter(pk=agent.pk).update(
            host=host[:200], version=version[:40], connected=True, last_seen=timezone.now(), channel=channel
        )
        resume(agent.fabric_id)


def resume(fabric_id: int) -> None:
    """Whatever waited for the fabric's SM host goes now (after commit): its queued changes are
    published again (a duplicate is harmless: the lease admits one) and the fabric reconciles."""
    waiting = ChangeRequest.objects.filter(fabric_id=fabric_id, status=ChangeRequest.Status.QUEUED, lease_owner="")
    for change_id in waiting.values_list("pk", flat=True):
        enqueue_apply(change_id)
    enqueue_reconcile(fabric_id)


def heartbeat(agent_id: int, sm: dict[str, Any], config: dict[str, Any] | None = None) -> None:
    """What the agent reports every period: alive, its own OpenSM's SMInfo (MASTER, STANDBY…)
    and the hash of the files it runs. When its OpenSM answers again after it did not, restarted
    between two heartbeats (SMInfo's activity count started again), or took over as master, the
    fabric reconciles at once: a push that waited for it goes, the wire is verified (a restart
    with other files loses the tenants' keys: they are pushed again) and every SM host gets the
    priorities that keep the new master master."""
    priority = sm.get("priority")
    state = str(sm.get("state") or "")[:20]
    activity = sm.get("activity")
    activity = activity if isinstance(activity, int) and activity >= 0 else None
    config = config or {}
    digest = config.get("hash")
    conf_priority = config.get("priority")
    with transaction.atomic():
        agent = FabricAgent.objects.select_for_update().filter(pk=agent_id).first()
        if agent is None:
            return
        back = agent.sm_state not in SM_UP and state in SM_UP and agent.sm_state != ""
        last = agent.sm_activity
        restarted = state in SM_UP and activity is not None and last is not None and activity < last
        # the agent says whether its master was its standby (an OpenSM back from a restart as
        # master passes through DISCOVERING too); an older agent does not: a change of state
        flag = sm.get("took_over")
        took_over = state == "MASTER" and (flag if isinstance(flag, bool) else agent.sm_state not in ("", "MASTER"))
        values: dict[str, Any] = {
            "last_seen": timezone.now(),
            "connected": True,
            "sm_state": state,
            "sm_priority": priority if isinstance(priority, int) and 0 <= priority <= 15 else None,
            "port_guid": str(sm.get("guid") or "")[:18],
            "sm_activity": activity if state in SM_UP else None,
        }
        if isinstance(digest, str):
            values["config_hash"] = digest[:64]
            values["conf_priority"] = conf_priority if isinstance(conf_priority, int) else None
        if took_over:
            values["master_since"] = timezone.now()
        FabricAgent.objects.filter(pk=agent_id).update(**values)
        if back or restarted or took_over or _out_of_step(agent, digest):
            resume(agent.fabric_id)


def _out_of_step(agent: FabricAgent, digest: Any) -> bool:
    """True when this heartbeat first shows the agent's files differing from the master's."""
    if not isinstance(digest, str) or digest == agent.config_hash or agent.sm_state == "MASTER":
        return False
    master = FabricAgent.objects.filter(fabric_id=agent.fabric_id, sm_state="MASTER", revoked_at__isnull=True)
    return master.exclude(pk=agent.pk).exclude(config_hash=digest).exclude(config_hash="").exists()


def out_of_step(fabric: Fabric) -> list[str]:
    """The SM hosts of an agent fabric whose files differ from the master's, or whose priority is
    not the one :mod:`console.fabric.opensm.ha` gives them (the master's included): a push to
    every SM host puts them right. Only connected agents count (one away gets the files when it
    returns); no master, nothing to compare with: []."""
    if fabric.driver not in AGENT_DRIVERS:
        return []
    agents = list(FabricAgent.objects.filter(fabric=fabric, revoked_at__isnull=True).order_by("name"))
    live = [a for a in agents if a.connected and not silent(a)]
    master = next((a for a in live if a.sm_state == "MASTER"), None)
    if master is None or not master.config_hash:
        return []
    others = [a for a in live if a.pk != master.pk]
    in_step = ha.all_in_step((a.conf_priority for a in others), any_away=len(live) != len(agents))
    out = [master.name] if master.conf_priority != ha.priority_for(master=True, all_in_step=in_step) else []
    for agent in others:
        if agent.config_hash != master.config_hash or agent.conf_priority != ha.STANDBY_PRIORITY:
            out.append(agent.name)
    return out


def waiting_for_sm(fabric_ids: Iterable[int]) -> dict[int, str]:
    """What each agent fabric's pushes wait for, in words, when its subnet manager cannot take
    them now: ``waiting for the subnet manager on smhost1`` (its OpenSM does not answer),
    ``waiting for a master subnet manager (…)`` (SMs answer, none as master: a takeover under
    way) or ``waiting for the subnet manager's agent`` (no agent connected). Fabrics that can
    take a push now are left out. One query."""
    ids = set(fabric_ids)
    if not ids:
        return {}
    agent_fabrics = Fabric.objects.filter(pk__in=ids, driver__in=AGENT_DRIVERS)
    rows = FabricAgent.objects.filter(fabric__in=agent_fabrics, revoked_at__isnull=True).order_by("name")
    by_fabric: dict[int, list[FabricAgent]] = {pk: [] for pk in agent_fabrics.values_list("pk", flat=True)}
    for agent in rows:
        by_fabric[agent.fabric_id].append(agent)
    out: dict[int, str] = {}
    for fabric_id, agents in by_fabric.items():
        live = [a for a in agents if a.connected and not silent(a)]
        if not live:
            out[fabric_id] = "waiting for the subnet manager's agent"
        elif all(a.sm_state and a.sm_state not in SM_UP for a in live):  # (not yet reported: try)
            out[fabric_id] = f"waiting for the subnet manager on {live[0].name}"
        elif all(a.sm_state for a in live) and not any(a.sm_state == "MASTER" for a in live):
            states = ", ".join(f"{a.name} {a.sm_state}" for a in live)
            out[fabric_id] = f"waiting for a master subnet manager ({states})"
    return out


def disconnected(agent_id: int, channel: str = "") -> None:
    """The agent's socket ``channel`` closed. A socket the agent already replaced (it was killed
    and came back before the server noticed the old one's end) changes nothing."""
    FabricAgent.objects.filter(pk=agent_id, channel=channel).update(connected=False)


def silent(agent: FabricAgent, *, now: Any = None) -> bool:
    """True when the agent has not been heard from for longer than its period allows."""
    now = now or timezone.now()
    if agent.last_seen is None:
        return True
    return (now - agent.last_seen).total_seconds() > settings.AGENT_SILENT_AFTER_S


def agents_json(fabric: Fabric) -> list[dict[str, Any]]:
    """``GET /api/fabrics/{id}/agents/``: each agent and its OpenSM as it last reported, with the
    hash of the files it runs and whether it is in step (:func:`out_of_step`)."""
    behind = set(out_of_step(fabric))
    out = []
    for agent in FabricAgent.objects.filter(fabric=fabric).order_by("name"):
        out.append(
            {
                "id": agent.pk,
                "name": agent.name,
                "host": agent.host,
                "version": agent.version,
                "last_seen": agent.last_seen.isoformat() if agent.last_seen else None,
                "connected": agent.connected and not silent(agent),
                "revoked": agent.revoked_at is not None,
                "sm_state": agent.sm_state,
                "sm_priority": agent.sm_priority,
                "port_guid": agent.port_guid,
                "config_hash": agent.config_hash,
                "conf_priority": agent.conf_priority,
                "master_since": agent.master_since.isoformat() if agent.master_since else None,
                "in_step": agent.name not in behind and (agent.connected or agent.revoked_at is not None),
            }
        )
    return out
