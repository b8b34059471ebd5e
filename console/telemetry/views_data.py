"""What each principal may see of a fabric's live state (the one place that filters it).

Operators and auditors see every link; a tenant sees only the host links of its own ready
reservations, its own reservations' nodes, and its own live group's sequence number.
"""

from __future__ import annotations

from typing import Any

from console.live.notify import fabric_group, tenant_group
from console.telemetry import store
from console.tenancy.errors import NotFound
from console.tenancy.models import Principal


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
    group = (
        fabric_group(fabric_id) if principal.sees_all_tenants
        else tenant_group(principal.tenant_id or 0)
    )  # fmt: skip
    out: dict[str, Any] = {
        "fabric": fabric_id,
        "group": group,
        "seq": store.current_seq(group),
        "epoch": snap.get("epoch"),
        "at": snap.get("at"),
        "collector": "running" if store.alive(fabric_id) else "stopped",
        "links": list(links.values()),
    }
    if principal.sees_all_tenants:
        out["summary"] = snap.get("summary") or {}
        out["cycle_s"] = snap.get("cycle_s")
        out["tenants"] = snap.get("tenants") or {}
    else:
        mine = (snap.get("tenants") or {}).get(str(principal.tenant_id)) or {}
        out["reservations"] = mine.get("reservations", {})
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
