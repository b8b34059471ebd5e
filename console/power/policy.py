"""A pool's power policy applied to the console's nodes: what the planner sees, and what is done.

:func:`apply` runs one pool's policy. In one transaction, **under the pool's reservation lock**
(``scheduling.services.locks.pool_and_overlapping_lock``, the lock reserve and the queue pass
take before they place), it reads everything the decision rests on, asks the pure planner
(:func:`scheduling.power.policy.plan`) and, unless it is a dry run, changes the nodes' power states
through :func:`console.power.services.power_off`/:func:`~console.power.services.power_on` (actor
``policy``; the BMC work is enqueued after commit). A reservation committed before the lock was
taken is seen; one that comes after waits for the commit and then finds the node powering off, so
placement passes over it. Every run is recorded as a :class:`~console.power.models.PolicyRun`
with its actions and their reasons; a dry run changes no node and sends nothing to any BMC.

What the planner sees of each node of the pool:

- ``busy``: an allocation of a held (placed, provisioning, ready) or ending reservation covers now;
- ``idle_since``: the later of the end of its last allocation and its last power change; for a
  node with neither, the moment the policy was enabled;
- reservations: the allocations not ended of reservations that may still use them;
- queued requests of the pool with their estimated start (none: now), in whole nodes;
- boot time: ``scheduling.services.power.node_boot_seconds`` (the catalogue, as placement reads it);
- leaf group: the pool's topology;
- a node without a BMC cannot be switched: on, it counts as pinned; off, as failed (left alone).

The rate limit counts the policy's own power changes of the pool's nodes in the last minute.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections import defaultdict
from typing import Any

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from console.power import services
from console.power.models import PolicyRun, PoolPowerPolicy, PowerEvent, PowerPin
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError, Invalid, NotFound
from scheduling.models import Node, Pool, Reservation, ReservationAllocation
from scheduling.power.policy import (
    RATE_WINDOW,
    Demands,
    NodePower,
    PowerAction,
    PowerState,
    QueuedDemand,
    ReservationWindow,
    plan,
)
from scheduling.services.locks import pool_and_overlapping_lock
from scheduling.services.power import node_boot_seconds
from scheduling.services.topology import pool_topology

log = logging.getLogger(__name__)

#: The actor of the policy's power changes (PowerEvent.actor, audit rows).
POLICY = Actor.system("policy")
#: Reservations that occupy their nodes now (a node under one is busy).
OCCUPYING = (*Reservation.HOLDING, Reservation.Status.ENDING)
#: Runs kept per pool (older ones are deleted as new ones are recorded).
KEEP_RUNS = 200


def policy_of(pool: Pool) -> PoolPowerPolicy:
    """The pool's stored policy, or the defaults (disabled; not saved)."""
    return PoolPowerPolicy.objects.filter(pool=pool).first() or PoolPowerPolicy(pool=pool)


def _leaf_groups(pool: Pool) -> dict[int, str]:
    """Node pk -> leaf group name (empty when the pool has no topology to read)."""
    try:
        named = pool_topology(pool)
    except Exception:  # a pool on a fabric without a design: every node its own group
        log.warning("no topology for pool %s; the policy treats each node as its own group", pool.pk, exc_info=True)
        return {}
    nodes = named.topology.nodes
    return {pk: named.group_names[nodes[i].leaf_group] for i, pk in enumerate(named.node_pks)}


def _boot(nodes: list[Node]) -> dict[int, dt.timedelta]:
    """Node pk -> boot time, one catalogue lookup per (fabric, node type)."""
    by_kind: dict[tuple[int, str], dt.timedelta] = {}
    out: dict[int, dt.timedelta] = {}
    for node in nodes:
        kind = (node.fabric_id, node.node_type)
        if kind not in by_kind:
            by_kind[kind] = dt.timedelta(seconds=node_boot_seconds(node))
        out[node.pk] = by_kind[kind]
    return out


def _queued(pool: Pool, now: dt.datetime, gpus_per_node: int) -> tuple[QueuedDemand, ...]:
    rows = Reservation.objects.filter(pool=pool, status=Reservation.Status.QUEUED).order_by()
    out = []
    for estimated, nodes, gpus in rows.values_list("estimated_start", "requested_nodes", "requested_gpus"):
        wanted = nodes or math.ceil((gpus or 0) / max(1, gpus_per_node))
        if wanted:
            out.append(QueuedDemand(estimated or now, wanted))
    return tuple(out)


