"""Scheduling's side of node power: placement that knows it, and reservations waiting for it.

The seam with the power app (``console/power``, which drives the BMCs):

- :data:`power_wanted`, a Django signal sent (after commit) with ``node_ids`` (``Node`` primary
  keys), ``reservation_ids`` and ``reason`` (``grant`` or ``start``) when a granted reservation
  needs nodes that are off: at the grant when booting from now would barely make its start, else
  by the periodic tick once the start comes within the nodes' boot time plus margin
  (:func:`wake_due`), again on every tick while a node is still reported off or failed: the
  power app connects a receiver that powers them on, ignores a node it is already booting, and
  retries a failed one twice with backoff before it tells the reservations.
- :func:`powered_on` and :func:`powered_off`, which the power app calls (through its
  ``power_state_changed`` signal, after it recorded the state and its power event) when a node
  settles: on, the reservations whose last node it was reconcile (the partition enters the
  fabric's desired state only then, :func:`.lifecycle.desired_partitions`, and the reservation
  becomes ``ready`` when the pipeline verified its P_Key on the ports,
  :func:`.lifecycle.fabric_verified`, which also checks every node is on); off or failed, the
  fabric reconciles (its ports are down) and reservations waiting on it have it booted.
  The power app is the one writer of ``Node.power_state``.

Placement (:func:`fit_for`, :func:`apply_fit`, :func:`explain`) builds the pure
:class:`~scheduling.placement.powerfit.PowerFit` of a decision from the nodes that are not on;
:func:`progress` is the "powering on" step the API and the reservation card show.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from console.fabric.agents.services import waiting_for_sm
from console.fabric.models import Fabric
from console.fabric.services import enqueue_reconcile
from scheduling.models import Node, Pool, Reservation, ReservationAllocation, ReservationSubnet
from scheduling.placement import Placement, PlacementEngine, PoweredInTime, Rejection, RejectReason, Request
from scheduling.placement.powerfit import BOOT_MARGIN_S, NodePower, PowerFit, ready_at
from scheduling.placement.types import format_time
from scheduling.services.publish import enqueue_queue_pass
from scheduling.services.snapshots import Snapshot
from scheduling.services.topology import DEFAULT_BOOT_S, NamedTopology, boot_of, shape_of_revision

log = logging.getLogger(__name__)
#: Sent after commit with ``node_ids``, ``reservation_ids`` and ``reason`` (see module docstring).
power_wanted = Signal()
#: Wake nodes this long before booting from now would only just make the start (the tick runs
#: every 10 s; a minute covers a late tick and the BMC's answer).
WAKE_SLACK_S = 60.0
#: Reservations waiting for power: placed (not started) or provisioning.
WAITING = (Reservation.Status.PLACED, Reservation.Status.PROVISIONING)
ON = Node.Power.ON
#: The rejection code when only nodes that are off (or failed) stand in the way.
POWERED_OFF = "powered_off"
PERMANENT = (RejectReason.NO_ELIGIBLE_NODES, RejectReason.TOO_LARGE)
#: Not booting yet: placement counts them bootable in time (a node powering off finishes, then
#: boots, which :func:`powered_off` starts as soon as it is off).
NOT_BOOTABLE = (Node.Power.OFF, Node.Power.POWERING_OFF)
#: What :func:`wake_due` asks the power app to boot (a failed node: a bounded retry there).
WAKEABLE = (*NOT_BOOTABLE, Node.Power.FAILED)


# ---------------------------------------------------------------- placement


def not_on(pool: Pool, named: NamedTopology) -> dict[int, NodePower]:
    """Engine index -> power of the pool's nodes that are not on (one small query)."""
    index = {pk: i for i, pk in enumerate(named.node_pks)}
    rows = Node.objects.filter(pools=pool).exclude(power_state=ON).order_by()
    return {
        index[pk]: NodePower(state, since.timestamp() if since else None)
        for pk, state, since in rows.values_list("pk", "power_state", "power_changed_at")
        if pk in index
    }


def fit_for(snap: Snapshot, pool: Pool, start: dt.datetime) -> PowerFit | None:
    """The power judgement of a decision starting at ``start``; ``None`` when every node is on.
    The snapshot's power states when it read them (with its bookings), else one query."""
    power = snap.power if snap.power is not None else not_on(pool, snap.named)
    if not power:
        return None
    return PowerFit(snap.named.topology, snap.now.timestamp(), start.timestamp(), power)


