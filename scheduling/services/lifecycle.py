"""A reservation after placement: extend, release, cancel, preempt, expire, and what the fabric
verified.

requested → placed → provisioning → ready → ending → released; rejected, preempted, cancelled.
A reservation is READY only when every node of it is powered on and fabric operations verified its
P_Key on its ports of every fabric it touches (its partition enters the desired state only once
its nodes are on: :mod:`.power`); it is RELEASED only when every one of those fabrics verified its
P_Key gone. Its P_Key stays reserved on each fabric (``ReservationSubnet.pkey_live``) until that
fabric verified it gone.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from console.fabric.hooks import PartitionRequest
from console.fabric.models import ChangeRequest, Fabric, SiteLink
from console.fabric.services import enqueue_reconcile
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.horizon import check_within_horizon
from console.tenancy.models import Principal
from scheduling.models import HCA, Node, Pool, Quota, Reservation, ReservationAllocation, ReservationSubnet
from scheduling.services import notices, power
from scheduling.services.locks import (
    quota_for_update,
    reservation_for_update,
    reservation_lock,
    reservations_for_update,
)
from scheduling.services.publish import enqueue_queue_pass
from scheduling.services.quotas import usage
from scheduling.services.rights import check_manage
from scheduling.services.sharp import extension_clash
from scheduling.services.snapshots import touch

S = Reservation.Status
TRANSITIONS: dict[str, frozenset[str]] = {
    S.REQUESTED: frozenset({S.PLACED, S.PROVISIONING, S.REJECTED, S.QUEUED}),
    S.QUEUED: frozenset({S.PLACED, S.PROVISIONING, S.CANCELLED}),
    S.PLACED: frozenset({S.PROVISIONING, S.ENDING, S.CANCELLED, S.PREEMPTED}),
    S.PROVISIONING: frozenset({S.READY, S.ENDING, S.CANCELLED, S.PREEMPTED}),
    S.READY: frozenset({S.ENDING, S.PREEMPTED}),
    S.ENDING: frozenset({S.RELEASED}),
}
#: A fabric's changes that are still under way (a reconcile now would only repeat them).
OPEN_CHANGES = (
    ChangeRequest.Status.PENDING_APPROVAL,
    ChangeRequest.Status.QUEUED,
    ChangeRequest.Status.APPLYING,
    ChangeRequest.Status.VERIFYING,
)
#: States whose partition may be on the wire and must be removed before the P_Key is free.
WINDING_DOWN = (S.ENDING, S.CANCELLED, S.PREEMPTED)
#: Reconcile again for reservations stuck this long in provisioning or ending.
STUCK_AFTER = dt.timedelta(minutes=2)
#: Reconcile sooner when nothing is under way for a waiting reservation (no error, no open change
#: of its fabric): its reconcile message was lost (a web process killed between commit and
#: publish, a broker restart) rather than its push failing.
ORPHANED_AFTER = dt.timedelta(seconds=10)


class IllegalTransition(Conflict):
    code = "illegal_transition"


def transition(reservation: Reservation, new: str) -> None:
    """Move to ``new`` or refuse with 409 naming both states."""
    if new not in TRANSITIONS.get(reservation.status, frozenset()):
        raise IllegalTransition(f"a reservation that is {reservation.status} cannot become {new}")
    reservation.status = new


def lock_booked(reservation: Reservation) -> None:
    """The reservation lock of the reservation's pool and of every pool holding a node it has an
    allocation on (taken before its row: the order of reserve, whose preemptions lock victims'
    rows under the pools' reservation locks). The nodes are read again under the lock
    (:func:`.locks.reservation_lock`): a queued reservation may have been placed while this
    waited. Once its pool's lock is held nothing adds an allocation to it (placing takes that
    lock), and nothing adds its nodes to another pool (:func:`.inventory.set_pool_nodes` takes
    the locks of the pools of the nodes it moves)."""
    nodes = ReservationAllocation.objects.filter(reservation_id=reservation.pk).values("node_id")
    pools = [reservation.pool_id]
    if reservation.placement.get("sharp"):  # its tree's switches are shared by the fabric's pools
        pools = list(Pool.objects.filter(fabric_id=reservation.fabric_id).values_list("pk", flat=True))
    reservation_lock(pool_ids=pools, node_ids=nodes)


def truncate_allocations(reservation: Reservation, at: dt.datetime) -> None:
    """Free the reservation's GPUs from ``at`` on (its past stays recorded)."""
    mine = ReservationAllocation.objects.filter(reservation=reservation)
    nodes = set(mine.filter(end__gt=at).values_list("node_id", flat=True))
    mine.filter(start__gte=at).delete()
    mine.filter(end__gt=at).update(end=at)
    touch(nodes, [reservation.pk])  # the pools' cached snapshots reload it
    if reservation.start < at < reservation.end:
        reservation.end = at


