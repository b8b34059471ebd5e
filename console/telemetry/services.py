"""Telemetry services: samples, history, events (lifecycle + audit) and the reservation ↔ link map.

Every write goes through a function here; live messages leave through
``console.broadcast.publish`` after the transaction commits.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Avg, Count, IntegerField, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Cast, Coalesce, TruncMinute
from django.utils import timezone

from console.broadcast import fabric_group, publish, tenant_group
from console.fabric.changes.requests import REPAIR_REASON
from console.fabric.models import ChangeRequest
from console.notify.services import iso
from console.telemetry.alarms import Transition
from console.telemetry.core import BUSY_AT, LinkStatus, bucket_of
from console.telemetry.models import FabricEvent, LinkSample
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden
from console.tenancy.models import Principal
from scheduling.models import Reservation, ReservationAllocation, ReservationSubnet
from scheduling.services import notices

FAILED_PUSH = (ChangeRequest.Status.FAILED, ChangeRequest.Status.ROLLED_BACK)


@dataclass(frozen=True)
class ReservationNodes:
    """A ready reservation as telemetry needs it: owner and design node names."""

    id: int
    tenant_id: int
    nodes: tuple[str, ...]
    name: str = ""  # what the live filters show (the reservation's name, else its partition's)
    tenant_name: str = ""
    sl: int = 0  # its class's service level (the traffic model puts its flows on that SL's VL)


def ready_reservations(fabric_id: int) -> list[ReservationNodes]:
    """Ready reservations holding nodes of a fabric, with those nodes (allocation order = ring
    order) and the SL they use on it: a spanning reservation is on each fabric it touches, with
    that fabric's nodes and SL."""

    touching = Q(fabric_id=fabric_id) | Q(subnets__fabric_id=fabric_id)
    here = ReservationSubnet.objects.filter(reservation=OuterRef("pk"), fabric_id=fabric_id).values("sl")[:1]
    rows = (
        Reservation.objects.filter(touching, status=Reservation.Status.READY)
        .order_by()
        .distinct()
        .annotate(sl_here=Coalesce(Subquery(here), "sl"))  # its SL on this fabric (its subnet row's)
        .values_list("pk", "tenant_id", "name", "tenant__name", "sl_here", "fabric_id")
    )
    meta: dict[int, tuple[int, str, str, int]] = {}
    home: set[int] = set()  # homed here: listed even without nodes here
    for pk, tid, name, tenant, sl, home_fabric in rows:
        meta[pk] = (tid, name or f"res-{pk}", tenant, sl)
        if home_fabric == fabric_id:
            home.add(pk)
    nodes: dict[int, list[str]] = defaultdict(list)
    pairs = (
        ReservationAllocation.objects.filter(reservation_id__in=list(meta), node__fabric_id=fabric_id)
        .order_by("reservation_id", "node__name")
        .values_list("reservation_id", "node__name")
        .distinct()
    )
    for res_id, name in pairs:
        if name not in nodes[res_id]:
            nodes[res_id].append(name)
    return [
        ReservationNodes(pk, meta[pk][0], tuple(nodes[pk]), meta[pk][1], meta[pk][2], meta[pk][3])
        for pk in sorted(meta)
        if nodes[pk] or pk in home
    ]


# ---- samples and history ------------------------------------------------------------------


def store_samples(
    fabric_id: int, at: dt.datetime, rows: Mapping[str, dict[str, Any]], switches: Mapping[str, tuple[str, str]]
) -> int:
    """One raw sample per link (``rows``: link → averaged tx/rx/util/errors/up)."""
    objs = [
        LinkSample(
            fabric_id=fabric_id,
            link_id=lid,
            switch=switches[lid][0],
            tier=switches[lid][1],
            at=at,
            tx_bps=r["tx_bps"],
            rx_bps=r["rx_bps"],
            util=r["util"],
            errors=r["errors"],
            error_counts=r.get("error_counts") or {},
            up=r["up"],
        )
        for lid, r in rows.items()
        if lid in switches
    ]
    LinkSample.objects.bulk_create(objs, batch_size=2000)
    return len(objs)