def apply_fit(fit: PowerFit, engine: PlacementEngine, request: Request) -> tuple[PlacementEngine, Request]:
    """The engine preferring nodes that are on (same state, guards and policy) and the request
    filtered to nodes that can be on by its start."""
    preferring = PlacementEngine(
        engine.topology, state=engine.state, policy=engine.policy, guards=engine.guards, preferences=fit.preferences()
    )
    return preferring, replace(request, constraints=(*request.constraints, *fit.filters()))


def explain(fit: PowerFit, engine: PlacementEngine, request: Request, rejection: Rejection) -> Rejection:
    """``rejection`` with the nodes power left out and, when booting them would let the request
    fit, the start it could have then (``earliest_start`` if earlier than the engine's)."""
    if not fit.excluded:
        return rejection
    clause, details = fit.rejection_note()
    message = f"{rejection.message}; {clause}"
    booted = fit.booted_start()
    if booted is not None and request.start is not None:
        length = request.end - request.start
        later = PowerFit(fit.topology, fit.now, booted, fit.power, fit.margin)
        base = tuple(c for c in request.constraints if not isinstance(c, PoweredInTime))
        moved = replace(request, start=booted, end=booted + length, constraints=(*base, *later.filters()))
        found = engine.search(moved, booted, booted + length, explain=False)
        if isinstance(found, Placement):
            message += f"; once booted they fit from {format_time(booted)} UTC"
            earliest = rejection.details.get("earliest_start")
            if earliest is None or earliest > booted:
                details.update(earliest_start=booted, earliest_end=booted + length)
    # "No eligible node" or "too large" would say the pool can never hold it; it can, once booted.
    reason = POWERED_OFF if rejection.reason in PERMANENT else rejection.reason
    return Rejection(reason, message, {**rejection.details, **details})


def grant_note(
    named: NamedTopology, placement: Placement, now: dt.datetime, *, power: dict[int, NodePower] | None = None
) -> tuple[dict[str, Any] | None, list[int]]:
    """What a granted placement waits for (``placement["power"]``: ``None`` when all its nodes
    are on), and the nodes to boot right away because booting from now only just makes the start
    (the caller passes them to :func:`wake_at_grant` once the reservation has its id). ``power``:
    the pool's nodes that are not on, when the caller read them under the reservation lock (else
    one query)."""
    if power is not None:
        power = {n: power[n] for n in placement.node_ids if n in power}
    else:
        pks = [named.node_pks[n] for n in placement.node_ids]
        index = {pk: n for n, pk in zip(placement.node_ids, pks, strict=True)}
        rows = Node.objects.filter(pk__in=pks).exclude(power_state=ON).order_by()
        power = {
            index[pk]: NodePower(state, since.timestamp() if since else None)
            for pk, state, since in rows.values_list("pk", "power_state", "power_changed_at")
        }
    if not power:
        return None, []
    fit = PowerFit(named.topology, now.timestamp(), placement.start, power)
    note = fit.placement_note(placement.node_ids)
    if note is None:
        return None, []
    note["ready_by"] = dt.datetime.fromtimestamp(note["ready_by"], dt.UTC).isoformat()
    if any(power[n].state in NOT_BOOTABLE and fit.ready[n] + WAKE_SLACK_S >= placement.start for n in power):
        note["woken"] = True
        return note, sorted(named.node_pks[n] for n in power if power[n].state in NOT_BOOTABLE)
    return note, []


def wake_at_grant(node_ids: list[int], reservation_id: int) -> None:
    """After commit, :data:`power_wanted` (reason ``grant``) for the nodes :func:`grant_note`
    wants booted now, naming the reservation that needs them."""
    if node_ids:
        _send_after_commit(node_ids, [reservation_id], "grant")


def _send_after_commit(node_ids: list[int], reservation_ids: list[int], reason: str) -> None:
    """:data:`power_wanted` after the caller's commit (at once in autocommit), robustly: a receiver
    that raises is logged and neither stops the others nor reaches the caller (the periodic tick
    asks again)."""

    def send() -> None:
        answers = power_wanted.send_robust(
            sender=Reservation, node_ids=sorted(node_ids), reservation_ids=sorted(reservation_ids), reason=reason
        )
        for receiver, answer in answers:
            if isinstance(answer, Exception):
                log.error("power_wanted receiver %r failed", receiver, exc_info=answer)

    transaction.on_commit(send, robust=True)