def _wind_down(
    actor: Actor,
    reservation: Reservation,
    new: str,
    action: str,
    *,
    at: dt.datetime | None = None,
    **extra: Any,
) -> None:
    before = audit.snapshot(reservation)
    now = at or timezone.now()
    transition(reservation, new)
    truncate_allocations(reservation, now)
    reservation.ended_at = now
    for key, value in extra.items():
        setattr(reservation, key, value)
    reservation.save()
    audit.record(actor, action, reservation, before=before, after=audit.snapshot(reservation))
    reconcile_subnets(reservation)  # its partition leaves every fabric it touches
    enqueue_queue_pass(reservation.pool_id)  # capacity freed: the pool's queue may move


def _cancel_queued(actor: Actor, reservation: Reservation) -> None:
    # Held nothing: no allocations to free, no partition to remove; the positions behind it move.
    before = audit.snapshot(reservation)
    transition(reservation, S.CANCELLED)
    reservation.ended_at = timezone.now()
    reservation.estimated_start = None
    reservation.queue_position = None
    reservation.save()
    audit.record(actor, "reservation.cancel", reservation, before=before, after=audit.snapshot(reservation))
    enqueue_queue_pass(reservation.pool_id)


def release(actor: Actor, principal: Principal, reservation: Reservation) -> Reservation:
    """End a reservation early: its GPUs are free now, its partition is removed (→ ending).

    A reservation whose window has not started is cancelled instead.
    """
    check_manage(principal, reservation)
    with transaction.atomic():
        lock_booked(reservation)
        reservation = reservation_for_update(reservation.pk)
        if reservation.status == S.QUEUED:
            _cancel_queued(actor, reservation)
        elif reservation.status == S.PLACED and reservation.start > timezone.now():
            _wind_down(actor, reservation, S.CANCELLED, "reservation.cancel")
        else:
            _wind_down(actor, reservation, S.ENDING, "reservation.release")
    return reservation


def cancel(actor: Actor, principal: Principal, reservation: Reservation) -> Reservation:
    """Withdraw a reservation that is not ready yet, or a queued request (a ready one is released)."""
    check_manage(principal, reservation)
    with transaction.atomic():
        lock_booked(reservation)
        reservation = reservation_for_update(reservation.pk)
        if reservation.status == S.QUEUED:
            _cancel_queued(actor, reservation)
            return reservation
        _wind_down(actor, reservation, S.CANCELLED, "reservation.cancel")
    return reservation


def preempt(actor: Actor, reservation_id: int, *, now: dt.datetime) -> Reservation:
    """Reclaim a borrowed reservation for another tenant's guaranteed request; the reason is the
    notice (it does not name that tenant: tenants do not learn of each other)."""
    # The caller (reserve) holds the reservation locks of the victim's pools (its own and those
    # of every node it holds: .locks.require_locked), which its wind-down bumps.
    reservation = reservation_for_update(reservation_id)
    notice = (
        f"preempted at {now:%Y-%m-%d %H:%M} UTC: borrowed capacity reclaimed for another "
        "tenant's guaranteed reservation"
    )
    # Freed from exactly the instant the claiming reservation starts.
    _wind_down(actor, reservation, S.PREEMPTED, "reservation.preempt", at=now, reason=notice)
    notices.preempted(reservation)
    return reservation