def downsample_and_prune(now: dt.datetime | None = None) -> dict[str, int]:
    """Fold finished minutes of raw samples into minute averages; drop expired rows."""
    now = now or timezone.now()
    this_minute = now.replace(second=0, microsecond=0)
    made = 0
    for fabric_id in set(LinkSample.objects.filter(resolution=0).values_list("fabric_id", flat=True)):
        done = LinkSample.objects.filter(fabric_id=fabric_id, resolution=60).aggregate(last=Max("at"))["last"]
        raw = LinkSample.objects.filter(fabric_id=fabric_id, resolution=0, at__lt=this_minute)
        if done is not None:
            raw = raw.filter(at__gte=done + dt.timedelta(minutes=1))
        groups = (
            raw.annotate(minute=TruncMinute("at"))
            .values("minute", "link_id", "switch", "tier")
            .annotate(
                tx=Avg("tx_bps"),
                rx=Avg("rx_bps"),
                util=Avg("util"),
                errors=Sum("errors"),
                ups=Sum(Cast("up", IntegerField())),
                n=Count("id"),
            )
        )
        objs = [
            LinkSample(
                fabric_id=fabric_id,
                link_id=g["link_id"],
                switch=g["switch"],
                tier=g["tier"],
                resolution=60,
                at=g["minute"],
                tx_bps=g["tx"] or 0,
                rx_bps=g["rx"] or 0,
                util=g["util"] or 0,
                errors=g["errors"] or 0,
                up=(g["ups"] or 0) == (g["n"] or 0),
            )
            for g in groups
        ]
        LinkSample.objects.bulk_create(objs, batch_size=2000)
        made += len(objs)
    raw_cut = now - dt.timedelta(seconds=settings.TELEMETRY_RAW_RETENTION_S)
    min_cut = now - dt.timedelta(seconds=settings.TELEMETRY_MINUTE_RETENTION_S)
    raw_gone, _ = LinkSample.objects.filter(resolution=0, at__lt=raw_cut).delete()
    min_gone, _ = LinkSample.objects.filter(resolution=60, at__lt=min_cut).delete()
    return {"minutes": made, "raw_pruned": raw_gone, "minute_pruned": min_gone}


def history(
    fabric_id: int, links: Iterable[str] | None, *, since: dt.datetime, resolution: int | None = None
) -> dict[str, list[list[float]]]:
    """link → [[unix time, tx_bps, rx_bps, util, errors], …] since ``since``; raw within the
    raw retention, minute averages beyond it (or as asked)."""
    if resolution is None:
        raw_from = timezone.now() - dt.timedelta(seconds=settings.TELEMETRY_RAW_RETENTION_S)
        resolution = 0 if since >= raw_from else 60
    qs = LinkSample.objects.filter(fabric_id=fabric_id, resolution=resolution, at__gte=since)
    if links is not None:
        qs = qs.filter(link_id__in=list(links))
    out: dict[str, list[list[float]]] = defaultdict(list)
    for lid, at, tx, rx, util, errors in qs.order_by("at").values_list(
        "link_id", "at", "tx_bps", "rx_bps", "util", "errors"
    )[:50_000]:
        out[lid].append([at.timestamp(), tx, rx, util, errors])
    return dict(out)


# ---- events -------------------------------------------------------------------------------


def event_body(event: FabricEvent, principal: Principal | None = None) -> dict[str, Any]:
    """The live/API shape of an event; a tenant sees only its own reservations in it."""
    reservations = list(event.reservations)
    if principal is not None and not principal.sees_all_tenants:
        mine = _reservations_of_tenant(principal.tenant_id, reservations)
        reservations = [r for r in reservations if r in mine]
    return {
        "id": event.pk,
        "kind": event.kind,
        "severity": event.severity,
        "status": event.status,
        "subject": event.subject,
        "message": event.message,
        "opened_at": event.opened_at.isoformat(),
        "reservations": reservations,
    }


def _reservations_of_tenant(tenant_id: int | None, ids: list[int]) -> set[int]:
    if tenant_id is None or not ids:
        return set()
    return set(Reservation.objects.filter(pk__in=ids, tenant_id=tenant_id).values_list("pk", flat=True))


def _announce(event: FabricEvent, tenant_ids: Iterable[int]) -> None:
    body = event_body(event)
    publish(fabric_group(event.fabric_id), {"type": "event", "fabric": event.fabric_id, "event": body})
    for tid in sorted(set(tenant_ids)):
        mine = _reservations_of_tenant(tid, body["reservations"])
        tenant_body = dict(body, reservations=[r for r in body["reservations"] if r in mine])
        publish(tenant_group(tid), {"type": "event", "fabric": event.fabric_id, "event": tenant_body})


