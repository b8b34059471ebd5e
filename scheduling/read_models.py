"""Read models of the reservation pages: pool summaries, connection details, leaf-group occupancy.

The REST serializers describe one reservation or one quota; the pages also need what a job
launcher needs to reach its nodes (names, HCA port GUIDs, rails, leaves) and the operator's
picture of who occupies which leaf group now. Both are plain reads; callers scope the rows they
pass in (``visible_to``) before asking.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from typing import Any, TypedDict

from django.db.models import Count, Sum
from django.utils import timezone

from console.fabric.models import Site
from console.tenancy.models import Tenant
from scheduling.models import HCA, Dataset, Node, Pool, Reservation, ReservationAllocation
from scheduling.services.topology import pool_topology

#: Tenant colours of the occupancy map (a tenant keeps its colour while the tenant set is stable).
PALETTE = (
    "#1e88e5",
    "#e53935",
    "#43a047",
    "#fb8c00",
    "#8e24aa",
    "#00acc1",
    "#6d4c41",
    "#d81b60",
    "#7cb342",
    "#3949ab",
    "#f4511e",
    "#546e7a",
)


def pool_summaries() -> list[dict[str, Any]]:
    """Every pool with its fabric, size, GPU models and sites (for the form and the timelines);
    ``sites``: the slugs of its nodes' sites (``multi_site``: more than one, a fabric without a
    site counting as a site of its own)."""
    pools = Pool.objects.select_related("fabric").annotate(
        node_count=Count("nodes", distinct=True), gpu_total=Sum("nodes__gpus")
    )
    models: dict[int, set[str]] = defaultdict(set)
    places: dict[int, set[tuple[str, int]]] = defaultdict(set)
    members = Node.objects.filter(pools__isnull=False).values_list(
        "pools", "gpu_model", "fabric_id", "fabric__site__slug"
    )
    for pool_id, model, fabric_id, slug in members.distinct():
        if model:
            models[pool_id].add(model)
        places[pool_id].add((slug, 0) if slug else ("", fabric_id))
    return [
        {
            "id": p.pk,
            "name": p.name,
            "fabric": p.fabric.name,
            "nodes": p.node_count,
            "gpus": p.gpu_total or 0,
            "gpu_models": sorted(models[p.pk]),
            "sites": sorted(slug for slug, _ in places[p.pk] if slug),
            "multi_site": len(places[p.pk]) > 1,
        }
        for p in pools
    ]


def near_choices(tenant: Tenant | None) -> dict[str, list[dict[str, str]]]:
    """The form's "Near" options: every site, then the tenant's own datasets (with their site)."""
    sites = [{"value": slug, "label": name} for slug, name in Site.objects.order_by("name").values_list("slug", "name")]
    datasets = []
    if tenant is not None:
        rows = Dataset.objects.filter(tenant=tenant).order_by("name").values_list("name", "site__name")
        datasets = [{"value": f"dataset:{name}", "label": f"{name} (at {site})"} for name, site in rows]
    return {"sites": sites, "datasets": datasets}


def connection_details(reservation: Reservation) -> list[dict[str, Any]]:
    """Per reserved node: its GPUs and its HCA ports (GUID, rail, leaf) — what a launcher needs."""
    gpus: dict[int, list[int]] = defaultdict(list)
    names: dict[int, str] = {}
    rows = ReservationAllocation.objects.filter(reservation=reservation).values_list(
        "node_id", "node__name", "gpu__index"
    )
    for node_id, name, index in rows:
        names[node_id] = name
        gpus[node_id].append(index)
    hcas: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for hca in HCA.objects.filter(node_id__in=names).order_by("node", "index"):
        hcas[hca.node_id].append(
            {
                "index": hca.index,
                "rail": hca.rail,
                "port_guid": hca.port_guid,
                "leaf": hca.leaf,
                "leaf_port": hca.leaf_port,
            }
        )
    return [
        {"node": names[pk], "gpus": sorted(gpus[pk]), "hcas": hcas[pk]}
        for pk in sorted(names, key=lambda pk: names[pk])
    ]


def tenant_colours(tenants: list[Tenant]) -> dict[int, str]:
    """A stable colour per tenant (by primary key order)."""
    return {t.pk: PALETTE[i % len(PALETTE)] for i, t in enumerate(sorted(tenants, key=_pk))}


def _pk(tenant: Tenant) -> int:
    return tenant.pk


class OccupancyCell(TypedDict):
    """One node of :func:`occupancy`'s rows and who holds its GPUs now."""

    node: str
    node_id: int
    state: str
    power: str  # a Node.Power value: on, powering-on, off, powering-off, failed
    power_since: dt.datetime | None
    gpus: int
    used_gpus: int
    tenant_id: int | None
    tenant: str
    colour: str
    shared: bool
    reservations: list[int]


