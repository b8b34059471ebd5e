"""The live snapshots as each principal may see them (the one place that filters a fabric's live state).

Operators and auditors see every link; a tenant sees only the host links of its own ready
reservations, its own reservations' nodes, and its own live group's sequence number. A switch's
port table (:func:`switch_ports`) follows the same rule: a tenant gets only its own links' rows,
and the live page's canvas (:func:`canvas_for`) names no host but the tenant's own.
"""

from __future__ import annotations

from typing import Any

from console.broadcast import fabric_group, tenant_group
from console.fabric.models import Fabric
from console.telemetry import store
from console.telemetry.linkmap import link_id
from console.telemetry.power import power_states
from console.tenancy.errors import NotFound
from console.tenancy.models import Principal
from designer.catalogue import generation_rank, width_speed
from designer.graph import FabricGraph
from designer.services import revision_graph
from scheduling.models import Reservation, ReservationAllocation


def visible_links(snapshot: dict[str, Any] | None, principal: Principal) -> set[str] | None:
    """Link ids the principal may see (None = all)."""
    if principal.sees_all_tenants:
        return None
    tenant = ((snapshot or {}).get("tenants") or {}).get(str(principal.tenant_id)) or {}
    return set(tenant.get("links", []))


def snapshot_for(fabric_id: int, principal: Principal) -> dict[str, Any]:
    """The REST snapshot a client resyncs from: links, its group and that group's last seq."""
    snap = store.load_snapshot(fabric_id) or {}
    allowed = visible_links(snap, principal)
    links = snap.get("links") or {}
    if allowed is not None:
        links = {k: v for k, v in links.items() if k in allowed}
    group = fabric_group(fabric_id) if principal.sees_all_tenants else tenant_group(principal.tenant_id or 0)
    out: dict[str, Any] = {
        "fabric": fabric_id,
        "group": group,
        "seq": store.snapshot_seq(snap, group),
        "epoch": snap.get("epoch"),
        "at": snap.get("at"),
        "collector": "running" if store.alive(fabric_id) else "stopped",
        "links": list(links.values()),
        # read after the snapshot's seq was taken: every node.power numbered up to it is in here
        "power": power_states(fabric_id, own_hosts(fabric_id, principal)),
    }
    if principal.sees_all_tenants:
        out["summary"] = snap.get("summary") or {}
        out["cycle_s"] = snap.get("cycle_s")
        out["tenants"] = snap.get("tenants") or {}
    else:
        mine = (snap.get("tenants") or {}).get(str(principal.tenant_id)) or {}
        out["reservations"] = mine.get("reservations", {})
        out["reservation_names"] = mine.get("reservation_names", {})
    return out


def link_for(fabric_id: int, link_id: str, principal: Principal) -> dict[str, Any]:
    """One link's live status; 404 when it is not the principal's to see."""
    snap = store.load_snapshot(fabric_id) or {}
    allowed = visible_links(snap, principal)
    if allowed is not None and link_id not in allowed:
        raise NotFound(f"no link {link_id!r}")
    live = (snap.get("links") or {}).get(link_id)
    if live is None and allowed is None and snap:
        raise NotFound(f"no link {link_id!r}")
    return live or {"id": link_id}


# ---- the live page's canvas ----------------------------------------------------------------

_DROP = object()


def own_hosts(fabric_id: int, principal: Principal) -> set[str] | None:
    """Names of the hosts the principal may see named (None: every host): a tenant's are the
    nodes of this fabric its reservations hold (by the node's fabric, not the reservation's home:
    one spanning sites holds nodes of several fabrics, whose names repeat across fabrics)."""
    if principal.sees_all_tenants:
        return None
    if principal.tenant_id is None:
        return set()
    held = ReservationAllocation.objects.filter(
        node__fabric_id=fabric_id,
        reservation__tenant_id=principal.tenant_id,
        reservation__status__in=Reservation.HOLDING,
    )
    return set(held.values_list("node__name", flat=True))


def _scrub(value: Any, hidden: set[str]) -> Any:
    """``value`` without a hidden name: a string naming one goes, and so does a list holding one
    as an item (a link's ``[a, a_port, b, b_port, …]``)."""
    if isinstance(value, str):
        return _DROP if value in hidden else value
    if isinstance(value, dict):
        kept = {k: _scrub(v, hidden) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not _DROP}
    if isinstance(value, list):
        if any(isinstance(v, str) and v in hidden for v in value):
            return _DROP
        return [v for v in (_scrub(item, hidden) for item in value) if v is not _DROP]
    return value


def canvas_for(view: dict[str, Any], graph: FabricGraph, fabric_id: int, principal: Principal) -> dict[str, Any]:
    """The designer's canvas of a fabric as the principal may see it: for a tenant, every host
    that is not its own is unnamed (the host boxes keep their counts; a link to such a host is
    left off its edge's list, which only serves links the tenant sees live anyway)."""
    mine = own_hosts(fabric_id, principal)
    if mine is None:
        return view
    scrubbed: dict[str, Any] = _scrub(view, set(graph.nodes) - mine)
    return scrubbed


