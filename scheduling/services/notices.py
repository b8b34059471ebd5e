"""Scheduling's notifications: the reservation events it emits through :mod:`console.notify`.

Each runs inside the transaction of the state change it reports, so the event (and its
deliveries and e-mail, published after commit) exists exactly when the change does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.utils import timezone

from console.notify.models import Event
from console.notify.services import Notice, emit, iso
from scheduling.models import Node, Reservation, ReservationAllocation

S = Reservation.Status


def reservation_data(reservation: Reservation) -> dict[str, Any]:
    """The reservation as every event shows it: its own nodes only."""
    nodes = (
        ReservationAllocation.objects.filter(reservation=reservation)
        .values_list("node__name", flat=True)
        .distinct()
        .order_by("node__name")
    )
    return {
        "id": reservation.pk,
        "name": reservation.name,
        "status": reservation.status,
        "pool": reservation.pool.name,
        "gpus": reservation.gpus,
        "nodes": list(nodes),
        "start": iso(reservation.start),
        "end": iso(reservation.end),
    }


def notify(reservation: Reservation, event_type: str, *, dedupe_key: str | None = None, **extra: Any) -> None:
    emit(
        Notice(
            tenant_id=reservation.tenant_id,
            type=event_type,
            data={"reservation": reservation_data(reservation), **extra},
            reservation_id=reservation.pk,
            owner_id=reservation.created_by_id,
            dedupe_key=dedupe_key,
        )
    )


def ready(reservation: Reservation) -> None:
    assert reservation.ready_at is not None
    notify(reservation, "reservation.ready", ready_at=iso(reservation.ready_at))


def preempted(reservation: Reservation) -> None:
    notify(reservation, "reservation.preempted", reason=reservation.reason)


def failed(reservation: Reservation, change_id: int, error: str) -> None:
    """A change carrying its partition failed: once per reservation and change."""
    notify(reservation, "reservation.failed", dedupe_key=f"failed:{reservation.pk}:{change_id}", error=error)


def placed(reservation: Reservation, waited_s: int) -> None:
    notify(reservation, "reservation.placed", waited_s=max(0, waited_s))


def expiring(now: dt.datetime) -> int:
    """``reservation.expiring`` for live reservations ending within the lead, once each (the
    dedupe key); the periodic tick calls it. Returns how many were sent."""
    lead = dt.timedelta(seconds=settings.NOTIFY_EXPIRING_LEAD_S)
    soon = Reservation.objects.filter(
        status__in=(S.PROVISIONING, S.READY), end__gt=now, end__lte=now + lead
    ).select_related("pool")
    sent_already = set(
        Event.objects.filter(type="reservation.expiring", reservation_id__in=soon.values("pk")).values_list(
            "reservation_id", flat=True
        )
    )
    sent = 0
    for reservation in soon.exclude(pk__in=sent_already):
        notify(
            reservation,
            "reservation.expiring",
            dedupe_key=f"expiring:{reservation.pk}",
            expires_at=iso(reservation.end),
            lead_s=int(lead.total_seconds()),
        )
        sent += 1
    return sent


def fabric_fault(reservation_ids: Iterable[int], fault: dict[str, Any]) -> int:
    """A link or node failure touching these reservations' nodes (from telemetry's alarms):
    ``fault`` is ``{kind, severity, message, opened_at}``, the same for each reservation."""
    live = Reservation.objects.filter(pk__in=list(reservation_ids), status__in=Reservation.HOLDING).select_related(
        "pool"
    )
    count = 0
    for reservation in live.order_by("pk"):
        notify(reservation, "reservation.fabric_fault", fault=fault)
        count += 1
    return count


def node_failed(node: Node) -> int:
    """``reservation.fabric_fault`` (kind ``node_down``) for the live reservations holding GPUs of
    ``node`` now: an operator marked it down or powered off."""
    now = timezone.now()
    holding = ReservationAllocation.objects.filter(node=node, start__lte=now, end__gt=now).values_list(
        "reservation_id", flat=True
    )
    fault = {
        "kind": "node_down",
        "severity": "critical",
        "message": f"node {node.name} is {node.state}",
        "opened_at": iso(now),
    }
    return fabric_fault(set(holding), fault)


def power_failed(reservation_ids: Iterable[int], node: Node, attempts: int, failure_id: int) -> int:
    """``reservation.fabric_fault`` (kind ``node_down``) for the waiting reservations that need
    ``node``, which failed to power on ``attempts`` times and is not retried any more: once per
    reservation and failure (``failure_id``, the power event; the dedupe key). Returns how many
    were sent."""
    since = node.power_changed_at or timezone.now()
    fault = {
        "kind": "node_down",
        "severity": "critical",
        "message": f"node {node.name} failed to power on {attempts} times; an operator must repair it",
        "opened_at": iso(since),
    }
    # Only those of them booked on this node: the caller's list may hold reservations waiting on
    # other nodes (the periodic wake asks for every off node at once), of other tenants.
    waiting = Reservation.objects.filter(
        pk__in=list(reservation_ids),
        status__in=(S.PLACED, S.PROVISIONING),
    ).filter(pk__in=ReservationAllocation.objects.filter(node=node, end__gt=timezone.now()).values("reservation_id"))
    count = 0
    for reservation in waiting.select_related("pool").order_by("pk"):
        key = f"power-failed:{reservation.pk}:{failure_id}"
        notify(reservation, "reservation.fabric_fault", dedupe_key=key, fault=fault)
        count += 1
    return count
