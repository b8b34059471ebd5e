"""Reservations: preview and reserve, through the pure placement engine, safely under concurrency.

``reserve`` takes its locks in one fixed order (the tenant's quota row, then the pool's reservation
lock, :func:`.locks.reservation_lock`), counts usage under those locks, builds the engine from database state (no
ORM in the engine's loop), inserts one allocation per GPU and retries on a serialization failure
or constraint violation. On PostgreSQL an exclusion constraint makes an overlap impossible even if
a caller skipped the locks; on SQLite ``BEGIN IMMEDIATE`` serialises writers. A request that
cannot be placed is stored as ``rejected`` with the engine's explanation.

The engine gets every reservation's owner (tenant, borrowed, priority rank) and the pool's
topology-shaped guarantees (``Quota.guaranteed_leaf_groups``), so a non-borrowed request never
fragments the pool past another tenant's "N whole leaf groups", and reclaim of borrowed capacity
takes lower priority classes first (:data:`.snapshots.PRIORITY_RANK`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden
from console.tenancy.models import Principal, Tenant
from scheduling.models import Pool, Quota, Reservation
from scheduling.placement import Placement
from scheduling.services import offers, pool_rows, snapshots
from scheduling.services.decision import (
    MAX_SIZE,
    MAX_WINDOW,
    PAST_TOLERANCE,
    Decision,
    ReservationRequest,
    constraint_columns,
    decide,
    engine_request,
    explanation,
    pool_of,
    tenant_and_pool,
    tenant_of,
    window_of,
)
from scheduling.services.grant import grant
from scheduling.services.lifecycle import preempt
from scheduling.services.locks import (
    WiderLock,
    pool_and_overlapping_lock,
    pool_lock_rows,
    quota_for_update,
    require_locked,
    reservations_for_update,
)
from scheduling.services.naming import default_name
from scheduling.services.site_choice import Near, decide_at_sites, resolve_near, site_constraints
from scheduling.services.snapshots import Snapshot, lend, priority_rank

# The decision's names stay importable from here (the service's public face).
__all__ = [
    "MAX_SIZE",
    "MAX_WINDOW",
    "PAST_TOLERANCE",
    "Decision",
    "ReservationRequest",
    "Snapshot",
    "Unplaced",
    "constraint_columns",
    "decide",
    "engine_request",
    "explanation",
    "lend",
    "pool_of",
    "preview",
    "priority_rank",
    "reserve",
    "snapshot",
    "tenant_of",
    "window_of",
]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock


#: Called inside the reserve transaction with a request that could not be placed; returns True
#: when it recorded the reservation otherwise (queued) instead of rejected.
Unplaced = Callable[[Reservation, "Snapshot", "Decision", ReservationRequest], bool]


# ---------------------------------------------------------------- engine from database state


def snapshot(pool: Pool, now: dt.datetime) -> Snapshot:
    """A fresh, private engine of the pool at ``now`` (:func:`.snapshots.snapshot`); the hot paths
    lend the process's cached one instead (:func:`.snapshots.lend`)."""
    return snapshots.snapshot(pool, now)


# ---------------------------------------------------------------- preview


def preview(principal: Principal, request: ReservationRequest) -> dict[str, Any]:
    """Where the request would land now, with quota figures or the explained rejection.

    Runs exactly the code ``reserve`` runs, without locks and without writing anything.
    """
    tenant, pool = tenant_and_pool(principal, request)
    near = resolve_near(tenant, request.near)
    quota = Quota.objects.filter(tenant=tenant, pool=pool).first()
    with lend(pool, timezone.now(), tenant.pk) as snap:
        decision, note = decide_at_sites(snap, request, tenant, pool, quota, near)
        described = snap.named.describe(decision.result) if isinstance(decision.result, Placement) else None
        alternatives = offers.offers(snap, request, tenant, pool, quota, decision, extra=site_constraints(note))
    body: dict[str, Any] = {
        "placeable": decision.placed,
        "start": decision.start,
        "end": decision.end,
        "gpus": decision.gpus,
        "borrowed": decision.borrowed if decision.placed else False,
        "quota": {
            "limit_gpus": quota.limit_gpus if quota else 0,
            "guaranteed_gpus": quota.guaranteed_gpus if quota else 0,
            "held_gpus": decision.held_gpus,
        },
        "placement": None,
        "preempts": [],
        "rejection": None,
    }
    if isinstance(decision.result, Placement):
        body["placement"] = described
        if described is not None and note is not None and note.span:
            described["span"] = note.span
        body["preempts"] = [int(b[1:]) for b in decision.result.preempts]
    else:
        body["rejection"] = explanation(decision)
    body.update(offers.quote(pool, request, decision))
    body["offers"] = alternatives
    body["site_choice"] = note.explanation() if note is not None else None
    return body


# ---------------------------------------------------------------- reserve


