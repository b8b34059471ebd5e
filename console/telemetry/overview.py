"""The dashboard's figures (the operator's ``/`` and ``GET /api/overview/``), computed in a fixed
number of queries whatever the number of fabrics, pools or reservations.

Operators and auditors get every fabric's health, grouped on the page under its site with the
site's GPUs and their utilisation (SM state from the collector's last slow check, links down from the live snapshot, links below their designed rate and drift from the
last discovery, open alarms by severity), GPUs, reservations and change requests. A tenant gets
its own version: no fabric list (a fabric-wide figure would tell it about other tenants), its
quota use for ``gpus``, its own reservations, and its own change figures (its reservations waiting
on a push, open push failures touching it).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from console.fabric.agents.services import silent
from console.fabric.models import ChangeRequest, DiscoveryRun, Fabric, FabricAgent, IsolationAudit
from console.telemetry import store
from console.telemetry.models import FabricEvent, ValidationRun
from console.telemetry.port_health import isolated_ports
from console.telemetry.power import INTENDED_OFF
from console.tenancy.models import Principal
from scheduling.models import GPU, HCA, Node, Quota, Reservation, ReservationAllocation

Status = Reservation.Status
PENDING_CHANGES = (
    ChangeRequest.Status.PENDING_APPROVAL,
    ChangeRequest.Status.QUEUED,
    ChangeRequest.Status.APPLYING,
    ChangeRequest.Status.VERIFYING,
)
FAILED_CHANGES = (ChangeRequest.Status.FAILED, ChangeRequest.Status.ROLLED_BACK)
_BAD_GPU = Q(health=GPU.Health.FAILED) | Q(node__state__in=[Node.State.DOWN, Node.State.OFF])


def _sm_state(sm: dict[str, Any], alive: bool) -> str:
    if not alive:
        return "unknown"  # no collector: nothing current to say
    return str(sm.get("state") or "unknown")


def _fabric_rows(events: dict[int, Counter[str]], changes: dict[int, dict[str, int]]) -> list[dict[str, Any]]:
    fabrics = list(Fabric.objects.order_by("name").values("id", "name", "site__slug", "site__name"))
    # The newest run of each fabric in one query, on PostgreSQL and SQLite alike (no DISTINCT ON).
    newest = DiscoveryRun.objects.filter(fabric=OuterRef("pk")).order_by("-created_at", "-id").values("pk")[:1]
    latest_ids = Fabric.objects.annotate(run=Subquery(newest)).values("run")
    latest = {
        run.fabric_id: run
        for run in DiscoveryRun.objects.filter(pk__in=latest_ids).only("fabric_id", "created_at", "compare")
    }
    newest_audit = IsolationAudit.objects.filter(fabric=OuterRef("pk")).order_by("-checked_at", "-id").values("pk")[:1]
    audits = {
        a.fabric_id: a
        for a in IsolationAudit.objects.filter(pk__in=Fabric.objects.annotate(a=Subquery(newest_audit)).values("a"))
    }
    newest_run = (
        ValidationRun.objects.filter(fabric=OuterRef("pk"), state=ValidationRun.State.DONE)
        .order_by("-created_at", "-id")
        .values("pk")[:1]
    )
    validations = {
        v.fabric_id: v
        for v in ValidationRun.objects.filter(pk__in=Fabric.objects.annotate(v=Subquery(newest_run)).values("v")).only(
            "fabric_id", "ok", "verdicts", "finished_at"
        )
    }
    isolated_by_fabric = dict(
        isolated_ports().values("fabric_id").annotate(n=Count("id")).values_list("fabric_id", "n")
    )
    agents: dict[int, list[FabricAgent]] = {}
    for agent in FabricAgent.objects.filter(revoked_at__isnull=True).only(
        "fabric_id", "name", "connected", "last_seen"
    ):
        agents.setdefault(agent.fabric_id, []).append(agent)
    # links whose node is off on purpose (an operator's or the power policy's action): down as
    # intended, never counted as failures (the live page and the alarms agree)
    intended: dict[int, set[str]] = {}
    for fid, leaf, port in HCA.objects.filter(
        node__fabric_id__in=[f["id"] for f in fabrics], node__power_state__in=INTENDED_OFF
    ).values_list("node__fabric_id", "leaf", "leaf_port"):
        intended.setdefault(fid, set()).add(f"{leaf}/{port}")
    rows = []
    for fabric in fabrics:
        fid = fabric["id"]
        snap = store.load_snapshot(fid) or {}
        alive = store.alive(fid)
        sm = snap.get("sm") or {}
        links = snap.get("links") or {}
        off = intended.get(fid, set())
        all_down = [lid for lid, st in links.items() if not st.get("up", True)] if alive else []
        down = sorted(lid for lid in all_down if lid not in off)
        run = latest.get(fid)
        compare = (run.compare or {}) if run is not None else {}
        mismatches = compare.get("mismatches") or []
        degraded = [m for m in mismatches if m.get("kind") == "rate"]
        drift = sum(len(compare.get(k) or []) for k in ("missing", "extra", "miswired", "mismatches"))
        severities = events.get(fid, Counter())
        rows.append(
            {
                "id": fid,
                "name": fabric["name"],
                "site": fabric["site__slug"],
                "site_name": fabric["site__name"],
                "sm_state": _sm_state(sm, alive),
                "links_down": len(down),
                "links_off": len(all_down) - len(down),  # page-only: down with their node powered off
                "links_degraded": len(degraded),
                "alarms_open": sum(severities.values()),
                "drift": drift,
                # page-only detail (the API serializer keeps the documented keys)
                "sm": sm if alive else {},
                "sm_checked_at": dt.datetime.fromtimestamp(sm["at"], dt.UTC) if alive and sm.get("at") else None,
                "collector": "running" if alive else "stopped",
                "down_links": [{"id": lid, "switch": lid.rsplit("/", 1)[0]} for lid in down[:5]],
                "changes": changes.get(fid, {"pending": 0, "failed": 0}),
                "alarms_by_severity": {s: severities.get(s, 0) for s in FabricEvent.Severity.values},
                "discovered_at": run.created_at if run is not None else None,
                "isolation": _isolation(audits.get(fid)),
                "validation": _validation(validations.get(fid)),
                "ports_isolated": isolated_by_fabric.get(fid, 0),
                "agents": {
                    "total": len(agents.get(fid, [])),
                    "connected": sum(1 for a in agents.get(fid, []) if a.connected and not silent(a)),
                },
            }
        )
    return rows


def _validation(run: ValidationRun | None) -> dict[str, Any]:
    """The fabric's last finished validation: when, and which tests failed."""
    if run is None:
        return {"id": None, "ok": None, "failed": [], "at": None}
    return {"id": run.pk, "ok": run.ok, "failed": run.failed, "at": run.finished_at}