#: What the console does about each kind of fault, as a tenant's notice says it.
FAULT_ACTIONS: dict[str, str] = {
    FabricEvent.Kind.LINK_DOWN: "the subnet manager routes around the link; operators are alerted",
    FabricEvent.Kind.LINK_ERRORS: "operators are alerted; the health policy isolates the port if it keeps erring",
    FabricEvent.Kind.LINK_FLAPPING: "operators are alerted; the health policy isolates the port if it keeps dropping",
    FabricEvent.Kind.SM_TAKEOVER: "a standby subnet manager took over; no action needed",
    FabricEvent.Kind.WIRE_DRIFT: "the console pushed your partition again",
}


def fault_of(event: FabricEvent) -> dict[str, Any]:
    """What ``reservation.fabric_fault`` says of an event: its kind, the cause in words, the
    switch port of a link's fault, and what the console does about it (the event's detail stays
    with operators; a switch port names no host)."""
    out = {
        "kind": event.kind,
        "severity": event.severity,
        "message": event.message,
        "opened_at": iso(event.opened_at),
        "action": FAULT_ACTIONS.get(event.kind, "operators are alerted"),
    }
    if event.kind in (FabricEvent.Kind.LINK_DOWN, FabricEvent.Kind.LINK_ERRORS, FabricEvent.Kind.LINK_FLAPPING):
        out["port"] = event.subject
    return out


def apply_transitions(
    fabric_id: int,
    transitions: Iterable[Transition],
    affected: Mapping[str, list[tuple[int, int]]],
    *,
    actor: Actor,
) -> list[FabricEvent]:
    """Open or auto-resolve events for alarm transitions. ``affected``: subject →
    [(reservation id, tenant id)]. Idempotent: an open condition is never opened twice."""
    changed: list[FabricEvent] = []
    now = timezone.now()
    for t in transitions:
        with transaction.atomic():
            current = (
                FabricEvent.objects.select_for_update()
                .filter(fabric_id=fabric_id, kind=t.kind, subject=t.subject)
                .unresolved()
                .first()
            )
            if t.action == "open":
                if current is not None:
                    continue
                hits = affected.get(t.subject, [])
                event = FabricEvent(
                    fabric_id=fabric_id,
                    kind=t.kind,
                    severity=t.severity,
                    subject=t.subject,
                    message=t.message[:300],
                    detail=t.detail,
                    reservations=sorted({r for r, _ in hits}),
                    opened_at=now,
                )
                try:
                    with transaction.atomic():
                        event.save()
                except IntegrityError:
                    continue  # another collector opened it first
                tenants = sorted({tid for _, tid in hits})
                event.tenants.set(tenants)
                audit.record(actor, "telemetry.event.open", event, after=audit.snapshot(event))
                if event.kind != FabricEvent.Kind.PUSH_FAILED:  # a failed push is reservation.failed
                    notices.fabric_fault(event.reservations, fault_of(event))
                _announce(event, tenants)
                changed.append(event)
            elif t.action == "update":
                if current is None:
                    continue
                before = audit.snapshot(current)
                current.message, current.detail = t.message[:300], t.detail
                current.save(update_fields=["message", "detail"])
                audit.record(actor, "telemetry.event.update", current, before=before, after=audit.snapshot(current))
                _announce(current, current.tenants.values_list("pk", flat=True))
                changed.append(current)
            elif current is not None:
                before = audit.snapshot(current)
                current.status = FabricEvent.Status.RESOLVED
                current.resolved_at = now
                current.resolution = t.message[:200]
                current.save()
                audit.record(
                    actor, "telemetry.event.auto_resolve", current, before=before, after=audit.snapshot(current)
                )
                _announce(current, current.tenants.values_list("pk", flat=True))
                changed.append(current)
    return changed


def _transition(actor: Actor, principal: Principal, event: FabricEvent, new: str) -> FabricEvent:
    if not (principal.is_operator and principal.can_write):
        raise Forbidden("only operators acknowledge or resolve fabric events")
    with transaction.atomic():
        event = FabricEvent.objects.select_for_update().get(pk=event.pk)
        if event.status == FabricEvent.Status.RESOLVED or event.status == new:
            raise Conflict(f"event {event.pk} is already {event.status}")
        before = audit.snapshot(event)
        now = timezone.now()
        event.status = new
        if new == FabricEvent.Status.ACKNOWLEDGED:
            event.acknowledged_at, event.acknowledged_by_id = now, principal.user_id
        else:
            event.resolved_at, event.resolved_by_id = now, principal.user_id
            event.resolution = "resolved by an operator"
        event.save()
        audit.record(
            actor,
            f"telemetry.event.{'acknowledge' if new == 'acknowledged' else 'resolve'}",
            event,
            before=before,
            after=audit.snapshot(event),
        )
        _announce(event, event.tenants.values_list("pk", flat=True))
    return event


