"""Every pool gets its booking-generation row: the row the reservation lock locks
(``scheduling.services.locks.reservation_lock``); new pools get theirs when created."""

from django.db import migrations


def create_rows(apps, schema_editor):
    Pool = apps.get_model("scheduling", "Pool")
    BookingGeneration = apps.get_model("scheduling", "BookingGeneration")
    have = set(BookingGeneration.objects.values_list("pool_id", flat=True))
    BookingGeneration.objects.bulk_create(
        [BookingGeneration(pool_id=pk, generation=0) for pk in Pool.objects.values_list("pk", flat=True) if pk not in have]
    )


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0007_reservation_virtual_guids")]

    operations = [migrations.RunPython(create_rows, migrations.RunPython.noop)]
