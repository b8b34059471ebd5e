"""Fill a release's demo database up to every reservation status, with that release's code
(``python populate.py`` from its checkout). Self-contained, like probe.py.

The demo seed leaves released, preempted and provisioning reservations; the others are made
here from one of them: new rows without allocations for the states that hold no nodes, and a
provisioning reservation moved on to ready (its allocations kept).
"""

import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django

django.setup()

from scheduling.models import Reservation  # noqa: E402

Status = Reservation.Status
have = set(Reservation.objects.values_list("status", flat=True))
provisioning = Reservation.objects.filter(status=Status.PROVISIONING).order_by("pk")
if Status.READY not in have and provisioning.count() > 1:
    provisioning.filter(pk=provisioning.first().pk).update(status=Status.READY)
template = Reservation.objects.filter(status=Status.RELEASED).order_by("pk").first()
for status in (Status.REQUESTED, Status.QUEUED, Status.PLACED, Status.ENDING, Status.REJECTED, Status.CANCELLED):
    if status in have:
        continue
    row = Reservation.objects.get(pk=template.pk)
    row.pk = None
    row.name = f"upgrade-{status}"
    row.status = status
    row.pkey = None
    row.save()
print(sorted(set(Reservation.objects.values_list("status", flat=True))))