def acknowledge(actor: Actor, principal: Principal, event: FabricEvent) -> FabricEvent:
    """open → acknowledged (operators), audited and streamed."""
    return _transition(actor, principal, event, FabricEvent.Status.ACKNOWLEDGED)


def resolve(actor: Actor, principal: Principal, event: FabricEvent) -> FabricEvent:
    """open/acknowledged → resolved (operators), audited and streamed."""
    return _transition(actor, principal, event, FabricEvent.Status.RESOLVED)


def wire_drift_transitions(fabric_id: int, since: dt.datetime) -> list[Transition]:
    """The periodic verification found the wire without what was verified on it (an SM restarted
    with other files, a reimaged SM host) and pushed it again: an alarm per repair since
    ``since``, cleared once the repair is verified."""
    events = dict(
        FabricEvent.objects.filter(fabric_id=fabric_id, kind=FabricEvent.Kind.WIRE_DRIFT).values_list(
            "subject", "status"
        )
    )
    out = []
    repairs = ChangeRequest.objects.filter(fabric_id=fabric_id, reason=REPAIR_REASON, created_at__gte=since)
    for change in repairs.order_by("pk"):
        subject = f"drift-{change.pk}"
        if subject not in events:
            message = f"the ports lost the verified partitions (an SM restart with other files?): re-pushing (change {change.pk})"
            out.append(Transition("open", "wire_drift", subject, "critical", message, {"change": change.pk}))
        if change.status == ChangeRequest.Status.APPLIED and events.get(subject, "open") != "resolved":
            out.append(
                Transition("clear", "wire_drift", subject, message=f"re-pushed and verified (change {change.pk})")
            )
    return out


def push_failure_transitions(fabric_id: int, since: dt.datetime) -> tuple[list[Transition], dict[str, list]]:
    """Failed or rolled-back changes finished since ``since`` that have no event yet."""

    known = set(
        FabricEvent.objects.filter(fabric_id=fabric_id, kind=FabricEvent.Kind.PUSH_FAILED).values_list(
            "subject", flat=True
        )
    )
    out, affected = [], {}
    changes = ChangeRequest.objects.filter(fabric_id=fabric_id, status__in=FAILED_PUSH, finished_at__gte=since)
    for change in changes.order_by("pk"):
        subject = f"change-{change.pk}"
        if subject in known:
            continue
        verb = "rolled back" if change.status == ChangeRequest.Status.ROLLED_BACK else "failed"
        out.append(
            Transition(
                "open",
                "push_failed",
                subject,
                "critical",
                f"partition push (change {change.pk}) {verb}",
                {"change": change.pk, "status": change.status},
            )
        )
        waiting = Reservation.objects.filter(fabric_id=fabric_id, status__in=("provisioning", "ending")).values_list(
            "pk", "tenant_id"
        )
        affected[subject] = list(waiting)
    return out, affected


def change_progress(change_id: int) -> dict[str, Any] | None:
    """The ``change.progress`` message of a change (its status and every step so far)."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None:
        return None
    steps = [
        {"seq": s, "name": n, "target": t, "status": st}
        for s, n, t, st in change.steps.order_by("seq").values_list("seq", "name", "target", "status")
    ]
    msg = {
        "type": "change.progress",
        "change": change.pk,
        "fabric": change.fabric_id,
        "status": change.status,
        "steps": steps,
    }
    if change.error:
        msg["error"] = change.error[:500]
    return msg


def open_conditions(fabric_id: int) -> dict[str, set[str]]:
    """kind → subjects with an unresolved event (to seed a restarted collector's alarms)."""
    out: dict[str, set[str]] = defaultdict(set)
    for kind, subject in FabricEvent.objects.filter(fabric_id=fabric_id).unresolved().values_list("kind", "subject"):
        out[kind].add(subject)
    return dict(out)


def summarise(statuses: Iterable[LinkStatus]) -> dict[str, int]:
    """Counts for /metrics and the page header: ``busy`` links run at ≥ BUSY_AT of line rate,
    ``congested`` ones had PortXmitWait ticks over the sweep."""
    up = down = busy = erroring = congested = 0
    busy_bucket = bucket_of(BUSY_AT)
    for st in statuses:
        up += st.up
        down += not st.up
        busy += st.bucket >= busy_bucket
        erroring += any(st.errors.values())
        congested += st.xmit_wait > 0
    return {"up": up, "down": down, "busy": busy, "erroring": erroring, "congested": congested}