def reserve(
    actor: Actor, principal: Principal, request: ReservationRequest, *, unplaced: Unplaced | None = None
) -> Reservation:
    """Place and record a reservation (status placed/provisioning) or a rejected one
    (``unplaced`` may record it otherwise: the queue).

    Losers of a race that cannot be retried into a decision get :class:`Conflict` (409).
    """
    if not principal.can_write:
        raise Forbidden("read-only access: reserving changes data")
    tenant, pool = tenant_and_pool(principal, request)
    window_of(request, timezone.now())  # a 400 before any lock is taken
    near = resolve_near(tenant, request.near)
    wider: frozenset[int] = frozenset()
    for _attempt in range(MAX_ATTEMPTS):
        try:
            return _reserve_once(actor, principal, tenant, pool, request, unplaced, wider, near)
        except WiderLock as exc:  # the pools to lock grew meanwhile, or a preemption needs more
            log.info("reservation retry with the reservation locks of pools %s", sorted(exc.pools))
            wider = exc.pools
        except IntegrityError as exc:
            log.info("reservation retry after constraint violation: %s", exc)
            snapshots.forget(pool.pk)  # a writer that bypassed snapshots.touch: load the pool whole
        except OperationalError as exc:
            if not _retryable(exc):
                raise
            log.info("reservation retry after %s", exc)
    raise Conflict("the capacity was taken by concurrent requests; try again")


def _retryable(exc: OperationalError) -> bool:
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate in RETRYABLE_SQLSTATES or "database is locked" in str(exc)


def _reserve_once(
    actor: Actor,
    principal: Principal,
    tenant: Tenant,
    pool: Pool,
    request: ReservationRequest,
    unplaced: Unplaced | None,
    wider: frozenset[int],
    near: Near | None,
) -> Reservation:
    with transaction.atomic(), contextlib.ExitStack() as stack:
        if wider:  # a retry: the locks a grown set or a preemption needs (their rows exist)
            pool_lock_rows(wider)
        quota = quota_for_update(tenant_id=tenant.pk, pool_id=pool.pk)
        # A SHARP placement takes aggregation trees the fabric's pools share: lock them all.
        sharp = bool(request.constraints.get("sharp"))
        # The pool as it is under the lock, read with the lock's re-read of the pools of its nodes:
        # its membership (version, the topology's key) may have changed while this waited
        # (set_pool_nodes holds the lock while it changes them).
        under_lock: list[Pool] = []
        locked = pool_and_overlapping_lock(
            pool.pk,
            also=wider,
            restart=True,
            fabric_wide=sharp,
            reread=lambda: pool_rows.reread_under_lock(pool.pk, under_lock),
        )
        pool = under_lock[-1]
        # The clock is read after the locks: waiting for them may take a while; the cached
        # snapshot is brought up to date under them.
        snap = stack.enter_context(lend(pool, timezone.now(), tenant.pk, facts=True))
        decision, note = decide_at_sites(snap, request, tenant, pool, quota, near)
        reservation = Reservation(
            tenant=tenant,
            pool=pool,
            fabric=pool.fabric,
            name=request.name[:100] or default_name(tenant, decision.gpus),
            created_by_id=principal.user_id,
            priority_class=request.priority_class,
            requested_gpus=request.gpus,
            requested_nodes=request.nodes,
            start=decision.start,
            end=decision.end,
            near_site_id=near.site_id if near else None,
            near_dataset_id=near.dataset_id if near else None,
            span_sites=request.span_sites,
            **constraint_columns(request.constraints),
        )
        if note is not None:  # a pool at several sites: where it goes and why
            reservation.explanation = {"site": note.explanation()}
            reservation.reason = note.message
            if note.fabric_id is not None and note.fabric_id != pool.fabric_id:
                reservation.fabric_id = note.fabric_id
        if not isinstance(decision.result, Placement):
            if unplaced is not None and unplaced(reservation, snap, decision, request):
                return reservation
            reservation.status = Reservation.Status.REJECTED
            reservation.reason = decision.result.message
            reservation.explanation = {**reservation.explanation, **explanation(decision)}
            reservation.save()
            audit.record(actor, "reservation.reject", reservation, after=audit.snapshot(reservation))
            return reservation
        placement = decision.result
        victims = [int(v[1:]) for v in placement.preempts]
        # Winding a victim down bumps the pools of all its nodes: their locks must be held
        # already (else roll back and take them all first, in one call: WiderLock).
        require_locked(locked, victims)
        # Every victim's row before winding any down: once a wind-down has bumped the pool's
        # booking generation (snapshots.touch) this transaction waits on no other row.
        list(reservations_for_update(Reservation.objects.filter(pk__in=victims)))
        for victim in placement.preempts:
            preempt(actor, int(victim[1:]), now=snap.now)
        reservation.borrowed = decision.borrowed
        grant(
            actor,
            reservation,
            snap.named,
            placement,
            now=snap.now,
            action="reservation.create",
            window=(decision.start, decision.end),
            node_power=snap.power,
            fabric=snap.fabric,
            new_id=snap.reservation_id,
        )
        if note is not None and note.span is not None:  # the ring all-reduce cost, with the placement
            reservation.placement["span"] = note.span
            Reservation.objects.filter(pk=reservation.pk).update(placement=reservation.placement)
    return reservation