# ---------------------------------------------------------------- reservations waiting for power


def _boot_seconds(fabric_ids: Iterable[int]) -> dict[int, Any]:
    """Per fabric, the shape carrying its catalogue's boot times."""
    rows = Fabric.objects.filter(pk__in=set(fabric_ids)).values_list("pk", "revision_id", "revision__created_at")
    return {pk: shape_of_revision(revision, created) for pk, revision, created in rows}


def node_boot_seconds(node: Node) -> float:
    """Boot seconds of ``node``'s type from its fabric's design catalogue (any spelling; the
    default for unknown types): the one source placement and the power app share."""
    shape = _boot_seconds([node.fabric_id]).get(node.fabric_id)
    return boot_of(shape, node.node_type) if shape is not None else DEFAULT_BOOT_S


def _waiting_nodes(reservations: list[Reservation], now: dt.datetime) -> dict[int, list[dict[str, Any]]]:
    """Per reservation, its nodes (pk, power state, since, node type) from ``now`` on."""
    pairs = (
        ReservationAllocation.objects.filter(reservation__in=reservations, end__gt=now)
        .values_list("reservation_id", "node_id", "node__power_state", "node__power_changed_at", "node__node_type")
        .distinct()
        .order_by()
    )
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for res_id, node_id, state, since, node_type in pairs:
        out[res_id].append({"pk": node_id, "state": state, "since": since, "type": node_type})
    return out


def progress(reservations: Iterable[Reservation], now: dt.datetime | None = None) -> dict[int, dict[str, Any] | None]:
    """The step each reservation is at (``None`` when there is none to show): ``powering-on``
    (some node not on yet, with the expected ready time), ``fabric`` (provisioning, nodes on,
    waiting for the P_Key's verification, or for its subnet manager when that does not answer) or ``off-until-start`` (placed, some node off, booted
    ahead of the start). Two queries for any number of reservations."""
    now = now or timezone.now()
    rows = list(reservations)
    waiting = [r for r in rows if r.status in WAITING]
    nodes = _waiting_nodes(waiting, now) if waiting else {}
    shapes = _boot_seconds(r.fabric_id for r in waiting) if waiting else {}
    sm_waits = waiting_for_sm({r.fabric_id for r in waiting if r.status == Reservation.Status.PROVISIONING})
    out: dict[int, dict[str, Any] | None] = {r.pk: None for r in rows}
    for r in waiting:
        mine = nodes.get(r.pk, [])
        pending = [n for n in mine if n["state"] != ON]
        if not pending:
            if r.status == Reservation.Status.PROVISIONING:
                out[r.pk] = {
                    "step": "fabric",
                    "message": sm_waits.get(r.fabric_id, "verifying the partition (P_Key) on its ports"),
                    "nodes_total": len(mine),
                    "nodes_waiting": 0,
                    "expected_ready": None,
                }
            continue
        shape = shapes.get(r.fabric_id)
        ready = max(
            ready_at(
                boot_of(shape, n["type"]) if shape else 0.0,
                NodePower(n["state"], n["since"].timestamp() if n["since"] else None),
                now.timestamp(),
                BOOT_MARGIN_S,
            )
            for n in pending
        )
        failed = [n for n in pending if n["state"] == Node.Power.FAILED]
        booting = sum(1 for n in pending if n["state"] == Node.Power.POWERING_ON)
        expected = None if math.isinf(ready) else dt.datetime.fromtimestamp(ready, dt.UTC)
        if failed:
            step, message = "power-failed", f"{len(failed)} of {len(mine)} nodes failed to power on"
        elif r.status == Reservation.Status.PLACED and r.start > now and booting == 0:
            step = "off-until-start"
            message = f"{len(pending)} of {len(mine)} nodes are off; they are powered on ahead of the start"
        else:
            what = "booting" if booting == len(pending) else "off or booting"
            step = "powering-on"
            message = f"powering on: {len(pending)} of {len(mine)} nodes {what}"
            if expected is not None:
                message += f", expected ready {expected:%H:%M} UTC"
        out[r.pk] = {
            "step": step,
            "message": message,
            "nodes_total": len(mine),
            "nodes_waiting": len(pending),
            "expected_ready": expected.isoformat() if expected else None,
        }
    return out


