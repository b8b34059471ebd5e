"""Reservations: preview and reserve, through the pure placement engine, safely under concurrency.

``reserve`` takes its locks in one fixed order (the tenant's quota row, then the pool's node rows
in primary-key order), counts usage under those locks, builds the engine from database state (no
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
import dataclasses
import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.db import IntegrityError, OperationalError, transaction
from django.utils import timezone

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden, Invalid, NotFound
from console.tenancy.horizon import check_within_horizon
from console.tenancy.models import Principal, Tenant
from scheduling.models import (
    Node,
    Pool,
    PriorityClass,
    Quota,
    Reservation,
)
from scheduling.placement import (
    Owner,
    Placement,
    Rejection,
    Request,
    reclaim_plan,
)
from scheduling.placement.queue import packed_limit
from scheduling.placement.registry import ConstraintError, build_constraints
from scheduling.services import snapshots
from scheduling.services.grant import grant
from scheduling.services.lifecycle import preempt
from scheduling.services.locks import lock_nodes, quota_for_update, reservations_for_update
from scheduling.services.quotas import usage
from scheduling.services.snapshots import Snapshot, lend, priority_rank

log = logging.getLogger(__name__)

MAX_WINDOW = Reservation.MAX_WINDOW
#: A start this far in the past is taken as "now" (clock skew, form latency); older is an error.
PAST_TOLERANCE = dt.timedelta(minutes=5)
MAX_SIZE = 1_000_000
MAX_ATTEMPTS = 5
RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock


@dataclass(frozen=True, kw_only=True)
class ReservationRequest:
    """What a tenant asks for. Size: ``gpus`` (whole nodes above one node) or ``nodes``.

    Window: ``start`` (default now) and ``end`` or ``duration``. Operators name ``tenant_id``.
    ``constraints`` maps the parameters of the registered constraint types
    (:mod:`scheduling.placement.registry`: ``gpu_model``, ``same_leaf``, ``max_switch_hops``,
    ``rail_aligned``, …) to values; an absent parameter takes its default.
    """

    pool_id: int
    gpus: int | None = None
    nodes: int | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    duration: dt.timedelta | None = None
    priority_class: str = PriorityClass.TRAINING
    constraints: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    name: str = ""
    tenant_id: int | None = None
    #: ``start: "asap"``: queued when it does not fit now (:mod:`.queue`); needs ``duration``.
    asap: bool = False
    #: Patience of an asap request (default: the pool's ``default_max_wait``).
    max_wait: dt.timedelta | None = None
    #: Only a packed placement (:func:`scheduling.placement.queue.packed_limit`) is acceptable.
    packed: bool = False


#: Called inside the reserve transaction with a request that could not be placed; returns True
#: when it recorded the reservation otherwise (queued) instead of rejected.
Unplaced = Callable[[Reservation, "Snapshot", "Decision", ReservationRequest], bool]


@dataclass
class Decision:
    """The outcome of one placement attempt (shared by preview and reserve)."""

    start: dt.datetime
    end: dt.datetime
    gpus: int
    quota: Quota | None
    held_gpus: int
    borrowed: bool
    result: Placement | Rejection
    code: str = ""  # rejection code: no_quota | over_quota | the engine's reason

    @property
    def placed(self) -> bool:
        return isinstance(self.result, Placement)


# ---------------------------------------------------------------- validation


def window_of(request: ReservationRequest, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
    """The request's half-open window, or a 400 naming the field."""
    if request.asap and (request.start is not None or request.end is not None or request.duration is None):
        raise Invalid("start asap takes a duration, not start or end", fields={"start": ["asap needs a duration"]})
    if request.max_wait is not None and not request.asap:
        raise Invalid("max_wait applies to asap requests", fields={"max_wait_minutes": ["only with start asap"]})
    start = request.start or now
    for field, value in (("start", request.start), ("end", request.end)):
        if value is not None and timezone.is_naive(value):
            raise Invalid(f"{field} needs a time zone", fields={field: ["give an offset or Z"]})
        check_within_horizon(field, value, now=now)
    if start < now - PAST_TOLERANCE:
        raise Invalid("the window starts in the past", fields={"start": ["in the past"]})
    start = max(start, now)
    if request.end is not None and request.duration is not None:
        raise Invalid("give end or duration, not both", fields={"end": ["or duration"]})
    if request.duration is not None and request.duration <= dt.timedelta(0):
        raise Invalid("the duration must be positive", fields={"duration": ["must be positive"]})
    end = request.end or (start + request.duration if request.duration else None)
    if end is None:
        raise Invalid("give end or duration", fields={"end": ["required (or duration)"]})
    if end <= start:
        raise Invalid("the window must end after it starts", fields={"end": ["not after start"]})
    if end - start > MAX_WINDOW:
        raise Invalid(f"windows are at most {MAX_WINDOW.days} days", fields={"end": ["too far"]})
    return start, end