def snapshot(pool: Pool, policy: PoolPowerPolicy, now: dt.datetime) -> tuple[list[NodePower], Demands, list[Node]]:
    """What the planner sees of ``pool`` at ``now`` (see the module docstring); read under the lock."""
    nodes = list(Node.objects.filter(pools=pool).order_by("pk"))
    ids = [n.pk for n in nodes]
    allocations = ReservationAllocation.objects.filter(node_id__in=ids).order_by()
    busy = set(
        allocations.filter(start__lte=now, end__gt=now, reservation__status__in=OCCUPYING).values_list(
            "node_id", flat=True
        )
    )
    last_end = dict(
        allocations.filter(end__lte=now).values("node_id").annotate(last=Max("end")).values_list("node_id", "last")
    )
    windows: set[tuple[int, dt.datetime, dt.datetime]] = set(
        allocations.filter(end__gt=now, reservation__status__in=services.NEEDING).values_list("node_id", "start", "end")
    )
    pinned = set(PowerPin.objects.filter(node_id__in=ids).values_list("node_id", flat=True))
    with_bmc = set(Node.objects.filter(pk__in=ids, bmc__isnull=False).values_list("pk", flat=True))
    groups = _leaf_groups(pool)
    boot = _boot(nodes)
    powers = []
    for node in nodes:
        state = PowerState(node.power_state)
        if node.pk not in with_bmc and state is PowerState.OFF:
            state = PowerState.FAILED  # cannot be switched on: left alone, not counted
        signs = [t for t in (last_end.get(node.pk), node.power_changed_at) if t is not None] or [policy.enabled_at]
        powers.append(
            NodePower(
                name=node.name,
                state=state,
                boot=boot[node.pk],
                busy=node.pk in busy,
                idle_since=max((t for t in signs if t is not None), default=None),
                pinned_on=node.pk in pinned or node.pk not in with_bmc,
                leaf_group=groups.get(node.pk),
            )
        )
    name_of = {n.pk: n.name for n in nodes}
    demands = Demands(
        reservations=tuple(ReservationWindow(name_of[pk], s, e) for pk, s, e in sorted(windows)),
        queued=_queued(pool, now, max((n.gpus for n in nodes), default=8)),
    )
    return powers, demands, nodes


def _recent_actions(node_ids: list[int], now: dt.datetime) -> list[dt.datetime]:
    rows = PowerEvent.objects.filter(
        node_id__in=node_ids,  # every power action on the pool's nodes: the policy's, operators', wakes'
        intended=True,
        to_state__in=(Node.Power.POWERING_ON, Node.Power.POWERING_OFF),
        at__gt=now - RATE_WINDOW,
    )
    return list(rows.values_list("at", flat=True))


def _carry_out(action: PowerAction, node_id: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"node": action.node, "node_id": node_id, "action": action.action, "reason": action.reason}
    if action.dry_run:
        return {**entry, "outcome": "would"}
    try:
        if action.action == "off":
            services.power_off(node_id, actor=POLICY, reason=action.reason)
        else:
            services.power_on(node_id, actor=POLICY, reason=action.reason)
    except ConsoleError as exc:  # its own savepoint rolled back; the run goes on with the others
        return {**entry, "outcome": "refused", "error": exc.detail}
    return {**entry, "outcome": "done"}


def _summary(actions: list[dict[str, Any]], dry_run: bool) -> str:
    if not actions:
        return "nothing to do"
    counts: dict[str, int] = defaultdict(int)
    for a in actions:
        counts[f"{a['action']}:{a['outcome']}"] += 1
    words = {"done": "powered", "would": "would power", "refused": "refused to power"}
    parts = [f"{words[key.split(':')[1]]} {key.split(':')[0]} {n} node(s)" for key, n in sorted(counts.items())]
    return ("dry run: " if dry_run else "") + "; ".join(parts)


