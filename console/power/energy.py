"""Energy accounting: kWh per pool, UTC day or node from the recorded power history and bookings.

Rebuilds every node's history over ``[from, min(to, now))`` in a fixed number of queries,
however many nodes (seven: nodes with their state at ``from``, the power events inside the
window, the bookings, pool memberships, and the catalogue figures in three; the pool names make
eight), and hands it to the
pure arithmetic (:func:`scheduling.power.history.node_intervals`,
:func:`scheduling.power.energy.energy_report`, whose docstrings say what each state draws).

Watts are the catalogue's figures for the node's type (busy, idle, off; the operator's
catalogue overrides first, then the figures embedded in the fabric's design revision), not
metered power. A node whose type the catalogue does not know is left out and counted in
``nodes_without_figures``. A node in two pools counts in both pool rows; the total counts
every node once. Bookings are reservation allocations of reservations that held GPUs (the
usage report's statuses): a released reservation's allocations end at its release.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, fields
from typing import Any, Literal, cast

from django.db.models import Count, OuterRef, Subquery
from django.utils import timezone

from console.fabric.models import Fabric
from console.power.models import PowerEvent
from console.tenancy.errors import Invalid
from designer.catalogue import NodeType, find_item
from designer.models import DesignRevision
from designer.services import load_catalogue
from scheduling.models import Node, Pool, ReservationAllocation
from scheduling.power.energy import EnergyRow, NodeHistory, NodeWatts, energy_report, total_row
from scheduling.power.history import node_intervals
from scheduling.services.usage import checked_window
from scheduling.usage import COUNTED

GroupBy = Literal["pool", "day", "node"]
GROUP_BY: tuple[GroupBy, ...] = ("pool", "day", "node")
DEFAULT_WINDOW = dt.timedelta(days=7)
#: Pool key of nodes in no pool.
NO_POOL = ""


@dataclass(frozen=True)
class EnergyQuery:
    """What to report: ``[window_from, window_to)`` grouped by ``group_by``."""

    window_from: dt.datetime
    window_to: dt.datetime
    group_by: GroupBy = "pool"

    @classmethod
    def checked(
        cls,
        window_from: dt.datetime | None = None,
        window_to: dt.datetime | None = None,
        group_by: str = "pool",
        *,
        now: dt.datetime | None = None,
    ) -> EnergyQuery:
        """Defaults (the last 7 days up to now, by pool) and limits; ``Invalid`` (400) when broken."""
        if group_by not in GROUP_BY:
            raise Invalid(f"group_by is one of {', '.join(GROUP_BY)}", fields={"group_by": list(GROUP_BY)})
        window_from, window_to = checked_window(window_from, window_to, DEFAULT_WINDOW, "an energy report", now=now)
        return cls(window_from, window_to, cast(GroupBy, group_by))


@dataclass(frozen=True)
class EnergyReport:
    """Rows (one per group, with names), the total (every node once) and how much was counted."""

    query: EnergyQuery
    counted_to: dt.datetime
    rows: list[dict[str, Any]]
    total: dict[str, Any]
    nodes: int
    nodes_without_figures: int


@dataclass(frozen=True)
class _Loaded:
    histories: list[NodeHistory]  # keyed by node pk (``node``), ``pool`` left empty
    pools: dict[str, list[str]]  # node pk -> pool pks (as text, the report's keys)
    names: dict[str, str]  # node pk -> node name
    nodes_without_figures: int


def figures(row: EnergyRow) -> dict[str, float]:
    """A row's sums as the API, the CSV and the pages give them."""
    return {
        "kwh": round(row.kwh, 3),
        "kwh_always_on": round(row.kwh_always_on, 3),
        "saved_fraction": round(row.saved_fraction, 4),
    }