def engine_request(request: ReservationRequest, start: dt.datetime, end: dt.datetime) -> Request:
    """The engine's :class:`Request`; size and constraint errors become 400s."""
    for field in ("gpus", "nodes"):
        value = getattr(request, field)
        if value is not None and not 1 <= value <= MAX_SIZE:
            raise Invalid(f"{field} must be between 1 and {MAX_SIZE}", fields={field: ["range"]})
    try:
        constraints = build_constraints(request.constraints)
    except ConstraintError as exc:
        raise Invalid(str(exc), fields={exc.param: [exc.code]}) from None
    if request.priority_class not in PriorityClass.values:
        raise Invalid("unknown priority class", fields={"priority_class": PriorityClass.values})
    try:
        return Request(
            gpus=request.gpus,
            nodes=request.nodes,
            start=start.timestamp(),
            end=end.timestamp(),
            constraints=constraints,
        )
    except ValueError as exc:
        raise Invalid(str(exc), fields={"gpus": [str(exc)]}) from None


def constraint_columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """The reservation row's fields for the constraint parameters asked: the built-in ones in
    columns of the same name, every other one in ``constraint_params``."""
    columns = {f.name for f in Reservation._meta.concrete_fields} - {"constraint_params"}
    given = {name: value for name, value in values.items() if value is not None}
    fields = {name: value for name, value in given.items() if name in columns}
    fields["constraint_params"] = {name: value for name, value in given.items() if name not in columns}
    return fields


def tenant_of(principal: Principal, request: ReservationRequest) -> Tenant:
    """Tenant users reserve for their own tenant (a posted tenant is ignored); operators name one."""
    if principal.role is None:
        raise Forbidden("you have no role in this console")
    if not principal.sees_all_tenants:
        assert principal.tenant_id is not None  # Membership's check constraint: tenant roles have a tenant
        return Tenant.objects.get(pk=principal.tenant_id)
    if request.tenant_id is None:
        raise Invalid("operators must say which tenant reserves", fields={"tenant": ["required"]})
    tenant = Tenant.objects.filter(pk=request.tenant_id).first()
    if tenant is None:
        raise Invalid("unknown tenant", fields={"tenant": ["unknown"]})
    return tenant


def pool_of(pool_id: int) -> Pool:
    pool = Pool.objects.select_related("fabric").filter(pk=pool_id).first()
    if pool is None:
        raise NotFound("no such pool")
    return pool


# ---------------------------------------------------------------- engine from database state


def snapshot(pool: Pool, now: dt.datetime) -> Snapshot:
    """A fresh, private engine of the pool at ``now`` (:func:`.snapshots.snapshot`); the hot paths
    lend the process's cached one instead (:func:`.snapshots.lend`)."""
    return snapshots.snapshot(pool, now)


