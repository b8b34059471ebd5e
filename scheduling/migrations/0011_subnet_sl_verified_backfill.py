"""Per-subnet P_Keys take over from the reservation's own: ReservationSubnet gains the SL of the
reservation's class on that fabric and when that fabric verified the P_Key; every existing
reservation with a P_Key gets its row (its fabric, P_Key, liveness); the live-P_Key uniqueness is
ReservationSubnet's constraint alone from now on (a spanning reservation's home-fabric key must
not block that fabric while only another subnet still holds the key)."""

from typing import Any

from django.db import migrations, models

#: Statuses whose P_Key was verified on the wire at some point (ready_at is set for these).
VERIFIED = ("ready", "ending", "released")


def backfill(apps: Any, schema_editor: Any) -> None:
    Reservation = apps.get_model("scheduling", "Reservation")
    ReservationSubnet = apps.get_model("scheduling", "ReservationSubnet")
    have = set(ReservationSubnet.objects.values_list("reservation_id", flat=True))
    rows = [
        ReservationSubnet(
            reservation_id=pk,
            fabric_id=fabric_id,
            pkey=pkey,
            pkey_live=live,
            sl=sl,
            verified_at=ready_at if status in VERIFIED else None,
        )
        for pk, fabric_id, pkey, live, sl, status, ready_at in Reservation.objects.filter(
            pkey__isnull=False
        ).values_list("pk", "fabric_id", "pkey", "pkey_live", "sl", "status", "ready_at")
        if pk not in have
    ]
    ReservationSubnet.objects.bulk_create(rows, batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0010_sites_datasets_subnets"),
    ]

    operations = [
        migrations.AddField(
            model_name="reservationsubnet",
            name="sl",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="reservationsubnet",
            name="verified_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.RemoveConstraint(
            model_name="reservation",
            name="reservation_pkey_live_unique",
        ),
    ]
