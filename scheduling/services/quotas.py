"""Tenants' quotas per pool: guarantee + borrowing, usage and headroom, SLs per priority class.

Usage is the **peak** number of GPUs a tenant holds at once over a window (a sweep over its live
reservations), so future reservations that never overlap do not add up, and a quota holds at every
instant. The reservation service locks the quota row before counting.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from console.fabric.changes.qos import table_sl
from console.fabric.opensm.qos_table import DEFAULT_TABLE
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal, Tenant
from console.tenancy.permissions import require_operator
from scheduling.models import Pool, PriorityClass, Quota, Reservation
from scheduling.services.locks import quota_by_pk_for_update, quota_for_update
from scheduling.services.topology import topology_for_pool

DEFAULT_SLS = {"training": 1, "inference": 2, "best-effort": 0}
FAR_FUTURE = dt.datetime.max.replace(tzinfo=dt.UTC)


def sl_for(qos_table: Any, levels: tuple[int, int, int] | list[int] | None, priority_class: str) -> int:
    """The SL of a priority class on a fabric: its QoS table (``FabricQos.table``; none saved: the
    default table, which is what a push renders, so the SL maps to the class's VL), else (a class
    the table has no row for) its ServiceLevels ``levels``, else settings defaults."""
    from_table = table_sl(qos_table if qos_table is not None else DEFAULT_TABLE.to_json(), priority_class)
    return from_table if from_table is not None else level_of(levels, priority_class)


def level_of(levels: tuple[int, int, int] | list[int] | None, priority_class: str) -> int:
    """The SL of a priority class from a fabric's ``(training, inference, best_effort)`` levels
    (None: no ServiceLevels row, the settings' defaults)."""
    if levels is not None:
        training, inference, best_effort = levels
        return {
            PriorityClass.TRAINING: training,
            PriorityClass.INFERENCE: inference,
            PriorityClass.BEST_EFFORT: best_effort,
        }[PriorityClass(priority_class)]
    defaults = {**DEFAULT_SLS, **getattr(settings, "SCHEDULING_SERVICE_LEVELS", {})}
    return int(defaults[priority_class])


def peak_usage(windows: Iterable[tuple[Any, Any, int]]) -> int:
    """Most GPUs held at once by half-open ``(start, end, gpus)`` windows (datetimes, or epoch
    seconds: any ordered times)."""
    events: list[tuple[Any, int]] = []
    for start, end, gpus in windows:
        events.append((start, gpus))
        events.append((end, -gpus))
    # Ends sort before starts at the same instant: [a, b) and [b, c) never overlap.
    events.sort(key=lambda e: (e[0], e[1]))
    peak = current = 0
    for _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak


def usage(
    tenant_id: int,
    pool_id: int,
    start: dt.datetime,
    end: dt.datetime = FAR_FUTURE,
    *,
    exclude: int | None = None,
    borrowed_only: bool = False,
    classes: Iterable[str] | None = None,
) -> int:
    """Peak GPUs the tenant holds in the pool over ``[start, end)`` (in ``classes`` only, when
    given)."""
    queryset = Reservation.objects.live().filter(tenant_id=tenant_id, pool_id=pool_id, start__lt=end, end__gt=start)
    if classes is not None:
        queryset = queryset.filter(priority_class__in=list(classes))
    if exclude is not None:
        queryset = queryset.exclude(pk=exclude)
    if borrowed_only:
        queryset = queryset.filter(borrowed=True)
    return peak_within(queryset.values_list("start", "end", "gpus"), start, end)


def peak_within(windows: Iterable[tuple[Any, Any, int]], start: Any, end: Any) -> int:
    """Peak GPUs of ``(start, end, gpus)`` windows over ``[start, end)`` (datetimes or epochs)."""
    return peak_usage((max(s, start), min(e, end), g) for s, e, g in windows if s < end and e > start)


def quota_usage(quota: Quota, *, now: dt.datetime | None = None) -> dict[str, int]:
    """Guarantee, limit, GPUs used now (and borrowed), the future peak, the headroom now and the
    GPUs of queued requests (apart: they hold nothing yet)."""
    return quota_usages([quota], now=now)[quota.pk]


def quota_usages(quota_rows: Iterable[Quota], *, now: dt.datetime | None = None) -> dict[int, dict[str, int]]:
    """:func:`quota_usage` of many quotas by quota id, from one query (list pages and endpoints)."""
    now = now or timezone.now()
    second = now + dt.timedelta(seconds=1)
    quota_rows = list(quota_rows)
    windows: dict[tuple[int, int], list[tuple[dt.datetime, dt.datetime, int, bool]]] = {}
    queued: dict[tuple[int, int], int] = {}
    if quota_rows:
        waiting = Reservation.objects.filter(
            status=Reservation.Status.QUEUED,
            tenant_id__in={q.tenant_id for q in quota_rows},
            pool_id__in={q.pool_id for q in quota_rows},
        )
        for tenant_id, pool_id, total in (
            waiting.order_by()
            .values("tenant_id", "pool_id")
            .annotate(total=Sum("gpus"))
            .values_list("tenant_id", "pool_id", "total")
        ):
            queued[(tenant_id, pool_id)] = total or 0
        live = Reservation.objects.live().filter(
            tenant_id__in={q.tenant_id for q in quota_rows}, pool_id__in={q.pool_id for q in quota_rows}, end__gt=now
        )
        for tenant_id, pool_id, start, end, gpus, borrowed in live.values_list(
            "tenant_id", "pool_id", "start", "end", "gpus", "borrowed"
        ):
            windows.setdefault((tenant_id, pool_id), []).append((start, end, gpus, borrowed))
    result: dict[int, dict[str, int]] = {}
    for quota in quota_rows:
        held = windows.get((quota.tenant_id, quota.pool_id), [])
        # the same windows usage() sweeps: [now, now + 1 s) for "now", [now, ∞) for the future peak
        this_second = [(max(s, now), min(e, second), g, b) for s, e, g, b in held if s < second]
        used_now = peak_usage((s, e, g) for s, e, g, _ in this_second)
        result[quota.pk] = {
            "guaranteed_gpus": quota.guaranteed_gpus,
            "borrow_limit_gpus": quota.borrow_limit_gpus,
            "limit_gpus": quota.limit_gpus,
            "used_gpus": used_now,
            "borrowed_gpus": peak_usage((s, e, g) for s, e, g, b in this_second if b),
            "peak_future_gpus": peak_usage((max(s, now), e, g) for s, e, g, _ in held),
            "headroom_gpus": max(0, quota.limit_gpus - used_now),
            # Queued requests hold nothing: they are counted apart, not in use or headroom.
            "queued_gpus": queued.get((quota.tenant_id, quota.pool_id), 0),
        }
    return result


def pool_capacity_gpus(pool: Pool) -> int:
    """All GPUs of the pool's nodes."""
    return pool.nodes.aggregate(total=Sum("gpus"))["total"] or 0


class Unset:
    """A keyword not given (as opposed to None)."""


UNSET = Unset()


def _classes(classes: Sequence[str]) -> list[str]:
    """The classes of a quota, checked: known ones, at least one, in the catalogue's order."""
    if isinstance(classes, str) or not isinstance(classes, Sequence):
        raise Invalid("classes is a list of priority classes", fields={"classes": ["a list"]})
    unknown = [c for c in classes if c not in PriorityClass.values]
    if unknown or not classes:
        raise Invalid(
            f"classes are some of {', '.join(PriorityClass.values)}",
            fields={"classes": [f"unknown: {', '.join(map(str, unknown))}" if unknown else "at least one"]},
        )
    return [c for c in PriorityClass.values if c in classes]


def set_quota(
    actor: Actor,
    principal: Principal,
    *,
    tenant: Tenant,
    pool: Pool,
    guaranteed_gpus: int,
    borrow_limit_gpus: int = 0,
    guaranteed_leaf_groups: int | None = None,
    classes: Sequence[str] | None = None,
    high_priority_gpus: int | None | Unset = UNSET,
) -> Quota:
    """Create or change a tenant's quota in a pool (operators only).

    Refuses a limit below what the tenant already holds (release first), guarantees that together
    exceed the pool, topology-shaped guarantees the pool's leaf groups cannot all hold, and a
    shaped guarantee its guaranteed GPUs do not cover (the tenant's claim of whole leaf groups
    would count as borrowed, which reclaims nothing, while the groups stay held for it).
    Placement keeps every shaped guarantee placeable (``scheduling.placement.guarantees``).
    ``classes``: the priority classes the tenant may book (None: as they are; a new quota allows
    training and best-effort); ``high_priority_gpus``: the most GPUs it may hold at once in
    high-priority classes (None: up to the limit; not given: as it is).
    """
    require_operator(principal, to="manage inventory, pools and quotas")
    if guaranteed_gpus < 0 or borrow_limit_gpus < 0:
        raise Invalid("quotas cannot be negative")
    allowed = _classes(classes) if classes is not None else None
    capacity = pool_capacity_gpus(pool)
    with transaction.atomic():
        quota = quota_for_update(tenant_id=tenant.pk, pool_id=pool.pk) or Quota(tenant=tenant, pool=pool)
        before = audit.snapshot(quota) if quota.pk else None
        others = Quota.objects.filter(pool=pool).exclude(tenant=tenant)
        guaranteed_total = (others.aggregate(s=Sum("guaranteed_gpus"))["s"] or 0) + guaranteed_gpus
        if guaranteed_total > capacity:
            raise Conflict(
                f"guarantees in pool {pool.name!r} would total {guaranteed_total} GPUs; the pool has {capacity}",
                code="over_capacity",
            )
        if guaranteed_leaf_groups:
            topology = topology_for_pool(pool)
            groups = len(topology.groups)
            shaped = (others.aggregate(s=Sum("guaranteed_leaf_groups"))["s"] or 0) + (guaranteed_leaf_groups)
            if shaped > groups:
                raise Conflict(
                    f"leaf-group guarantees in pool {pool.name!r} would total {shaped}; "
                    f"the pool has {groups} leaf groups",
                    code="over_capacity",
                )
            sizes = sorted(sum(topology.nodes[n].gpus for n in g.nodes) for g in topology.groups)
            smallest = sum(sizes[:guaranteed_leaf_groups])
            if guaranteed_gpus < smallest:
                raise Invalid(
                    f"{guaranteed_leaf_groups} whole leaf groups of pool {pool.name!r} need at "
                    f"least {smallest} guaranteed GPUs",
                    fields={"guaranteed_gpus": [f"at least {smallest} for the leaf groups"]},
                )
        held = usage(tenant.pk, pool.pk, timezone.now())
        limit = guaranteed_gpus + borrow_limit_gpus
        if limit < held:
            raise Conflict(
                f"tenant {tenant.name!r} holds up to {held} GPUs in pool {pool.name!r}; a limit "
                f"of {limit} is below that (release reservations first)",
                code="below_usage",
            )
        quota.guaranteed_gpus = guaranteed_gpus
        quota.borrow_limit_gpus = borrow_limit_gpus
        quota.guaranteed_leaf_groups = guaranteed_leaf_groups
        if allowed is not None:
            quota.classes = allowed
        if not isinstance(high_priority_gpus, Unset):
            if high_priority_gpus is not None and not 0 <= high_priority_gpus <= limit:
                raise Invalid(
                    f"high-priority GPUs are at most the quota's limit ({limit})",
                    fields={"high_priority_gpus": [f"0-{limit}"]},
                )
            quota.high_priority_gpus = high_priority_gpus
        try:
            with transaction.atomic():
                quota.save()
        except IntegrityError as exc:
            raise Conflict("the quota was created concurrently; try again") from exc
        audit.record(actor, "quota.set", quota, before=before, after=audit.snapshot(quota))
    return quota


def delete_quota(actor: Actor, principal: Principal, quota: Quota) -> None:
    """Remove a quota of a tenant that holds nothing in the pool any more."""
    require_operator(principal, to="manage inventory, pools and quotas")
    with transaction.atomic():
        quota = quota_by_pk_for_update(quota.pk)
        if usage(quota.tenant_id, quota.pool_id, timezone.now()):
            raise Conflict("the tenant still holds reservations in this pool", code="below_usage")
        audit.record(actor, "quota.delete", quota, before=audit.snapshot(quota))
        quota.delete()
