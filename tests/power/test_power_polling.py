"""A transition is driven by short tasks, never one long wait: ``power.drive`` sends the BMC
action and reads the status once, then re-queues ``power.poll`` until the BMC reports the target
or the deadline (the node type's boot time plus margin from the ``powering-*`` change) passes.
A BMC answer arriving after the reaper gave the transition up is recorded, not dropped.

    [sushy-emulator] <-- Redfish -- drive → poll → poll … (each one status read)
"""

from __future__ import annotations

import datetime as dt
import time

import pytest
from django.conf import settings
from django.db.models import F

from console.power import services, tasks
from console.power.models import PowerEvent
from scheduling.models import Node
from tests.power.conftest import SYSTEM_ACTOR, emulator_power
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db

#: DGX-H100 in the built-in catalogue: 420 s to boot; the power app adds a 5 min margin
DGX_BOOT_S = 420
MARGIN_S = 300


@pytest.fixture
def node(db):
    fabric = make_fabric("poll", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    return Node.objects.filter(fabric=fabric).order_by("pk").first()


def test_drive_sends_the_action_and_returns_with_one_poll_queued(node, attach_bmc, redfish):
    # given a node going off through a BMC that applies a reset 1 to 11 s later
    bmc = attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    changed_at = Node.objects.get(pk=node.pk).power_changed_at
    queued: list[tuple[int, str, float]] = []
    # when the drive task runs
    state = services.drive(node.pk, "off", requeue=lambda *poll: queued.append(poll))
    # then it returns at once, the node still powering off, with exactly one poll queued whose
    # deadline is the boot time plus margin from the power-off
    assert state == "powering-off" == Node.objects.get(pk=node.pk).power_state
    assert queued == [(node.pk, "off", changed_at.timestamp() + DGX_BOOT_S + MARGIN_S)]
    # and each poll reads once and re-queues itself until the BMC reports off
    until = time.monotonic() + 60  # the emulator applies it within 11 s
    while queued:
        assert time.monotonic() < until, "the BMC never reported off"
        time.sleep(0.2)  # the task's countdown, shortened
        state = services.poll(*queued.pop(), requeue=lambda *poll: queued.append(poll))
    assert state == "off" and emulator_power(redfish, bmc) == "Off"


def test_power_tasks_run_far_below_the_workers_soft_time_limit():
    for task in (tasks.drive_task, tasks.poll_task):
        assert task.soft_time_limit is not None and task.soft_time_limit < settings.CELERY_TASK_SOFT_TIME_LIMIT / 5
        assert task.time_limit is not None and task.soft_time_limit < task.time_limit


def test_a_poll_past_its_deadline_records_failed(node, attach_bmc):
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    queued: list[tuple[int, str, float]] = []
    assert services.drive(node.pk, "off", requeue=lambda *poll: queued.append(poll)) == "powering-off"
    # a poll whose deadline has passed while the BMC still reports on
    assert services.poll(node.pk, "off", 0.0, requeue=lambda *poll: queued.append(poll)) == "failed"
    assert len(queued) == 1  # only drive's: the late poll queued nothing
    last = PowerEvent.objects.filter(node=node).first()
    assert last is not None and last.to_state == "failed" and not last.intended and "deadline" in last.reason


def test_a_soft_time_limit_reads_again_before_the_deadline_and_fails_after(node, attach_bmc):
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    queued: list[tuple[int, str, float]] = []
    ahead = dt.datetime.now(dt.UTC).timestamp() + 600
    assert services.interrupted(node.pk, "off", ahead, requeue=lambda *p: queued.append(p)) == "powering-off"
    assert queued == [(node.pk, "off", ahead)]
    # the drive task's limit (no deadline passed in): the transition's own deadline, still ahead
    assert services.interrupted(node.pk, "off", None, requeue=lambda *p: queued.append(p)) == "powering-off"
    assert len(queued) == 2 and queued[1][2] > dt.datetime.now(dt.UTC).timestamp()
    # and once the transition is older than boot time plus margin, it is given up
    Node.objects.filter(pk=node.pk).update(power_changed_at=F("power_changed_at") - dt.timedelta(hours=1))
    assert services.interrupted(node.pk, "off", None, requeue=lambda *p: queued.append(p)) == "failed"
    assert len(queued) == 2


def test_a_bmc_answer_after_the_reaper_gave_up_is_recorded(node, attach_bmc, redfish):
    # given a power-off sent to the BMC, its poll still queued (a busy worker)
    bmc = attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    queued: list[tuple[int, str, float]] = []
    assert services.drive(node.pk, "off", requeue=lambda *poll: queued.append(poll)) == "powering-off"
    # when the reaper finds the transition too old and marks the node failed
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=DGX_BOOT_S + MARGIN_S) - dt.timedelta(minutes=2)
    Node.objects.filter(pk=node.pk).update(power_changed_at=long_ago)
    assert services.reap_stuck() == [node.pk]
    # and the BMC then reports off to the poll that finally runs
    state = "failed"
    for _ in range(100):
        state = services.poll(*queued[0], requeue=lambda *poll: queued.append(poll))
        if state == "off":
            break
        assert state == "failed"
        time.sleep(0.2)
    # then the node is off, and the late answer is a power event of its own
    assert state == "off" == Node.objects.get(pk=node.pk).power_state
    assert emulator_power(redfish, bmc) == "Off"
    history = list(PowerEvent.objects.filter(node=node).order_by("at", "pk").values_list("from_state", "to_state"))
    assert history == [("on", "powering-off"), ("powering-off", "failed"), ("failed", "off")]
    late = PowerEvent.objects.filter(node=node).first()
    assert late is not None and "late answer" in late.reason and late.actor == "bmc"
    assert len(queued) == 1  # a given-up transition is read, never re-queued