def _isolation(audit: IsolationAudit | None) -> dict[str, Any]:
    """The fabric's last isolation audit, as the dashboard shows it."""
    if audit is None:
        return {"checked_at": None}
    problems = [f for f in audit.findings if f.get("kind") != "adopted"]
    return {
        "checked_at": audit.checked_at,
        "leaks": len(audit.leaks),
        "findings": len(problems),
        "pairs": audit.pairs_checked,
        "default": audit.default_membership,
        "drift": bool(audit.drift),
        "error": audit.error,
    }


def _free(row: dict[str, Any]) -> dict[str, int]:
    counts = {k: int(row[k] or 0) for k in ("total", "allocated", "down")}
    counts["free"] = max(0, counts["total"] - counts["allocated"] - counts["down"])
    return counts


def _gpus(now: Any) -> tuple[dict[str, int], list[dict[str, Any]], dict[int, dict[str, int]]]:
    busy = Exists(
        ReservationAllocation.objects.filter(
            gpu=OuterRef("pk"), start__lte=now, end__gt=now, reservation__status__in=Reservation.HOLDING
        )
    )
    counts = {
        "total": Count("id", distinct=True),
        "allocated": Count("id", filter=Q(busy=True), distinct=True),
        "down": Count("id", filter=Q(busy=False) & _BAD_GPU, distinct=True),
    }
    gpus = GPU.objects.annotate(busy=busy)
    overall = gpus.aggregate(**counts)
    per_pool = list(
        gpus.filter(node__pools__isnull=False)
        .values("node__pools__id", "node__pools__name", "node__fabric__name")
        .annotate(**counts)
        .order_by("node__fabric__name", "node__pools__name")
    )
    totals = _free(overall)
    per_fabric = {
        row["node__fabric_id"]: _free(row) for row in gpus.values("node__fabric_id").annotate(**counts).order_by()
    }
    pools = [
        {
            "id": row["node__pools__id"],
            "name": row["node__pools__name"],
            "fabric": row["node__fabric__name"],
            "total": row["total"],
            "allocated": row["allocated"],
            "down": row["down"],
            "free": max(0, row["total"] - row["allocated"] - row["down"]),
        }
        for row in per_pool
    ]
    return {k: totals[k] for k in ("total", "allocated", "free", "down")}, pools, per_fabric