def _node_types(fabric_ids: set[int]) -> dict[int, dict[str, NodeType]]:
    """Per fabric, its node types: the operator's catalogue, then its revision's embedded rows."""
    catalogue = load_catalogue()
    revisions = dict(Fabric.objects.filter(pk__in=fabric_ids).values_list("pk", "revision_id"))
    embedded = dict(
        DesignRevision.objects.filter(pk__in=set(revisions.values())).values_list("pk", "graph__catalogue__nodes")
    )
    names = {f.name for f in fields(NodeType)}
    out: dict[int, dict[str, NodeType]] = {}
    for fabric_id, revision_id in revisions.items():
        table = dict(catalogue.nodes)
        for row in embedded.get(revision_id) or []:
            if isinstance(row, dict) and "name" in row:
                table.setdefault(row["name"], NodeType(**{k: v for k, v in row.items() if k in names}))
        out[fabric_id] = table
    return out


def _load(window_from: dt.datetime, window_to: dt.datetime) -> _Loaded:
    before = PowerEvent.objects.filter(node=OuterRef("pk"), at__lt=window_from).order_by("-at", "-pk")
    after = PowerEvent.objects.filter(node=OuterRef("pk"), at__gte=window_from).order_by("at", "pk")
    nodes = list(
        Node.objects.annotate(
            state_before=Subquery(before.values("to_state")[:1]),
            first_from=Subquery(after.values("from_state")[:1]),
        )
        .order_by("pk")
        .values_list("pk", "name", "fabric_id", "node_type", "gpus", "power_state", "state_before", "first_from")
    )
    changes: dict[int, list[tuple[dt.datetime, str]]] = defaultdict(list)
    inside = PowerEvent.objects.filter(at__gte=window_from, at__lt=window_to).order_by("node_id", "at", "pk")
    for node_id, at, state in inside.values_list("node_id", "at", "to_state"):
        changes[node_id].append((at, state))
    held: dict[int, list[tuple[dt.datetime, dt.datetime, int]]] = defaultdict(list)
    bookings = (
        ReservationAllocation.objects.filter(
            start__lt=window_to, end__gt=window_from, reservation__status__in=sorted(COUNTED)
        )
        .values("node_id", "start", "end")
        .annotate(n=Count("pk"))
        .order_by()
    )
    for row in bookings:
        held[row["node_id"]].append((row["start"], row["end"], row["n"]))
    pools: dict[str, list[str]] = defaultdict(list)
    for node_id, pool_id in Pool.nodes.through.objects.order_by("pool_id").values_list("node_id", "pool_id"):
        pools[str(node_id)].append(str(pool_id))
    types = _node_types({row[2] for row in nodes})
    histories, names, unknown = [], {}, 0
    for pk, name, fabric_id, node_type, gpus, now_state, state_before, first_from in nodes:
        found = find_item(types.get(fabric_id, {}), node_type)
        if found is None or found.power_w <= 0:
            unknown += 1
            continue
        initial = state_before or first_from or now_state
        intervals = node_intervals(window_from, window_to, initial, changes.get(pk, []), held.get(pk, []), gpus)
        histories.append(NodeHistory(str(pk), NO_POOL, NodeWatts.of(found), tuple(intervals)))
        names[str(pk)] = name
    return _Loaded(histories, pools, names, unknown)