def extend(actor: Actor, principal: Principal, reservation: Reservation, new_end: dt.datetime) -> Reservation:
    """Move a live reservation's end later, if its GPUs are free and the quota allows."""
    check_manage(principal, reservation)
    if timezone.is_naive(new_end):
        raise Invalid("end needs a time zone", fields={"end": ["give an offset or Z"]})
    check_within_horizon("end", new_end)
    try:
        with transaction.atomic():
            # Same lock order as reserve: quota row, then the reservation lock, then the row.
            quota = quota_for_update(tenant_id=reservation.tenant_id, pool_id=reservation.pool_id)
            lock_booked(reservation)
            reservation = reservation_for_update(reservation.pk)
            if reservation.status not in Reservation.HOLDING:
                raise IllegalTransition(f"a reservation that is {reservation.status} cannot be extended")
            if new_end <= reservation.end:
                raise Invalid(
                    "the new end must be later (release to end early)", fields={"end": ["not after the current end"]}
                )
            if new_end - reservation.start > Reservation.MAX_WINDOW:
                raise Invalid(f"windows are at most {Reservation.MAX_WINDOW.days} days", fields={"end": ["too far"]})
            mine = ReservationAllocation.objects.filter(reservation=reservation)
            _check_extension_quota(reservation, quota, new_end)
            trees = extension_clash(reservation, new_end)
            if trees is not None:
                raise Conflict(trees, code="sharp")
            clash = (
                ReservationAllocation.objects.filter(
                    gpu_id__in=mine.values("gpu_id"), start__lt=new_end, end__gt=reservation.end
                )
                .exclude(reservation=reservation)
                .order_by("start")
                .first()
            )
            if clash is not None:
                raise Conflict(
                    f"its GPUs are reserved from {clash.start:%Y-%m-%d %H:%M} UTC; the longest extension ends then",
                    code="booked",
                )
            before = audit.snapshot(reservation)
            mine.update(end=new_end)
            touch(mine.values_list("node_id", flat=True), [reservation.pk])
            reservation.end = new_end
            reservation.save(update_fields=["end", "updated_at"])
            audit.record(actor, "reservation.extend", reservation, before=before, after=audit.snapshot(reservation))
    except IntegrityError as exc:
        raise Conflict("its GPUs were reserved concurrently; try again", code="booked") from exc
    return reservation


def _check_extension_quota(reservation: Reservation, quota: Quota | None, new_end: dt.datetime) -> None:
    limit = quota.limit_gpus if quota else 0
    held = usage(reservation.tenant_id, reservation.pool_id, reservation.end, new_end, exclude=reservation.pk)
    if held + reservation.gpus > limit:
        raise Conflict(
            f"over quota: extending keeps {reservation.gpus} GPUs while the tenant holds up to "
            f"{held} others in that time, of a limit of {limit}",
            code="over_quota",
        )


# ---------------------------------------------------------------- the periodic tick


def tick(now: dt.datetime | None = None) -> dict[str, int]:
    """Start due windows (placed → provisioning), expire ended ones (→ ending), re-enqueue stuck
    reconciles (orphaned ones sooner), announce reservations ending soon (once each).
    Idempotent; the Celery beat runs it every 10 s."""
    now = now or timezone.now()
    actor = Actor.system("task:scheduling.tick")
    counts = {"started": 0, "expired": 0, "reconciles": 0, "expiring": 0, "power_wanted": 0}
    with transaction.atomic():
        due = reservations_for_update(
            Reservation.objects.filter(status__in=Reservation.HOLDING, end__lte=now), skip_locked=True
        )
        for reservation in due:
            before = audit.snapshot(reservation)
            transition(reservation, S.ENDING)
            reservation.ended_at = now
            reservation.save()
            audit.record(actor, "reservation.expire", reservation, before=before, after=audit.snapshot(reservation))
            reconcile_subnets(reservation)
            enqueue_queue_pass(reservation.pool_id)
            counts["expired"] += 1
        starting = reservations_for_update(
            Reservation.objects.filter(status=S.PLACED, start__lte=now, end__gt=now), skip_locked=True
        )
        for reservation in starting:
            before = audit.snapshot(reservation)
            transition(reservation, S.PROVISIONING)
            reservation.save()
            audit.record(actor, "reservation.start", reservation, before=before, after=audit.snapshot(reservation))
            reconcile_subnets(reservation)
            counts["started"] += 1
        # The subnets still waiting for their fabric: P_Key not verified yet, or not verified gone.
        waiting = ReservationSubnet.objects.filter(
            Q(reservation__status=S.PROVISIONING, verified_at__isnull=True)
            | Q(reservation__status=S.ENDING, pkey_live=True)
        )
        stuck = set(waiting.filter(reservation__updated_at__lt=now - STUCK_AFTER).values_list("fabric_id", flat=True))
        stuck |= set(
            waiting.filter(reservation__updated_at__lt=now - ORPHANED_AFTER, reservation__fabric_error="")
            .exclude(fabric__changes__status__in=OPEN_CHANGES)
            .values_list("fabric_id", flat=True)
        )
        for fabric_id in stuck:
            enqueue_reconcile(fabric_id)
        counts["reconciles"] = len(stuck)
    with transaction.atomic():
        counts["power_wanted"] = power.wake_due(now)  # off nodes of reservations starting within their boot time
    with transaction.atomic():
        counts["expiring"] = notices.expiring(now)  # once per reservation, NOTIFY_EXPIRING_LEAD_S ahead
    return counts