def _site_groups(fabrics: list[dict[str, Any]], gpus: dict[int, dict[str, int]]) -> list[dict[str, Any]]:
    """The fabric rows under their site (sites by name), each site with its GPUs and their
    utilisation (allocated / total); a fabric without a site is a site of its own, after them."""
    groups: dict[str, dict[str, Any]] = {}
    for row in sorted(fabrics, key=lambda r: (r["site"] is None, r["site_name"] or "", r["name"])):
        key = row["site"] or f"fabric:{row['name']}"
        group = groups.setdefault(
            key,
            {"slug": row["site"], "name": row["site_name"] or row["name"], "fabrics": [], "gpus": Counter()},
        )
        group["fabrics"].append(row)
        group["gpus"].update(gpus.get(row["id"], {}))
    for group in groups.values():
        total = group["gpus"]["total"]
        group["gpus"] = {k: group["gpus"][k] for k in ("total", "allocated", "free", "down")}
        group["utilisation"] = group["gpus"]["allocated"] / total if total else None
    return list(groups.values())


def _reservation_counts(queryset: Any) -> dict[str, int]:
    # A push that failed leaves its error on the reservations that waited for it (and they wait on).
    pushed = Q(fabric_error="")
    return queryset.aggregate(
        provisioning=Count("id", filter=Q(status=Status.PROVISIONING) & pushed),
        ready=Count("id", filter=Q(status=Status.READY)),
        failed=Count("id", filter=Q(status__in=(Status.PROVISIONING, Status.ENDING)) & ~pushed),
    )


def overview_for(principal: Principal) -> dict[str, Any]:
    """The dashboard's figures as ``principal`` may see them (the API's keys plus page detail
    under ``detail``)."""
    now = timezone.now()
    if principal.sees_all_tenants:
        events: dict[int, Counter[str]] = {}
        rows = FabricEvent.objects.unresolved().values_list("fabric_id", "severity").annotate(n=Count("id")).order_by()
        for fabric_id, severity, n in rows:
            events.setdefault(fabric_id, Counter())[severity] = n
        per_fabric = {
            row["fabric_id"]: {"pending": row["pending"], "failed": row["failed"]}
            for row in ChangeRequest.objects.values("fabric_id")
            .annotate(
                pending=Count("id", filter=Q(status__in=PENDING_CHANGES)),
                failed=Count("id", filter=Q(status__in=FAILED_CHANGES)),
            )
            .order_by()
        }
        fabrics = _fabric_rows(events, per_fabric)
        gpus, pools, gpus_per_fabric = _gpus(now)
        changes = {k: sum(c[k] for c in per_fabric.values()) for k in ("pending", "failed")}
        return {
            "fabrics": fabrics,
            "gpus": gpus,
            "reservations": _reservation_counts(Reservation.objects.all()),
            "changes": changes,
            "detail": {
                "pools": pools,
                "quotas": [],
                "events": [],
                "sites": _site_groups(fabrics, gpus_per_fabric),
            },
        }
    return _tenant_overview(principal, now)


