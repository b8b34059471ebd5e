"""Reservations mirrored into a real slurmctld as advance reservations: created with the
reservation's nodes, window and tenant account, updated on extend, removed on release; checked
with ``scontrol show reservation`` (the controller of tests/slurmctld.py, on loopback). Nodes that
lost their path on the fabric are drained with the console's reason and resumed when back."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling import slurm_mirror
from scheduling.models import Node, Reservation
from scheduling.services import lifecycle, node_paths
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
    assert slurm_mirror.sync() == {"create": 2, "update": 0, "delete": 0, "drain": 0, "resume": 0}
    have = shown(slurm)
    assert set(have) == {f"res-{mine.pk}", f"res-{theirs.pk}", "maint"}
    for r in (mine, theirs):
        fields = have[f"res-{r.pk}"]
        assert set(slurm.hostnames(fields["Nodes"])) == set(r.placement["nodes"])
        assert fields["Accounts"] == r.tenant.slug
        assert fields["EndTime"] == utc(r.end)
    assert slurm_mirror.sync() == {"create": 0, "update": 0, "delete": 0, "drain": 0, "resume": 0}  # idempotent

    # extending moves the end in Slurm
    new_end = mine.end + dt.timedelta(hours=1)
    lifecycle.extend(ACTOR, OPERATOR, mine, new_end)
    assert slurm_sync_task() == {
        "create": 0,
        "update": 1,
        "delete": 0,
        "drain": 0,
        "resume": 0,
    }  # what beat runs every tick
    assert shown(slurm)[f"res-{mine.pk}"]["EndTime"] == utc(new_end)

    # releasing removes it; the other tenant's and Slurm's own stay
    lifecycle.release(ACTOR, OPERATOR, mine)
    assert Reservation.objects.get(pk=mine.pk).status not in Reservation.HOLDING
    assert slurm_mirror.sync() == {"create": 0, "update": 0, "delete": 1, "drain": 0, "resume": 0}
    assert set(shown(slurm)) == {f"res-{theirs.pk}", "maint"}


def test_nothing_is_mirrored_without_a_slurm_conf(settings, booked):  # noqa: F811
    settings.SLURM_MIRROR_CONF = ""
    assert slurm_sync_task() == {}
    assert settings.CELERY_BEAT_SCHEDULE["scheduling-slurm-sync"]["task"] == "scheduling.slurm_sync"


def nodes_shown(ctld: Slurmctld) -> dict[str, tuple[str, str]]:
    """``scontrol -o show node``, read here: node → (State, Reason without Slurm's [user@time])."""
    out = {}
    for line in ctld.scontrol("-o", "show", "node").splitlines():
        name = re.search(r"NodeName=(\S+)", line)
        state = re.search(r" State=(\S+)", line)
        reason = re.search(r" Reason=(.+?) \[[^\]]+\]", line)
        if name and state:
            out[name.group(1)] = (state.group(1), reason.group(1) if reason else "")
    return out


def test_a_node_that_lost_its_path_is_drained_in_slurm_and_resumed_when_back(tmp_path, settings, booked):  # noqa: F811
    mine, _ = booked
    names = sorted(Node.objects.filter(fabric=mine.fabric).values_list("name", flat=True))
    ctld = Slurmctld(tmp_path)
    ctld.start(names, "", node_state="UNKNOWN")  # (FUTURE nodes cannot be drained)
    settings.SLURM_MIRROR_CONF = str(ctld.conf)
    try:
        ctld.scontrol("update", f"NodeName={names[1]}", "State=DRAIN", "Reason=bad DIMM")  # an operator's own
        node = Node.objects.get(fabric=mine.fabric, name=names[0])
        why = f"link su01-leaf-r1/3 down ({names[0]} HCA-1)"
        assert node_paths.mark(ACTOR, node.pk, why)
        assert not node_paths.mark(ACTOR, node.pk, why)  # marked once
        node.refresh_from_db()
        assert (node.state, node.path_lost) == (Node.State.DRAINING, f"ibconsole: {why}")  # no new placement

        counts = slurm_mirror.sync()
        assert (counts["drain"], counts["resume"]) == (1, 0)
        shown_now = nodes_shown(ctld)
        assert "DRAIN" in shown_now[names[0]][0].split("+") and shown_now[names[0]][1] == f"ibconsole: {why}"
        assert (slurm_mirror.sync()["drain"], slurm_mirror.sync()["resume"]) == (0, 0)  # idempotent

        assert node_paths.clear(ACTOR, node.pk)
        node.refresh_from_db()
        assert (node.state, node.path_lost) == (Node.State.AVAILABLE, "")
        assert slurm_mirror.sync()["resume"] == 1
        shown_now = nodes_shown(ctld)
        assert "DRAIN" not in shown_now[names[0]][0].split("+")
        assert "DRAIN" in shown_now[names[1]][0].split("+") and shown_now[names[1]][1] == "bad DIMM"  # left alone
        assert slurm_mirror.sync()["resume"] == 0
    finally:
        ctld.stop()