# ---------------------------------------------------------------- the fabric's hooks (scheduling.fabric_hooks)


def waiting_for_power(reservations: QuerySet[Reservation]) -> set[int]:
    """Those of ``reservations`` holding a node that is not powered on (from now on)."""
    unpowered = ReservationAllocation.objects.filter(reservation__in=reservations, end__gt=timezone.now()).exclude(
        node__power_state=Node.Power.ON
    )
    return set(unpowered.values_list("reservation_id", flat=True))


def desired_partitions(fabric_id: int) -> list[PartitionRequest]:
    """Partitions of the reservations holding nodes that have a subnet on the fabric (registered
    with the fabric's hooks by :mod:`scheduling.fabric_hooks`): each with its P_Key and SL on
    this fabric and, as members, the port GUIDs of its nodes on this fabric only (its pods'
    virtual GUIDs on every fabric it touches: they are in no port's table, see
    :mod:`.virtual_guids`). One not ready yet whose nodes are not all on waits (a powered-off
    node's ports are down: nothing to push the P_Key to)."""
    holding = Reservation.objects.filter(subnets__fabric_id=fabric_id, status__in=Reservation.HOLDING)
    unpowered = waiting_for_power(holding.exclude(status=S.READY))
    subnet_of = {
        res_id: (pkey, sl)
        for res_id, pkey, sl in ReservationSubnet.objects.filter(fabric_id=fabric_id, reservation__in=holding)
        .exclude(reservation_id__in=unpowered)
        .values_list("reservation_id", "pkey", "sl")
    }
    reservations = sorted(holding.filter(pk__in=list(subnet_of)), key=lambda r: subnet_of[r.pk][0])
    nodes_of: dict[int, set[int]] = {r.pk: set() for r in reservations}
    for res_id, node_id in (
        ReservationAllocation.objects.filter(reservation__in=reservations, node__fabric_id=fabric_id)
        .values_list("reservation_id", "node_id")
        .distinct()
    ):
        nodes_of[res_id].add(node_id)
    all_nodes = set().union(*nodes_of.values()) if nodes_of else set()
    guids: dict[int, list[str]] = {}
    for node_id, guid in HCA.objects.filter(node_id__in=all_nodes).values_list("node_id", "port_guid"):
        guids.setdefault(node_id, []).append(guid)
    routed = routed_across(fabric_id, [r.pk for r in reservations])
    partitions = []
    for r in reservations:
        members = sorted(g for n in nodes_of[r.pk] for g in guids.get(n, []))
        members += ["ALL_ROUTERS"] if r.pk in routed else []
        pkey, sl = subnet_of[r.pk]
        partitions.append(
            PartitionRequest(
                reservation_id=r.pk,
                tenant_id=r.tenant_id,
                name=r.partition_name,
                pkey=pkey,
                sl=sl,
                members=[[guid, "full"] for guid in members] + [list(m) for m in r.virtual_guids or []],
            )
        )
        if (r.placement or {}).get("sharp"):  # it holds a SHARP tree (the ufm driver verifies SHARP)
            partitions[-1]["sharp"] = True
    return partitions


def routed_across(fabric_id: int, reservation_ids: list[int]) -> set[int]:
    """Those of ``reservation_ids`` that also touch a fabric at a site this fabric's site reaches
    through an InfiniBand router (:class:`~console.fabric.models.SiteLink` ``ib_router``): their
    partition here takes the subnet's router ports as full members (OpenSM's ``ALL_ROUTERS``),
    so that the router's ports carry the P_Key on this side. The router's own configuration is
    not the console's (docs/operations.md, "Partitions across sites"). UFM takes port GUIDs
    only: nothing is added on a UFM fabric."""
    fabric = Fabric.objects.filter(pk=fabric_id).values("driver", "site_id").first()
    if not reservation_ids or fabric is None or fabric["site_id"] is None or fabric["driver"] == Fabric.Driver.UFM:
        return set()
    site = fabric["site_id"]
    links = SiteLink.objects.filter(Q(a_id=site) | Q(b_id=site), kind=SiteLink.Kind.IB_ROUTER)
    reached = {b if a == site else a for a, b in links.values_list("a_id", "b_id")}
    if not reached:
        return set()
    elsewhere = ReservationSubnet.objects.filter(reservation_id__in=reservation_ids, fabric__site_id__in=reached)
    return set(elsewhere.exclude(fabric_id=fabric_id).values_list("reservation_id", flat=True))


