"""Usage and chargeback: who used how many GPU-hours, borrowed how many, paid what, lost what.

Loads the window's reservations, quotas, prices and names in a fixed number of queries (five,
whatever the rows; six by site: the fabrics' sites) and hands them to the pure arithmetic in ``scheduling.usage``, whose docstring
says which time counts. Scoped by the principal: operators and auditors read every tenant (or
one, ``tenant_id``); a tenant reads only itself, whatever ``tenant_id`` it passes, so nothing it
receives names another tenant.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from console.fabric.models import Fabric
from console.tenancy.errors import Invalid
from console.tenancy.models import Principal, Tenant
from scheduling.models import Pool, Quota, Reservation
from scheduling.services.pricing import price_book
from scheduling.usage import COUNTED, Bucket, GroupBy, Held, Prices, round_hours, summarise

#: The longest window one report covers (a year and a day: leap years and a report's edges).
MAX_WINDOW = dt.timedelta(days=366)
DEFAULT_WINDOW = dt.timedelta(days=30)


@dataclass(frozen=True)
class UsageQuery:
    """What to report: ``[window_from, window_to)`` grouped by ``group_by``."""

    window_from: dt.datetime
    window_to: dt.datetime
    group_by: GroupBy = GroupBy.TENANT
    tenant_id: int | None = None

    @classmethod
    def checked(
        cls,
        window_from: dt.datetime | None,
        window_to: dt.datetime | None,
        group_by: GroupBy = GroupBy.TENANT,
        tenant_id: int | None = None,
        *,
        now: dt.datetime | None = None,
    ) -> UsageQuery:
        """Defaults (the last 30 days up to now) and limits; ``Invalid`` (400) when broken."""
        window_from, window_to = checked_window(window_from, window_to, DEFAULT_WINDOW, "a usage report", now=now)
        return cls(window_from, window_to, group_by, tenant_id)


def checked_window(
    window_from: dt.datetime | None,
    window_to: dt.datetime | None,
    default: dt.timedelta,
    report: str,
    *,
    now: dt.datetime | None = None,
) -> tuple[dt.datetime, dt.datetime]:
    """``[from, to)`` with defaults (``to``: now; ``from``: ``default`` before ``to``) and the
    limits (:data:`MAX_WINDOW`); ``Invalid`` (400) naming the field when broken."""
    for name, moment in (("from", window_from), ("to", window_to)):
        if moment is not None and not 1 < moment.year < 9999:
            raise Invalid(f"'{name}' is outside the years 2 to 9998", fields={name: ["year out of range"]})
    window_to = window_to or now or timezone.now()
    try:
        window_from = window_from or window_to - default
    except OverflowError:  # a 'to' in the first month of year 1
        raise Invalid("'to' is too early", fields={"to": ["too early"]}) from None
    if window_to <= window_from:
        raise Invalid("'to' must be after 'from'", fields={"to": ["must be after 'from'"]})
    if window_to - window_from > MAX_WINDOW:
        raise Invalid(
            f"{report} covers at most {MAX_WINDOW.days} days",
            fields={"from": [f"at most {MAX_WINDOW.days} days before 'to'"]},
        )
    return window_from, window_to


@dataclass(frozen=True)
class UsageReport:
    """Rows (one per group, names resolved), the totals, and (when asked) the daily series for a
    stacked chart."""

    query: UsageQuery
    rows: list[dict[str, Any]]
    total: dict[str, Any]
    currency: str
    series: dict[str, Any] | None = None


def _reservations(principal: Principal, query: UsageQuery) -> list[dict[str, Any]]:
    rows = Reservation.objects.visible_to(principal).filter(
        Q(ended_at__isnull=True) | Q(ended_at__gte=query.window_from),
        status__in=COUNTED,
        start__lt=query.window_to,
        end__gt=query.window_from,
    )
    if query.tenant_id is not None and principal.sees_all_tenants:
        rows = rows.filter(tenant_id=query.tenant_id)
    fields = ("id", "tenant_id", "pool_id", "priority_class", "gpus", "borrowed", "status", "start", "end")
    return list(rows.order_by().values(*fields, "ended_at", "name", "fabric_id"))


def _guarantees(principal: Principal, query: UsageQuery) -> dict[tuple[int, int], int]:
    rows = Quota.objects.visible_to(principal).filter(guaranteed_gpus__gt=0)
    if query.tenant_id is not None and principal.sees_all_tenants:
        rows = rows.filter(tenant_id=query.tenant_id)
    return {(t, p): g for t, p, g in rows.order_by().values_list("tenant_id", "pool_id", "guaranteed_gpus")}


def held_rows(loaded: Iterable[dict[str, Any]], sites: dict[int, str] | None = None) -> list[Held]:
    """The loaded rows as the pure report reads them; ``sites`` maps a fabric id to its site's
    group key (:func:`site_keys`)."""
    sites = sites or {}
    return [
        Held(**{k: v for k, v in row.items() if k not in ("name", "fabric_id")}, site=sites.get(row["fabric_id"], ""))
        for row in loaded
    ]


def site_keys(loaded: Iterable[dict[str, Any]]) -> tuple[dict[int, str], dict[str, dict[str, Any]]]:
    """Each fabric's site group key (the site's slug; ``fabric:<name>`` for a fabric without a
    site, a site of its own: slugs have no colon) and each key's row head (``site``: the slug or
    null, ``name``). One query."""
    fabric_ids = {row["fabric_id"] for row in loaded}
    keys: dict[int, str] = {}
    heads: dict[str, dict[str, Any]] = {}
    for fid, name, slug, site_name in Fabric.objects.filter(pk__in=fabric_ids).values_list(
        "pk", "name", "site__slug", "site__name"
    ):
        key = slug or f"fabric:{name}"
        keys[fid] = key
        heads[key] = {"site": slug, "name": site_name} if slug else {"site": None, "name": f"{name} (fabric, no site)"}
    return keys, heads


def usage_report(
    principal: Principal, query: UsageQuery, *, now: dt.datetime | None = None, stack_by: GroupBy | None = None
) -> UsageReport:
    """The report ``principal`` may read (see the module docstring); with ``stack_by`` (tenant or
    pool) also GPU-hours per UTC day per tenant or pool, for a stacked chart."""
    now = now or timezone.now()
    loaded = _reservations(principal, query)
    guarantees = _guarantees(principal, query)
    prices = price_book()
    sites, site_heads = site_keys(loaded) if query.group_by is GroupBy.SITE else ({}, {})
    held = held_rows(loaded, sites)
    report = summarise(
        held,
        window_from=query.window_from,
        window_to=query.window_to,
        now=now,
        group_by=query.group_by,
        prices=prices,
        guarantees=guarantees,
    )
    names = _Names(loaded, {t for t, _ in guarantees} | {r["tenant_id"] for r in loaded}, site_heads)
    rows = [names.row(query.group_by, bucket) | figures(bucket, report.currency) for bucket in report.buckets]
    series = None
    if stack_by is not None:
        series = _daily_series(held, query, stack_by, now=now, prices=prices, names=names)
    return UsageReport(query, rows, figures(report.total, report.currency), report.currency, series)


def window_days(query: UsageQuery) -> list[dt.date]:
    """The UTC days the window touches."""
    days: list[dt.date] = []
    day = query.window_from.astimezone(dt.UTC).date()
    while dt.datetime.combine(day, dt.time(), dt.UTC) < query.window_to:
        days.append(day)
        day += dt.timedelta(days=1)
    return days


def _daily_series(
    held: list[Held], query: UsageQuery, stack_by: GroupBy, *, now: dt.datetime, prices: Prices, names: _Names
) -> dict[str, Any]:
    days = window_days(query)
    stacks: dict[int, list[Held]] = {}
    for row in held:
        stacks.setdefault(row.tenant_id if stack_by is GroupBy.TENANT else row.pool_id, []).append(row)
    labels = names.tenants if stack_by is GroupBy.TENANT else names.pools
    series: list[dict[str, Any]] = []
    for key, rows in stacks.items():
        daily = summarise(
            rows, window_from=query.window_from, window_to=query.window_to, now=now, group_by=GroupBy.DAY, prices=prices
        )
        per_day = {b.key: float(round_hours(b.gpu_hours)) for b in daily.buckets}
        if any(per_day.values()):
            series.append({"label": labels.get(key, ""), "data": [per_day.get(d, 0.0) for d in days]})
    series.sort(key=lambda s: str(s["label"]))
    return {"days": [d.isoformat() for d in days], "series": series, "stack_by": stack_by.value}


def figures(bucket: Bucket, currency: str) -> dict[str, Any]:
    """A bucket's sums as the API and the CSV give them (hours to 3 decimals, cost a string)."""
    utilisation = bucket.guaranteed_utilisation
    return {
        "gpu_hours": float(round_hours(bucket.gpu_hours)),
        "borrowed_gpu_hours": float(round_hours(bucket.borrowed_gpu_hours)),
        "cost": str(bucket.cost),
        "currency": currency,
        "preemptions": bucket.preemptions,
        "reservations": len(bucket.reservations),
        "guaranteed_utilisation": None if utilisation is None else round(utilisation, 4),
    }