# ---- one switch's port table ----------------------------------------------------------------


def _rate(graph: FabricGraph, a: str, b: str) -> tuple[str, int]:
    """The designed rate of a link between ``a`` and ``b``: the slower end's (``4xNDR``)."""
    ends = [graph.port_gbps(dev, 1) for dev in (a, b) if graph.has_device(dev)]
    ends = [e for e in ends if e[0]]
    if not ends:
        return "", 0
    gen = min(ends, key=lambda e: generation_rank(e[0]))[0]
    gbps = min(e[1] for e in ends)
    return width_speed(gen, gbps), gbps


def _port_live(live: dict[str, Any] | None, measured_here: bool) -> dict[str, Any]:
    """A link's live status as seen from one of its ports: Tx/Rx are that port's, so a link
    measured at the far end has them swapped; error counters are the measuring port's."""
    if live is None:
        return {
            "state": "unknown",
            "up": None,
            "tx_bps": None,
            "rx_bps": None,
            "util": None,
            "bucket": None,
            "errors": {},
            "error_totals": {},
            "xmit_wait": None,
        }
    tx, rx = live.get("tx_bps", 0), live.get("rx_bps", 0)
    if not measured_here:
        tx, rx = rx, tx
    return {
        "state": "Active" if live.get("up") else "Down",
        "up": bool(live.get("up")),
        "tx_bps": tx,
        "rx_bps": rx,
        "util": live.get("util", 0),
        "bucket": live.get("bucket", 0),
        "errors": live.get("errors") or {},
        "error_totals": live.get("error_totals") or {},
        "xmit_wait": live.get("xmit_wait", 0),
    }


def switch_ports(fabric: Fabric, switch: str, principal: Principal) -> dict[str, Any]:
    """``switch``'s ports as designed (peer device and port, rate) with each link's live state.

    Operators and auditors get every port, free ones included. A tenant gets only the ports of
    its own links (the host links of its ready reservations), so no other tenant's host is ever
    named; a switch without any of them does not exist for it (404), like a link it may not see.
    """

    graph = revision_graph(fabric.revision)
    sw = graph.switches.get(switch)
    if sw is None:
        raise NotFound(f"no switch {switch!r} on fabric {fabric.pk}")
    snap = store.load_snapshot(fabric.pk) or {}
    allowed = visible_links(snap, principal)
    cabled: dict[int, tuple[Any, str, int]] = {}
    for lk in graph.links:
        if lk.a == switch:
            cabled[lk.a_port] = (lk, lk.b, lk.b_port)
        elif lk.b == switch:
            cabled[lk.b_port] = (lk, lk.a, lk.a_port)
    live = snap.get("links") or {}
    rows = []
    for port in sorted(set(range(1, graph.port_count(switch) + 1)) | set(cabled)):
        hit = cabled.get(port)
        if hit is None:
            if allowed is None:
                rows.append(
                    {
                        "port": port,
                        "link": None,
                        "measured_here": True,
                        "peer": None,
                        "tier": "",
                        "cable": "",
                        "rate": "",
                        "gbps": None,
                        **_port_live(None, True),
                        "state": "free",
                    }
                )
            continue
        lk, peer, peer_port = hit
        # Telemetry names a link by its upper end, always the design link's switch ``b`` end.
        lid = link_id(lk.b, lk.b_port) if lk.b in graph.switches else None
        if allowed is not None and lid not in allowed:
            continue
        here = lk.b == switch
        rate, gbps = _rate(graph, lk.a, lk.b)
        peer_sw = graph.switches.get(peer)
        rows.append(
            {
                "port": port,
                "link": lid,
                "measured_here": here,
                "peer": {
                    "name": peer,
                    "port": peer_port,
                    "kind": "switch" if peer_sw else "node",
                    "tier": peer_sw.tier if peer_sw else "node",
                },
                "tier": lk.tier,
                "cable": lk.cable,
                "rate": rate,
                "gbps": gbps or None,
                **_port_live(live.get(lid) if lid else None, here),
            }
        )
    if allowed is not None and not rows:
        raise NotFound(f"no switch {switch!r} on fabric {fabric.pk}")
    group = fabric_group(fabric.pk) if principal.sees_all_tenants else tenant_group(principal.tenant_id or 0)
    return {
        "fabric": fabric.pk,
        "switch": switch,
        "tier": sw.tier,
        "model": sw.model,
        "ports_total": graph.port_count(switch),
        "group": group,
        "seq": store.snapshot_seq(snap, group),
        "epoch": snap.get("epoch"),
        "at": snap.get("at"),
        "collector": "running" if store.alive(fabric.pk) else "stopped",
        "ports": rows,
    }
