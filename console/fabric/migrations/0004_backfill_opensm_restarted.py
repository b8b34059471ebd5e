"""Changes finished before the pipeline recorded ``outcome.opensm_restarted`` said so only in a
step's log ("restarting OpenSM: …" in the QoS step): copy that into the outcome so the change list
flags and filters them like new ones."""

from django.db import migrations


def backfill(apps, schema_editor):
    ChangeRequest = apps.get_model("fabric", "ChangeRequest")
    ChangeStep = apps.get_model("fabric", "ChangeStep")
    restarted = set(
        ChangeStep.objects.filter(log__contains="restarting OpenSM").values_list("change_id", flat=True).distinct()
    )
    for change in ChangeRequest.objects.exclude(outcome={}).only("id", "outcome").iterator():
        if "opensm_restarted" not in change.outcome:
            change.outcome["opensm_restarted"] = change.pk in restarted
            change.save(update_fields=["outcome"])


class Migration(migrations.Migration):
    dependencies = [("fabric", "0003_port_speed_width")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True)]