def fabric_verified(fabric_id: int, present_pkeys: set[int], change_id: int) -> dict[str, int]:
    """A change of the fabric was verified with ``present_pkeys`` on their member ports: the
    subnets (on this fabric) of provisioning reservations whose P_Key is present are verified,
    and a reservation whose subnets are all verified becomes ready; the subnets of winding-down
    ones whose P_Key is gone are no longer live, and a reservation whose subnets are all gone
    frees its P_Key (ending → released). Each reservation is decided under its row lock, so two
    fabrics verifying at once (their sites' workers) do not both miss the last subnet."""
    actor = Actor.system(f"fabric.verify:change-{change_id}")
    now = timezone.now()
    counts = {"ready": 0, "released": 0}
    mine = ReservationSubnet.objects.filter(fabric_id=fabric_id)
    with transaction.atomic():
        arrived = mine.filter(reservation__status=S.PROVISIONING, verified_at__isnull=True, pkey__in=present_pkeys)
        provisioning = Reservation.objects.filter(pk__in=arrived.values("reservation_id"))
        unpowered = waiting_for_power(provisioning)
        for reservation in reservations_for_update(provisioning.exclude(pk__in=unpowered)):
            mine.filter(reservation=reservation).update(verified_at=now)
            if reservation.subnets.filter(verified_at__isnull=True).exists():
                continue  # another fabric it spans has not verified its P_Key yet
            before = audit.snapshot(reservation)
            transition(reservation, S.READY)
            reservation.ready_at = now
            reservation.fabric_error = ""
            reservation.save()
            audit.record(actor, "reservation.ready", reservation, before=before, after=audit.snapshot(reservation))
            notices.ready(reservation)
            counts["ready"] += 1
        leaving = mine.filter(pkey_live=True, reservation__status__in=WINDING_DOWN).exclude(pkey__in=present_pkeys)
        for reservation in reservations_for_update(Reservation.objects.filter(pk__in=leaving.values("reservation_id"))):
            mine.filter(reservation=reservation).exclude(pkey__in=present_pkeys).update(pkey_live=False)
            if reservation.subnets.filter(pkey_live=True).exists():
                continue  # still on another fabric it spans
            before = audit.snapshot(reservation)
            if reservation.status == S.ENDING:
                transition(reservation, S.RELEASED)
            reservation.pkey_live = False
            reservation.fabric_error = ""
            reservation.save()
            audit.record(actor, "reservation.released", reservation, before=before, after=audit.snapshot(reservation))
            counts["released"] += 1
    return counts


def reconcile_subnets(reservation: Reservation) -> None:
    """After commit, reconcile every fabric the reservation has a subnet on (its own fabric when
    it has none yet)."""
    fabrics = set(ReservationSubnet.objects.filter(reservation=reservation).values_list("fabric_id", flat=True))
    for fabric_id in sorted(fabrics or {reservation.fabric_id}):
        enqueue_reconcile(fabric_id)


def fabric_failed(fabric_id: int, change_id: int, error: str) -> int:
    """Record a failed or rolled-back change on the reservations waiting for it."""
    actor = Actor.system(f"fabric.verify:change-{change_id}")
    message = f"fabric change {change_id} failed: {error}"[:2000]
    waiting = 0
    with transaction.atomic():
        waiting_on = Reservation.objects.filter(subnets__fabric_id=fabric_id, status__in=(S.PROVISIONING, S.ENDING))
        for reservation in reservations_for_update(waiting_on):
            before = audit.snapshot(reservation)
            reservation.fabric_error = message
            reservation.save(update_fields=["fabric_error", "updated_at"])
            audit.record(
                actor, "reservation.fabric_failed", reservation, before=before, after=audit.snapshot(reservation)
            )
            if (
                reservation.status == S.PROVISIONING
            ):  # its partition never arrived (ending ones: not a failure of theirs)
                notices.failed(reservation, change_id, message)
            waiting += 1
    return waiting