def _reach(quotas: list[Quota], now: Any) -> dict[str, Any]:
    """What a tenant's quotas let it have, counting each GPU once where pools overlap (a pool
    spanning two sites holds another pool's nodes): ``total``, the GPUs its quotas reach (each
    pool's limit capped at the pool's size, then at the GPUs of all its pools together);
    ``free``, what it could take now (per pool the room left in the quota capped at the pool's
    free GPUs, then at the free GPUs of all its pools together); ``can_get`` the latter per pool."""
    busy = Exists(
        ReservationAllocation.objects.filter(
            gpu=OuterRef("pk"), start__lte=now, end__gt=now, reservation__status__in=Reservation.HOLDING
        )
    )
    free = Q(busy=False) & ~_BAD_GPU
    gpus = GPU.objects.filter(node__pools__in=[q.pool_id for q in quotas]).annotate(busy=busy)
    pools = {
        row["node__pools__id"]: (row["total"], row["free"])
        for row in gpus.values("node__pools__id")
        .annotate(total=Count("id", distinct=True), free=Count("id", filter=free, distinct=True))
        .order_by()
    }
    union = gpus.aggregate(total=Count("id", distinct=True), free=Count("id", filter=free, distinct=True))
    can_get = {
        q.pool_id: max(0, min(q.limit_gpus - int(getattr(q, "used", 0) or 0), pools.get(q.pool_id, (0, 0))[1]))
        for q in quotas
    }
    reach = sum(min(q.limit_gpus, pools.get(q.pool_id, (0, 0))[0]) for q in quotas)
    return {
        "total": min(reach, int(union["total"] or 0)),
        "free": min(sum(can_get.values()), int(union["free"] or 0)),
        "can_get": can_get,
        "pools": pools,
    }


def _tenant_overview(principal: Principal, now: Any) -> dict[str, Any]:
    tenant_id = principal.tenant_id or 0
    mine = Reservation.objects.filter(tenant_id=tenant_id)
    held = ReservationAllocation.objects.filter(
        reservation__tenant_id=tenant_id,
        reservation__status__in=Reservation.HOLDING,
        start__lte=now,
        end__gt=now,
    ).aggregate(
        allocated=Count("gpu", distinct=True),
        down=Count("gpu", filter=Q(gpu__health=GPU.Health.FAILED), distinct=True),
    )
    quotas = list(
        Quota.objects.filter(tenant_id=tenant_id)
        .select_related("pool", "pool__fabric")
        .annotate(
            used=Sum(
                "pool__reservations__gpus",
                filter=Q(
                    pool__reservations__tenant_id=tenant_id,
                    pool__reservations__status__in=Reservation.HOLDING,
                ),
            )
        )
        .order_by("pool__name")
    )
    reach = _reach(quotas, now)
    allocated, down = int(held["allocated"] or 0), int(held["down"] or 0)
    events = list(
        FabricEvent.objects.filter(tenants=tenant_id)
        .unresolved()
        .only("id", "kind", "severity", "status", "message", "opened_at")[:10]
    )
    counts = _reservation_counts(mine)
    return {
        "fabrics": [],
        "gpus": {"total": reach["total"], "allocated": allocated, "free": reach["free"], "down": down},
        "reservations": counts,
        "changes": {
            "pending": counts["provisioning"],  # each waits on its partition's push
            "failed": sum(1 for e in events if e.kind == FabricEvent.Kind.PUSH_FAILED),
        },
        "detail": {
            "pools": [],
            "quotas": [
                {
                    "pool": q.pool.name,
                    "limit": q.limit_gpus,
                    "guaranteed": q.guaranteed_gpus,
                    "used": int(q.used or 0),
                    "pool_gpus": reach["pools"].get(q.pool_id, (0, 0))[0],
                    "can_get": reach["can_get"][q.pool_id],
                }
                for q in quotas
            ],
            "events": events,
        },
    }
