"""One placement decision, shared by preview, reserve, the offers and the queue: the request, its
validation (window, size, constraints, tenant, pool), the quota check and the engine's answer.

Plain functions over a :class:`.snapshots.Snapshot`; nothing here writes or locks (the callers do).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.utils import timezone

from console.tenancy.errors import Forbidden, Invalid, NotFound
from console.tenancy.horizon import check_within_horizon
from console.tenancy.models import Principal, Tenant
from scheduling.models import HIGH_PRIORITY_CLASSES, Pool, PriorityClass, Quota, Reservation
from scheduling.placement import Owner, Placement, Rejection, Request, reclaim_plan
from scheduling.placement.queue import packed_limit
from scheduling.placement.registry import ConstraintError, build_constraints
from scheduling.placement.types import Constraint
from scheduling.services import pool_rows, power
from scheduling.services.quotas import peak_within, usage
from scheduling.services.snapshots import Snapshot, priority_rank
from scheduling.services.topology import annotated_pools

MAX_WINDOW = Reservation.MAX_WINDOW
#: A start this far in the past is taken as "now" (clock skew, form latency); older is an error.
PAST_TOLERANCE = dt.timedelta(minutes=5)
MAX_SIZE = 1_000_000


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
    #: Where its data or users are: a site (slug or name) or ``dataset:<name>`` (:mod:`.site_choice`).
    near: str = ""
    #: The gang may span sites (default: one site, the nearest that can hold it).
    span_sites: bool = False


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


def tenant_and_pool(principal: Principal, request: ReservationRequest) -> tuple[Tenant, Pool]:
    """:func:`tenant_of` and :func:`pool_of` in one statement (:func:`.pool_rows.pool_row`), with
    the same errors in the same order (a missing tenant before a missing pool)."""
    if principal.role is None:
        raise Forbidden("you have no role in this console")
    tenant_id = principal.tenant_id if not principal.sees_all_tenants else request.tenant_id
    read = pool_rows.pool_row(request.pool_id, tenant_id=tenant_id) if tenant_id is not None else None
    tenant = read.tenant if read is not None else None
    if tenant is None or read is None or read.pool is None:  # the errors as the reads one by one give them
        tenant = tenant_of(principal, request)
        if read is None or read.pool is None:
            raise NotFound("no such pool")
    return tenant, read.pool


def pool_of(pool_id: int) -> Pool:
    """The pool with its fabric, its design revision's time and whether it has nodes on other
    fabrics (the key of the cached topology, :func:`.topology.annotated_pools`), in one query."""
    pool = annotated_pools().filter(pk=pool_id).first()
    if pool is None:
        raise NotFound("no such pool")
    return pool


# ---------------------------------------------------------------- engine from database state


def _class_refusal(
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota,
    gpus: int,
    start: dt.datetime,
    end: dt.datetime,
) -> Rejection | None:
    """The quota's entitlement to the request's priority class: a class it does not allow, or
    high-priority GPUs past its share, is refused naming what it allows."""
    allowed = list(quota.classes or [])
    if request.priority_class not in allowed:
        message = (
            f"priority class {request.priority_class!r} is not in tenant {tenant.name!r}'s quota in pool "
            f"{pool.name!r}: it allows {', '.join(allowed) or 'none'} (an operator grants classes)"
        )
        return Rejection("class_not_allowed", message, {"allowed_classes": allowed})
    if request.priority_class in HIGH_PRIORITY_CLASSES and quota.high_priority_gpus is not None:
        held = usage(tenant.pk, pool.pk, start, end, classes=HIGH_PRIORITY_CLASSES)
        if held + gpus > quota.high_priority_gpus:
            message = (
                f"over the high-priority share: {gpus} {request.priority_class} GPUs requested; tenant "
                f"{tenant.name!r} holds up to {held} of its {quota.high_priority_gpus} in pool {pool.name!r} "
                f"then (other classes allowed: {', '.join(c for c in allowed if c not in HIGH_PRIORITY_CLASSES)})"
            )
            details = {"high_priority_gpus": quota.high_priority_gpus, "held_high_priority_gpus": held}
            return Rejection("over_high_priority_share", message, details)
    return None


def decide(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota | None,
    *,
    extra: tuple[Constraint, ...] = (),
) -> Decision:
    """Quota check, then placement (with reclaim of borrowed capacity inside a guarantee).
    ``extra``: constraints the service adds to the request's own (a multi-site pool's
    :class:`~scheduling.placement.sites.OnSites`).

    The request is the tenant's, borrowed or not: a non-borrowed one must keep the other
    tenants' shaped guarantees placeable; within its guarantee a tenant may take back any
    borrowed capacity of others, lower priority classes first.
    """
    start, end = window_of(request, snap.now)
    wanted = engine_request(request, start, end)
    if extra:
        wanted = replace(wanted, constraints=(*wanted.constraints, *extra))
    engine = snap.engine
    shape = engine.shape(wanted)
    gpus = shape.nodes * shape.gpus_per_node if shape else (request.gpus or 0)
    if snap.held is not None and snap.held[0] == tenant.pk:  # read with the snapshot
        held = peak_within(snap.held[1], start.timestamp(), end.timestamp())
    else:
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
    refused = _class_refusal(request, tenant, pool, quota, gpus, start, end)
    if refused is not None:
        return Decision(start, end, gpus, quota, held, True, refused, str(refused.reason))
    borrowed = held + gpus > quota.guaranteed_gpus
    owner = Owner(str(tenant.pk), borrowed, priority_rank(request.priority_class))
    wanted = replace(wanted, owner=owner)
    limit = packed_limit(engine, wanted) if request.packed else None
    if limit is not None:
        wanted = replace(wanted, constraints=(*wanted.constraints, limit))
    # Power (scheduling.services.power): nodes that are on first, off ones only if they boot in time.
    fit = power.fit_for(snap, pool, start)
    if fit is not None:
        engine, wanted = power.apply_fit(fit, engine, wanted)
    result = engine.preview(wanted, explain=True)
    if isinstance(result, Rejection) and not borrowed:
        # Within its guarantee the tenant may take back capacity others borrowed.
        reclaimed = reclaim_plan(engine, wanted)
        if isinstance(reclaimed, Placement):
            result = reclaimed
    if fit is not None and isinstance(result, Rejection):
        result = power.explain(fit, engine, wanted, result)
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
