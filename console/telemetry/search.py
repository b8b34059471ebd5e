"""Search: one query over the console's names and fabric identifiers, scoped to who asks.

The query is read by :mod:`console.telemetry.searchquery` (pure); this module looks it up.

Scoping. Operators and auditors find everything. A tenant finds its own reservations, the nodes
those hold now (by name, port GUID or LID) and their partitions' P_Keys — nothing else: no other
tenant's reservation, host or user, no tenant list, no design. Switches are fabric
infrastructure, but a switch's name leads to pages a tenant has no use for (it has no fabric or
designer pages), so switches and cables are found by operators and auditors only.

Where identifiers live. Port GUIDs are stored per HCA (:class:`scheduling.models.HCA`). LIDs are
OpenSM's: the fabric's last discovery run records switch and CA LIDs (a lab's and an agent
fabric's: discovered through the agent), and an OpenSM on this host may record the LID of every
HCA port (read through the driver's ``port_lids``); both are consulted, the discovery first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.db.models import Q
from django.urls import reverse

from console.fabric.drivers.registry import driver_for
from console.fabric.models import DiscoveryRun, Fabric, FabricPartition
from console.telemetry.searchquery import SearchQuery, format_guid, parse
from console.tenancy.models import Principal, Tenant
from designer.graph import FabricGraph
from designer.models import Design, DesignRevision
from designer.services import revision_graph
from scheduling.models import HCA, Node, Reservation, ReservationAllocation

LIMIT = 50


@dataclass(frozen=True)
class Hit:
    """One result: what it is, what to call it, where it leads, and a few facts."""

    kind: str
    label: str
    url: str
    fields: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "label": self.label, "url": self.url, "fields": self.fields}


@lru_cache(maxsize=8)
def _graph(revision_id: int) -> FabricGraph:
    # A revision never changes once saved (ImmutableRevision), so its graph can be kept.
    return revision_graph(DesignRevision.objects.get(pk=revision_id))


def _live_url(fabric_id: int, switch: str) -> str:
    return f"{reverse('web:fabric-live', args=[fabric_id])}?switch={switch}"


class _Search:
    def __init__(self, principal: Principal, query: SearchQuery, limit: int) -> None:
        self.principal = principal
        self.q = query
        self.limit = limit
        self.hits: list[Hit] = []
        self.seen: set[tuple[str, str]] = set()
        self.all = principal.sees_all_tenants
        self._fabrics: list[Fabric] | None = None
        self._own_nodes: dict[int, int] | None = None  # node id → reservation id

    def add(self, hit: Hit) -> None:
        key = (hit.kind, hit.url + hit.label)
        if key not in self.seen and len(self.hits) < self.limit:
            self.seen.add(key)
            self.hits.append(hit)

    # ---- who may see what ----------------------------------------------------------------
    def fabrics(self) -> list[Fabric]:
        if self._fabrics is None:
            self._fabrics = list(Fabric.objects.order_by("pk"))
        return self._fabrics

    def fabric_name(self, fabric_id: int) -> str:
        return next((f.name for f in self.fabrics() if f.pk == fabric_id), str(fabric_id))

    def own_nodes(self) -> dict[int, int]:
        """The nodes a tenant's live reservations hold now (node id → reservation id)."""
        if self._own_nodes is None:
            rows = ReservationAllocation.objects.filter(
                reservation__in=Reservation.objects.visible_to(self.principal).filter(status__in=Reservation.HOLDING)
            ).values_list("node_id", "reservation_id")
            self._own_nodes = dict(rows)
        return self._own_nodes

    def node_visible(self, node_id: int) -> bool:
        return self.all or node_id in self.own_nodes()

    def node_hit(self, node: Node, **extra: Any) -> Hit:
        if self.all:
            url = reverse("web:fabric", args=[node.fabric_id])
        else:
            url = reverse("web:reservation", args=[self.own_nodes()[node.pk]])
        fields = {"fabric": self.fabric_name(node.fabric_id), "state": node.state, "gpus": node.gpus, **extra}
        return Hit("node", node.name, url, fields)

    # ---- lookups --------------------------------------------------------------------------
    def run(self) -> list[Hit]:
        q = self.q
        if q.empty or self.principal.role is None:
            return []
        if q.guid is not None:
            self.by_guid(q.guid)
        if q.lid is not None:
            self.by_lid(q.lid)
        if q.pkey is not None:
            self.by_pkey(q.pkey)
        if q.cable is not None and self.all:
            self.by_cable(*q.cable)
        if q.number is not None:
            self.reservation_by_id(q.number)
        if not q.explicit_lid:
            self.by_name(q.text)
        return self.hits

    def by_name(self, text: str) -> None:
        if self.all:
            for fabric in self.fabrics():
                for name, sw in _graph(fabric.revision_id).switches.items():
                    if text.lower() in name.lower():
                        sw_fields: dict[str, Any] = {
                            "fabric": self.fabric_name(fabric.pk),
                            "tier": sw.tier,
                            "model": sw.model,
                        }
                        self.add(Hit("switch", name, _live_url(fabric.pk, name), sw_fields))
        nodes = Node.objects.filter(name__icontains=text)
        if not self.all:
            nodes = nodes.filter(pk__in=list(self.own_nodes()))
        for node in nodes.order_by("fabric_id", "name")[: self.limit]:
            self.add(self.node_hit(node))
        for res in (
            Reservation.objects.visible_to(self.principal)
            .select_related("tenant")
            .filter(name__icontains=text)[: self.limit]
        ):
            self.add(self.reservation_hit(res))
        if self.all:
            for design in Design.objects.filter(name__icontains=text).order_by("name")[: self.limit]:
                url = reverse("web:designer-design", args=[design.pk])
                fields: dict[str, Any] = {"topology": design.topology, "revision": design.latest_revision}
                self.add(Hit("design", design.name, url, fields))
            for fabric in self.fabrics():
                if text.lower() in fabric.name.lower():
                    self.add(
                        Hit("fabric", fabric.name, reverse("web:fabric", args=[fabric.pk]), {"driver": fabric.driver})
                    )
            tenants = Tenant.objects.filter(Q(name__icontains=text) | Q(slug__icontains=text)).order_by("name")
            for tenant in tenants[: self.limit]:
                self.add(Hit("tenant", tenant.name, reverse("web:tenants"), {"slug": tenant.slug}))

    def reservation_hit(self, res: Reservation) -> Hit:
        fields: dict[str, Any] = {"status": res.status, "gpus": res.gpus, "fabric": self.fabric_name(res.fabric_id)}
        if self.all:
            fields["tenant"] = res.tenant.name
        label = res.name or f"reservation {res.pk}"
        return Hit("reservation", label, reverse("web:reservation", args=[res.pk]), fields)

    def reservation_by_id(self, pk: int) -> None:
        res = Reservation.objects.visible_to(self.principal).select_related("tenant").filter(pk=pk).first()
        if res is not None:
            self.add(self.reservation_hit(res))

    def by_guid(self, guid: int) -> None:
        spelled = format_guid(guid)
        for hca in HCA.objects.select_related("node").filter(port_guid__iexact=spelled):
            if self.node_visible(hca.node_id):
                fields = {"port_guid": spelled, "hca": hca.index, "rail": hca.rail, "leaf": hca.leaf}
                if not self.all:
                    fields.pop("leaf")
                self.add(self.node_hit(hca.node, **fields))
        if self.all:
            for fabric, row in self.discovered():
                if row.get("guid") == spelled:
                    self.add(self.discovered_hit(fabric, row))

    def by_lid(self, lid: int) -> None:
        guids: dict[str, tuple[int, int]] = {}  # port GUID → (fabric, port)
        for fabric in self.fabrics():
            found = False
            for fab, row in self.discovered([fabric]):
                is_switch = row.get("kind") == "switch"
                lids = [row.get("lid")] if is_switch else list((row.get("lids") or {}).values())
                if lid not in lids:
                    continue
                found = True
                if self.all:
                    self.add(self.discovered_hit(fab, row, lid=lid))
                elif not is_switch:
                    node = self.own_node_described(fab, str(row.get("name", "")))
                    if node is not None:
                        self.add(self.node_hit(node, lid=lid, guid=row.get("guid")))
            if found:
                continue
            for guid, (port_lid, port) in self.lab_lids(fabric).items():
                if port_lid == lid:
                    guids[format_guid(guid)] = (fabric.pk, port)
        if guids:
            for hca in HCA.objects.select_related("node").filter(port_guid__in=list(guids)):
                if hca.node.fabric_id == guids[hca.port_guid.lower()][0] and self.node_visible(hca.node_id):
                    self.add(self.node_hit(hca.node, lid=lid, port_guid=hca.port_guid, hca=hca.index))

    @staticmethod
    def lab_lids(fabric: Fabric) -> dict[int, tuple[int, int]]:
        """Port GUID → (LID, port) as the fabric's driver recorded them ({} when it has none)."""
        try:
            driver = driver_for(fabric)
            # A local OpenSM driver's host keeps the map; the others (agents) have none here.
            port_lids = getattr(driver, "port_lids", None) or getattr(getattr(driver, "host", None), "port_lids", None)
            return dict(port_lids()) if callable(port_lids) else {}
        except Exception:  # a driver that cannot start has no LIDs to offer
            return {}

    def own_node_described(self, fabric_id: int, description: str) -> Node | None:
        """The node of a discovered CA: its NodeDescription is the node's name, or (Linux's
        default, and the designs' "su01-n01 HCA-1") the host name, a space and the HCA's."""
        host = description.split(" ", 1)[0]
        names = [description] if host == description else [description, host]
        node = Node.objects.filter(fabric_id=fabric_id, name__in=names).order_by("-name").first()
        return node if node is not None and self.node_visible(node.pk) else None

    def discovered(self, fabrics: list[Fabric] | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The device rows of each fabric's last discovery (operators and auditors only)."""
        rows: list[tuple[int, dict[str, Any]]] = []
        for fabric in fabrics if fabrics is not None else self.fabrics():
            run = DiscoveryRun.objects.filter(fabric=fabric).only("topology").first()
            if run is not None:
                rows.extend((fabric.pk, row) for row in (run.topology or {}).get("nodes", []))
        return rows

    def discovered_hit(self, fabric_id: int, row: dict[str, Any], **extra: Any) -> Hit:
        name = str(row.get("name", ""))
        if row.get("kind") == "switch":
            url = _live_url(fabric_id, name)
            fields = {"fabric": self.fabric_name(fabric_id), "guid": row.get("guid"), "lid": row.get("lid")}
            return Hit("switch", name, url, {**fields, **extra})
        fields = {"fabric": self.fabric_name(fabric_id), "guid": row.get("guid"), "lids": row.get("lids")}
        return Hit("node", name, reverse("web:fabric", args=[fabric_id]), {**fields, **extra})

    def by_pkey(self, pkey: int) -> None:
        mine = Reservation.objects.visible_to(self.principal).select_related("tenant")
        keys = [pkey, pkey | 0x8000]  # its key on any subnet it spans (they differ when no value was common)
        held = mine.filter(Q(pkey__in=keys) | Q(subnets__pkey__in=keys)).distinct()
        for res in held.order_by("-pk")[: self.limit]:
            hit = self.reservation_hit(res)
            self.add(Hit(hit.kind, hit.label, hit.url, {"pkey": f"{pkey:#06x}", **hit.fields}))
        parts = list(FabricPartition.objects.filter(pkey__in=[pkey, pkey | 0x8000]).order_by("fabric_id", "name"))
        own = None
        if not self.all and parts:
            own = {r.partition_name: r.pk for r in Reservation.objects.visible_to(self.principal).only("pk")}
        for part in parts:
            fields = {
                "pkey": f"{part.pkey & 0x7FFF:#06x}",
                "fabric": self.fabric_name(part.fabric_id),
                "source": part.source,
            }
            if own is None:
                self.add(Hit("partition", part.name, reverse("web:fabric", args=[part.fabric_id]), fields))
            elif part.name in own:
                self.add(Hit("partition", part.name, reverse("web:reservation", args=[own[part.name]]), fields))

    def by_cable(self, switch: str, port: int) -> None:
        for fabric in self.fabrics():
            graph = _graph(fabric.revision_id)
            if switch not in graph.switches:
                continue
            link = graph.link_at(switch, port)
            if link is None:
                peer: dict[str, Any] = {"peer": None}
            else:
                far, far_port = (link.b, link.b_port) if link.a == switch else (link.a, link.a_port)
                peer = {"peer": f"{far}[{far_port}]", "tier": link.tier, "cable": link.cable}
            self.add(
                Hit(
                    "cable",
                    f"{switch}[{port}]",
                    _live_url(fabric.pk, switch),
                    {"fabric": self.fabric_name(fabric.pk), **peer},
                )
            )


def search(principal: Principal, raw: str, *, limit: int = LIMIT) -> list[dict[str, Any]]:
    """Typed results for ``raw`` that ``principal`` may see (at most ``limit``); none for a query
    holding NUL, which no name holds (and PostgreSQL text cannot be compared with)."""
    if "\x00" in raw:
        return []
    return [hit.as_dict() for hit in _Search(principal, parse(raw), limit).run()]