class _Names:
    """Readable names of the groups, two queries (tenants, pools) however many rows."""

    def __init__(
        self, loaded: list[dict[str, Any]], tenant_ids: set[int], sites: dict[str, dict[str, Any]] | None = None
    ) -> None:
        self.sites = sites or {}
        pool_ids = {r["pool_id"] for r in loaded}
        self.tenants: dict[int, str] = dict(Tenant.objects.filter(pk__in=tenant_ids).values_list("pk", "name"))
        self.pools: dict[int, str] = dict(Pool.objects.filter(pk__in=pool_ids).values_list("pk", "name"))
        self.reservations = {r["id"]: r for r in loaded}

    def row(self, group_by: GroupBy, bucket: Bucket) -> dict[str, Any]:
        key = bucket.key
        head: dict[str, Any]
        if isinstance(key, dt.date):
            head = {"day": key.isoformat(), "name": f"{key.isoformat()} (UTC)"}
        elif isinstance(key, str):
            head = dict(self.sites.get(key, {"site": key, "name": key}))
        elif group_by is GroupBy.TENANT:
            head = {"tenant": key, "name": self.tenants.get(key, "")}
        elif group_by is GroupBy.POOL:
            head = {"pool": key, "name": self.pools.get(key, "")}
        else:
            res = self.reservations[key]
            head = {
                "reservation": key,
                "name": res["name"] or f"res-{key}",
                "tenant": res["tenant_id"],
                "tenant_name": self.tenants.get(res["tenant_id"], ""),
                "pool": res["pool_id"],
                "pool_name": self.pools.get(res["pool_id"], ""),
                "priority_class": res["priority_class"],
                "gpus": res["gpus"],
                "status": res["status"],
            }
        return head
