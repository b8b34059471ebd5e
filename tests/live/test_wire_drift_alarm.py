"""The periodic verification's repair is an alarm: the wire lost what was verified on it, the
console pushes it again; the alarm clears once that push is verified."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric.changes.requests import REPAIR_REASON
from console.fabric.models import ChangeRequest, Fabric
from console.telemetry import services
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")


def test_a_repair_opens_an_alarm_that_clears_when_it_is_verified(su1_revision):  # noqa: F811
    fabric = Fabric.objects.create(name="prod-ib", driver="agent", revision=su1_revision)
    since = timezone.now() - dt.timedelta(minutes=1)
    ChangeRequest.objects.create(fabric=fabric, reason="reconcile: desired ≠ applied")  # an ordinary change
    repair = ChangeRequest.objects.create(fabric=fabric, reason=REPAIR_REASON)
    services.apply_transitions(fabric.pk, services.wire_drift_transitions(fabric.pk, since), {}, actor=ACTOR)
    services.apply_transitions(fabric.pk, services.wire_drift_transitions(fabric.pk, since), {}, actor=ACTOR)
    (event,) = FabricEvent.objects.filter(fabric=fabric)
    assert (event.kind, event.subject, event.severity, event.status) == (
        "wire_drift",
        f"drift-{repair.pk}",
        "critical",
        "open",
    )
    assert f"change {repair.pk}" in event.message
    ChangeRequest.objects.filter(pk=repair.pk).update(status=ChangeRequest.Status.APPLIED)
    services.apply_transitions(fabric.pk, services.wire_drift_transitions(fabric.pk, since), {}, actor=ACTOR)
    event.refresh_from_db()
    assert event.status == "resolved" and "re-pushed and verified" in event.resolution
    services.apply_transitions(fabric.pk, services.wire_drift_transitions(fabric.pk, since), {}, actor=ACTOR)
    assert FabricEvent.objects.filter(fabric=fabric).count() == 1  # not opened again