def wake_due(now: dt.datetime | None = None, *, node_ids: Iterable[int] | None = None) -> int:
    """Send :data:`power_wanted` for the nodes that are off (or failed: the power app retries
    them a bounded number of times) of reservations whose start is within the nodes' boot time
    plus margin; the periodic tick calls it, and :func:`powered_off` for one node (a node that
    was powering off when placement took it boots as soon as it is off). Returns the nodes
    asked for."""
    now = now or timezone.now()
    horizon = now + dt.timedelta(hours=2)  # far beyond any boot time
    soon_qs = Reservation.objects.filter(status__in=WAITING, start__lte=horizon, end__gt=now)
    if node_ids is not None:
        soon_qs = soon_qs.filter(allocations__node_id__in=list(node_ids)).distinct()
    soon = list(soon_qs.order_by())
    nodes = _waiting_nodes(soon, now) if soon else {}
    shapes = _boot_seconds(r.fabric_id for r in soon) if soon else {}
    wanted: set[int] = set()
    reservations: set[int] = set()
    for r in soon:
        shape = shapes.get(r.fabric_id)
        for n in nodes.get(r.pk, []):
            if n["state"] not in WAKEABLE or (node_ids is not None and n["pk"] not in node_ids):
                continue
            boot = boot_of(shape, n["type"]) if shape else 0.0
            if now.timestamp() + boot + BOOT_MARGIN_S + WAKE_SLACK_S >= r.start.timestamp():
                wanted.add(n["pk"])
                reservations.add(r.pk)
    if wanted:
        _send_after_commit(sorted(wanted), sorted(reservations), "start")
    return len(wanted)


def powered_on(node_id: int, *, at: dt.datetime | None = None) -> None:
    """A node is on (whoever recorded it): reconcile the fabrics of reservations it was the last
    node off of, and run a queue pass for its pools (queued requests may start now). Idempotent."""
    now = at or timezone.now()
    with transaction.atomic():
        holding = ReservationAllocation.objects.filter(node_id=node_id, end__gt=now).values("reservation_id")
        waiting = Reservation.objects.filter(pk__in=holding, status__in=WAITING)
        still_off = ReservationAllocation.objects.filter(reservation__in=waiting, end__gt=now).exclude(
            node__power_state=ON
        )
        blocked = set(still_off.values_list("reservation_id", flat=True))
        ready_to_push = ReservationSubnet.objects.filter(reservation__in=waiting).exclude(reservation_id__in=blocked)
        fabrics = set(ready_to_push.values_list("fabric_id", flat=True))
        for fabric_id in sorted(fabrics):
            enqueue_reconcile(fabric_id)
        # A node back on may let queued requests start now.
        enqueue_queue_pass(Pool.nodes.through.objects.filter(node_id=node_id).values_list("pool_id", flat=True))


def powered_off(node_id: int, *, at: dt.datetime | None = None) -> None:
    """A node is off or failed (whoever recorded it): its HCA ports went down, so its fabric
    reconciles (a waiting reservation's partition leaves the desired state until the node is on
    again, and the applied state no longer claims a P_Key the rebooted HCAs lack: the reservation
    becomes ready only after a push verified on the booted node's ports); the provisioning
    reservations holding it forget their P_Key's verification on its fabric (their subnet row
    there, whichever subnet of a spanning reservation it is), so that fabric verifies it again on
    the booted ports; and reservations waiting on it whose start is near have it booted now (see
    :func:`wake_due`)."""
    now = at or timezone.now()
    fabric_id = Node.objects.filter(pk=node_id).values_list("fabric_id", flat=True).first()
    if fabric_id is None:
        return
    with transaction.atomic():
        holding = ReservationAllocation.objects.filter(node_id=node_id, end__gt=now).values("reservation_id")
        ReservationSubnet.objects.filter(
            fabric_id=fabric_id, reservation__in=holding, reservation__status=Reservation.Status.PROVISIONING
        ).exclude(verified_at=None).update(verified_at=None)
        enqueue_reconcile(fabric_id)
        wake_due(now, node_ids=[node_id])
