"""Start-up recovery: every process that starts drives on what a crash left in flight.

Called when the console starts (``manage.py up``), when a Celery worker's consumer (re)connects
to the broker and when beat starts (``console/celery.py``). A crash can leave a reservation
``provisioning`` or ``ending`` with its ``fabric.reconcile`` message never published (the web
process died between commit and publish, the in-memory broker of the embedded mode died with
it, a Redis restart lost the queue), or its change ``applying`` under the lease of a dead
worker. Waiting for the periodic tick's stuck detection takes minutes; this takes one reconcile.
Idempotent: reconciling a converged fabric creates nothing, a duplicate push message is refused
by the change's lease.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Q

from console.fabric.services import publish_reconcile, recover_changes
from scheduling.models import Reservation, ReservationSubnet
from scheduling.services.lifecycle import tick

log = logging.getLogger(__name__)
S = Reservation.Status


@dataclass
class Recovered:
    """What :func:`recover` did: changes by id, the fabrics it asked to reconcile."""

    released: list[int] = field(default_factory=list)
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    republished: list[int] = field(default_factory=list)
    reconciled: list[int] = field(default_factory=list)
    ticked: dict[str, int] = field(default_factory=dict)


def in_flight_fabrics() -> set[int]:
    """Fabrics with a reservation waiting for the wire on them: provisioning (its P_Key not
    verified there yet), or ending or wound down with its P_Key still live there."""
    waiting = ReservationSubnet.objects.filter(
        Q(reservation__status=S.PROVISIONING, verified_at__isnull=True)
        | Q(reservation__status__in=(S.ENDING, S.CANCELLED, S.PREEMPTED), pkey_live=True)
    )
    return set(waiting.values_list("fabric_id", flat=True).distinct())


def recover(*, dead_workers: Iterable[str] = (), started_at: dt.datetime | None = None) -> Recovered:
    """Release the leases of ``dead_workers`` (workers starting now under those names) taken
    before ``started_at``, resume the changes whose lease expired, republish queued ones, and
    reconcile every fabric with reservations in flight or changes open (after the tick has
    started and ended the windows that are due)."""
    ticked = tick()
    changes = recover_changes(dead_workers=dead_workers, started_at=started_at)
    fabrics = sorted(in_flight_fabrics() | changes.open_fabrics)
    for fabric_id in fabrics:
        publish_reconcile(fabric_id)
    done = Recovered(changes.released, changes.requeued, changes.failed, changes.republished, fabrics, ticked)
    if fabrics or changes.released or changes.requeued or changes.republished:
        log.info("start-up recovery: %s", done)
    return done