def occupancy(pool: Pool, *, now: dt.datetime | None = None) -> dict[str, Any]:
    """The pool's leaf groups as rows of nodes, each node with the tenants holding its GPUs now.

    A node's ``tenant`` is the tenant holding most of its GPUs (``None`` when free); ``shared``
    says several tenants hold GPUs of it; ``power`` is its power state (since ``power_since``),
    and the answer's ``power`` counts the pool's nodes per power state.
    """
    now = now or timezone.now()
    named = pool_topology(pool)
    topology = named.topology
    held: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    reservations_of: dict[int, set[int]] = defaultdict(set)
    rows = ReservationAllocation.objects.filter(
        node__pools=pool,
        start__lte=now,
        end__gt=now,
        reservation__status__in=Reservation.HOLDING,
    ).values_list("node_id", "reservation__tenant_id", "reservation_id")
    for node_pk, tenant_id, reservation_id in rows:
        held[node_pk][tenant_id] += 1
        reservations_of[node_pk].add(reservation_id)
    states: dict[int, tuple[str, str, dt.datetime | None]] = {
        pk: (state, power, since)
        for pk, state, power, since in Node.objects.filter(pools=pool).values_list(
            "pk", "state", "power_state", "power_changed_at"
        )
    }
    tenant_ids = {t for per_node in held.values() for t in per_node}
    tenants = list(Tenant.objects.filter(pk__in=tenant_ids))
    colours = tenant_colours(tenants)
    names = {t.pk: t.name for t in tenants}
    groups = []
    powered: Counter[str] = Counter()
    for group in topology.groups:
        cells: list[OccupancyCell] = []
        for node_index in group.nodes:
            node = topology.nodes[node_index]
            pk = named.node_pks[node_index]
            per_tenant = held.get(pk, {})
            owner = max(per_tenant, key=per_tenant.__getitem__) if per_tenant else None
            state, power, since = states.get(pk, (Node.State.AVAILABLE, Node.Power.ON, None))
            cells.append(
                {
                    "node": node.name,
                    "node_id": pk,
                    "state": state,
                    "power": power,
                    "power_since": since,
                    "gpus": node.gpus,
                    "used_gpus": sum(per_tenant.values()),
                    "tenant_id": owner,
                    "tenant": names.get(owner, "") if owner else "",
                    "colour": colours.get(owner, "") if owner else "",
                    "shared": len(per_tenant) > 1,
                    "reservations": sorted(reservations_of.get(pk, ())),
                }
            )
        used = sum(c["used_gpus"] for c in cells)
        powered.update(c["power"] for c in cells)
        groups.append(
            {
                "name": named.group_names[group.id],
                "nodes": cells,
                "gpus": sum(c["gpus"] for c in cells),
                "used_gpus": used,
            }
        )
    legend = [
        {
            "tenant_id": t.pk,
            "tenant": t.name,
            "colour": colours[t.pk],
            "gpus": sum(per.get(t.pk, 0) for per in held.values()),
        }
        for t in sorted(tenants, key=_pk)
    ]
    return {"pool": pool.pk, "at": now, "groups": groups, "legend": legend, "power": dict(powered)}