def _pool_rows(loaded: _Loaded, by_node: list[EnergyRow]) -> list[dict[str, Any]]:
    """Pool rows summed from the node rows (energy is additive; a node counts in each of its pools)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for row in by_node:
        for pool_id in loaded.pools.get(row.key) or [NO_POOL]:
            sums[pool_id][0] += row.kwh
            sums[pool_id][1] += row.kwh_always_on
    names = {
        str(pk): (name, fabric)
        for pk, name, fabric in Pool.objects.filter(pk__in=[int(k) for k in sums if k]).values_list(
            "pk", "name", "fabric__name"
        )
    }
    out = []
    for key, (kwh, always) in sums.items():
        name, fabric = names.get(key, ("(no pool)", ""))
        row = EnergyRow(key, kwh, always)
        out.append({"pool": int(key) if key else None, "name": name, "fabric": fabric} | figures(row))
    return sorted(out, key=lambda r: (r["pool"] is None, r["fabric"], r["name"]))


def _rows(loaded: _Loaded, group_by: GroupBy, by_node: list[EnergyRow]) -> list[dict[str, Any]]:
    if group_by == "pool":
        return _pool_rows(loaded, by_node)
    if group_by == "day":
        return [{"day": r.key, "name": f"{r.key} (UTC)"} | figures(r) for r in energy_report(loaded.histories, "day")]
    rows = [{"node": int(r.key), "name": loaded.names[r.key]} | figures(r) for r in by_node]
    return sorted(rows, key=lambda r: r["name"])


def energy(query: EnergyQuery, *, now: dt.datetime | None = None) -> EnergyReport:
    """The report over ``query``'s window, counted up to ``now`` at the latest."""
    now = now or timezone.now()
    counted_to = max(query.window_from, min(query.window_to, now))
    loaded = _load(query.window_from, counted_to)
    by_node = energy_report(loaded.histories, "node")
    total = total_row(by_node)
    return EnergyReport(
        query,
        counted_to,
        _rows(loaded, query.group_by, by_node),
        figures(total),
        len(loaded.histories),
        loaded.nodes_without_figures,
    )


def pool_labels() -> dict[str, str]:
    """Pool pk (text) → ``fabric / pool``; a pool whose nodes are on several fabrics (one spanning
    sites) says so: ``fra-ams (spanning ams-ft8, superpod-su1)``, not filed under one fabric."""
    fabrics: dict[int, set[str]] = defaultdict(set)
    for pool_id, fabric in Pool.nodes.through.objects.values_list("pool_id", "node__fabric__name").distinct():
        fabrics[pool_id].add(fabric)
    out = {}
    for pk, name, fabric in Pool.objects.values_list("pk", "name", "fabric__name"):
        spans = sorted(fabrics.get(pk, set()))
        out[str(pk)] = f"{name} (spanning {', '.join(spans)})" if len(spans) > 1 else f"{fabric} / {name}"
    return out


def daily_by_pool(query: EnergyQuery, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """The usage page's energy section from one load: the pool rows and total of
    :func:`energy`, and for its chart kWh per UTC day per pool and the always-on kWh of all
    nodes per day (``days``, ``series`` of ``{label, data}``, ``always_on``)."""
    now = now or timezone.now()
    counted_to = max(query.window_from, min(query.window_to, now))
    loaded = _load(query.window_from, counted_to)
    days: list[str] = []
    day = query.window_from.astimezone(dt.UTC).date()
    while dt.datetime.combine(day, dt.time(), dt.UTC) < query.window_to:
        days.append(day.isoformat())
        day += dt.timedelta(days=1)
    # Each node's days once, in one bar segment: the set of pools it is in (a node of two pools,
    # e.g. su1 and the pool spanning both sites, is "su1 + fra-ams", never counted twice), so the
    # bars of a day add up to what all nodes drew and stay under the always-on line.
    per_group: dict[tuple[str, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    always: dict[str, float] = defaultdict(float)
    for history in loaded.histories:
        group = tuple(loaded.pools.get(history.node) or [NO_POOL])
        for row in energy_report([history], "day"):
            always[row.key] += row.kwh_always_on
            per_group[group][row.key] += row.kwh
    names = pool_labels()
    series = [
        {
            "label": " + ".join(names.get(key, "(no pool)") for key in group),
            "data": [round(per_day.get(d, 0.0), 3) for d in days],
        }
        for group, per_day in per_group.items()
    ]
    series.sort(key=lambda s: str(s["label"]))
    by_node = energy_report(loaded.histories, "node")
    return {
        "rows": _pool_rows(loaded, by_node),
        "total": figures(total_row(by_node)),
        "days": days,
        "series": series,
        "always_on": [round(always.get(d, 0.0), 3) for d in days],
    }


__all__ = ["EnergyQuery", "EnergyReport", "GROUP_BY", "daily_by_pool", "energy", "figures"]