def apply(
    pool_id: int,
    *,
    actor: Actor = POLICY,
    trigger: str = "schedule",
    dry_run: bool | None = None,
    now: dt.datetime | None = None,
) -> PolicyRun:
    """Apply the pool's policy once (``dry_run``: overrides the stored setting) and record the run.
    Whether the policy is enabled is the caller's business: the minute task applies enabled
    policies only (:func:`apply_enabled`), an operator may run any (a dry run, typically)."""
    with transaction.atomic():
        pool_and_overlapping_lock(pool_id)  # before reading anything the decision rests on
        pool = Pool.objects.filter(pk=pool_id).first()
        if pool is None:
            raise NotFound("no such pool")
        now = now or timezone.now()
        stored = policy_of(pool)
        policy = stored.as_policy(dry_run=dry_run)
        powers, demands, nodes = snapshot(pool, stored, now)
        pk_of = {n.name: n.pk for n in nodes}
        recent = _recent_actions(list(pk_of.values()), now)
        actions = [_carry_out(a, pk_of[a.node]) for a in plan(policy, powers, demands, now, recent)]
        run = PolicyRun.objects.create(
            pool=pool,
            at=now,
            dry_run=policy.dry_run,
            trigger=trigger,
            actor=actor.label[:200],
            actions=actions,
            summary=_summary(actions, policy.dry_run)[:500],
        )
        if trigger == "operator":
            audit.record(
                actor,
                "pool.power_policy_run",
                pool,
                after={"dry_run": policy.dry_run, "summary": run.summary},
            )
        stale = PolicyRun.objects.filter(pool=pool).order_by("-at", "-pk").values_list("pk", flat=True)[KEEP_RUNS:]
        PolicyRun.objects.filter(pk__in=list(stale)).delete()
    return run


#: The fields an operator sets (PUT /api/pools/{id}/power-policy/, the policy editor page).
FIELDS = ("enabled", "dry_run", "idle_after", "buffer_nodes", "buffer_percent", "margin", "max_actions_per_minute")


def set_policy(pool_id: int, *, actor: Actor, data: dict[str, Any]) -> PoolPowerPolicy:
    """Create or change a pool's policy from ``data`` (any of :data:`FIELDS`; absent: kept);
    values the planner refuses are an :class:`Invalid` (400). Audited."""
    with transaction.atomic():
        pool = Pool.objects.select_for_update().filter(pk=pool_id).first()
        if pool is None:
            raise NotFound("no such pool")
        stored = PoolPowerPolicy.objects.select_for_update().filter(pool=pool).first()
        before = audit.snapshot(stored) if stored is not None else None
        stored = stored or PoolPowerPolicy(pool=pool)
        was_enabled = stored.enabled
        for field in FIELDS:
            if field in data:
                setattr(stored, field, data[field])
        try:
            stored.as_policy()
        except ValueError as exc:
            raise Invalid(str(exc), code="invalid_policy") from exc
        if stored.enabled and not was_enabled:
            stored.enabled_at = timezone.now()
        stored.updated_by = actor.label[:200]
        stored.save()
        audit.record(actor, "pool.power_policy", pool, before=before, after=audit.snapshot(stored))
    return stored


def pin(node_id: int, *, actor: Actor, reason: str = "") -> PowerPin:
    """Pin a node on (again: the reason and who are updated). Audited."""
    with transaction.atomic():
        node = Node.objects.select_for_update().filter(pk=node_id).first()
        if node is None:
            raise NotFound("no such node")
        existing = PowerPin.objects.filter(node=node).first()
        before = audit.snapshot(existing) if existing is not None else None
        pinned, _ = PowerPin.objects.update_or_create(
            node=node, defaults={"pinned_by": actor.label[:200], "pinned_at": timezone.now(), "reason": reason[:300]}
        )
        audit.record(actor, "node.power_pin", node, before=before, after={"reason": pinned.reason})
    return pinned


def unpin(node_id: int, *, actor: Actor) -> None:
    """Take a node's pin away (no pin: :class:`NotFound`). Audited."""
    with transaction.atomic():
        existing = PowerPin.objects.select_for_update().filter(node_id=node_id).select_related("node").first()
        if existing is None:
            raise NotFound("this node is not pinned")
        before = audit.snapshot(existing)
        node = existing.node
        existing.delete()
        audit.record(actor, "node.power_unpin", node, before=before)


def apply_enabled() -> dict[int, str]:
    """Apply every enabled pool's policy (the minute task): one pool's failure is logged and the
    others still run. Returns pool pk -> the run's summary or the error."""
    out: dict[int, str] = {}
    for pool_id in PoolPowerPolicy.objects.filter(enabled=True).order_by("pool_id").values_list("pool_id", flat=True):
        try:
            out[pool_id] = apply(pool_id).summary
        except Exception as exc:
            log.exception("power policy of pool %s failed", pool_id)
            out[pool_id] = f"error: {exc}"
    return out