def decide(snap: Snapshot, request: ReservationRequest, tenant: Tenant, pool: Pool, quota: Quota | None) -> Decision:
    """Quota check, then placement (with reclaim of borrowed capacity inside a guarantee).

    The request is the tenant's, borrowed or not: a non-borrowed one must keep the other
    tenants' shaped guarantees placeable; within its guarantee a tenant may take back any
    borrowed capacity of others, lower priority classes first.
    """
    start, end = window_of(request, snap.now)
    wanted = engine_request(request, start, end)
    engine = snap.engine
    shape = engine.shape(wanted)
    gpus = shape.nodes * shape.gpus_per_node if shape else (request.gpus or 0)
    held = usage(tenant.pk, pool.pk, start, end)
    if quota is None:
        message = f"tenant {tenant.name!r} has no quota in pool {pool.name!r}"
        return Decision(start, end, gpus, None, held, False, Rejection("no_quota", message), "no_quota")
    if held + gpus > quota.limit_gpus:
        message = (
            f"over quota: {gpus} GPUs requested; tenant {tenant.name!r} already holds up to {held} "
            f"GPUs in pool {pool.name!r} in that window, of a limit of {quota.limit_gpus} "
            f"({quota.guaranteed_gpus} guaranteed + {quota.borrow_limit_gpus} borrowable); "
            f"headroom {max(0, quota.limit_gpus - held)} GPUs"
        )
        details = {
            "requested_gpus": gpus,
            "held_gpus": held,
            "limit_gpus": quota.limit_gpus,
            "guaranteed_gpus": quota.guaranteed_gpus,
            "borrow_limit_gpus": quota.borrow_limit_gpus,
        }
        rejection = Rejection("over_quota", message, details)
        return Decision(start, end, gpus, quota, held, True, rejection, "over_quota")
    borrowed = held + gpus > quota.guaranteed_gpus
    owner = Owner(str(tenant.pk), borrowed, priority_rank(request.priority_class))
    wanted = replace(wanted, owner=owner)
    limit = packed_limit(engine, wanted) if request.packed else None
    if limit is not None:
        wanted = replace(wanted, constraints=(*wanted.constraints, limit))
    result = engine.preview(wanted, explain=True)
    if isinstance(result, Rejection) and not borrowed:
        # Within its guarantee the tenant may take back capacity others borrowed.
        reclaimed = reclaim_plan(engine, wanted)
        if isinstance(reclaimed, Placement):
            result = reclaimed
    code = "" if isinstance(result, Placement) else str(result.reason)
    return Decision(start, end, gpus, quota, held, borrowed, result, code)


def explanation(decision: Decision) -> dict[str, Any]:
    """The rejection's figures, with epoch times as ISO strings."""
    if not isinstance(decision.result, Rejection):
        return {}
    details: dict[str, Any] = {}
    for key, value in decision.result.details.items():
        if key in {"window_start", "window_end", "earliest_start", "earliest_end"} and isinstance(value, int | float):
            value = dt.datetime.fromtimestamp(value, dt.UTC).isoformat()
        details[key] = value
    return {"reason": decision.code, "message": decision.result.message, "details": details}


# ---------------------------------------------------------------- preview


def preview(principal: Principal, request: ReservationRequest) -> dict[str, Any]:
    """Where the request would land now, with quota figures or the explained rejection.

    Runs exactly the code ``reserve`` runs, without locks and without writing anything.
    """
    tenant = tenant_of(principal, request)
    pool = pool_of(request.pool_id)
    quota = Quota.objects.filter(tenant=tenant, pool=pool).first()
    with lend(pool, timezone.now()) as snap:
        decision = decide(snap, request, tenant, pool, quota)
        described = snap.named.describe(decision.result) if isinstance(decision.result, Placement) else None
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
        body["preempts"] = [int(b[1:]) for b in decision.result.preempts]
    else:
        body["rejection"] = explanation(decision)
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
    tenant = tenant_of(principal, request)
    pool = pool_of(request.pool_id)
    window_of(request, timezone.now())  # a 400 before any lock is taken
    for _attempt in range(MAX_ATTEMPTS):
        try:
            return _reserve_once(actor, principal, tenant, pool, request, unplaced)
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
) -> Reservation:
    with transaction.atomic(), contextlib.ExitStack() as stack:
        quota = quota_for_update(tenant_id=tenant.pk, pool_id=pool.pk)
        lock_nodes(Node.objects.filter(pools=pool).values("pk"))
        # The clock is read after the locks: waiting for them may take a while; the cached
        # snapshot is brought up to date under them.
        snap = stack.enter_context(lend(pool, timezone.now()))
        decision = decide(snap, request, tenant, pool, quota)
        reservation = Reservation(
            tenant=tenant,
            pool=pool,
            fabric_id=pool.fabric_id,
            name=request.name[:100],
            created_by_id=principal.user_id,
            priority_class=request.priority_class,
            requested_gpus=request.gpus,
            requested_nodes=request.nodes,
            start=decision.start,
            end=decision.end,
            **constraint_columns(request.constraints),
        )
        if not isinstance(decision.result, Placement):
            if unplaced is not None and unplaced(reservation, snap, decision, request):
                return reservation
            reservation.status = Reservation.Status.REJECTED
            reservation.reason = decision.result.message
            reservation.explanation = explanation(decision)
            reservation.save()
            audit.record(actor, "reservation.reject", reservation, after=audit.snapshot(reservation))
            return reservation
        placement = decision.result
        # Every victim's row before winding any down: once a wind-down has bumped the pool's
        # booking generation (snapshots.touch) this transaction waits on no other row.
        list(reservations_for_update(Reservation.objects.filter(pk__in=[int(v[1:]) for v in placement.preempts])))
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
        )
    return reservation
