"""Reservations mirrored into a real slurmctld as advance reservations: created with the
reservation's nodes, window and tenant account, updated on extend, removed on release; checked
with ``scontrol show reservation`` (the controller of tests/slurmctld.py, on loopback)."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling import slurm_mirror
from scheduling.models import Node, Reservation
from scheduling.services import lifecycle
from scheduling.tasks import slurm_sync_task
from tests.needs import needs
from tests.scheduling.test_reservation_pages import booked  # noqa: F401  (fixture)
from tests.slurmctld import Slurmctld

pytestmark = [pytest.mark.django_db, needs("slurm")]
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def slurm(tmp_path, settings, booked):  # noqa: F811
    """A slurmctld whose nodes are the pool's; the mirror pointed at it."""
    mine, _ = booked
    ctld = Slurmctld(tmp_path)
    ctld.start(sorted(Node.objects.filter(fabric=mine.fabric).values_list("name", flat=True)), "")
    settings.SLURM_MIRROR_CONF = str(ctld.conf)
    yield ctld
    ctld.stop()


def shown(ctld: Slurmctld) -> dict[str, dict[str, str]]:
    """``scontrol -o show reservation`` in UTC: name → its fields."""
    ctld.env["TZ"] = "UTC"
    out = {}
    for line in ctld.scontrol("-o", "show", "reservation").splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "ReservationName" in fields:
            out[fields["ReservationName"]] = fields
    return out


def utc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def test_reservations_are_created_extended_and_released_in_slurm(slurm, booked):  # noqa: F811
    mine, theirs = booked
    # a reservation of Slurm's own, which the mirror must leave alone
    slurm.scontrol(
        "create",
        "reservation",
        "ReservationName=maint",
        "StartTime=now+1day",
        "Duration=60",
        "Nodes=ALL",
        "Users=root",
        "Flags=MAINT,IGNORE_JOBS",
    )

    # when the mirror runs, both reservations appear with their nodes, end and tenant account
    assert slurm_mirror.sync() == {"create": 2, "update": 0, "delete": 0}
    have = shown(slurm)
    assert set(have) == {f"res-{mine.pk}", f"res-{theirs.pk}", "maint"}
    for r in (mine, theirs):
        fields = have[f"res-{r.pk}"]
        assert set(slurm.hostnames(fields["Nodes"])) == set(r.placement["nodes"])
        assert fields["Accounts"] == r.tenant.slug
        assert fields["EndTime"] == utc(r.end)
    assert slurm_mirror.sync() == {"create": 0, "update": 0, "delete": 0}  # idempotent

    # extending moves the end in Slurm
    new_end = mine.end + dt.timedelta(hours=1)
    lifecycle.extend(ACTOR, OPERATOR, mine, new_end)
    assert slurm_sync_task() == {"create": 0, "update": 1, "delete": 0}  # what beat runs every tick
    assert shown(slurm)[f"res-{mine.pk}"]["EndTime"] == utc(new_end)

    # releasing removes it; the other tenant's and Slurm's own stay
    lifecycle.release(ACTOR, OPERATOR, mine)
    assert Reservation.objects.get(pk=mine.pk).status not in Reservation.HOLDING
    assert slurm_mirror.sync() == {"create": 0, "update": 0, "delete": 1}
    assert set(shown(slurm)) == {f"res-{theirs.pk}", "maint"}


def test_nothing_is_mirrored_without_a_slurm_conf(settings, booked):  # noqa: F811
    settings.SLURM_MIRROR_CONF = ""
    assert slurm_sync_task() == {}
    assert settings.CELERY_BEAT_SCHEDULE["scheduling-slurm-sync"]["task"] == "scheduling.slurm_sync"
