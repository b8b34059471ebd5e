"""A pool's power policy applied to real nodes with real BMCs (the sushy Redfish emulator): an
idle node past its time is powered off, a node a reservation needs within its boot time is not,
a dry run changes nothing anywhere (database, BMC), the rate limit and pins hold, and the minute
task goes on past a failing pool.

    [policy] --power_off--> [node powering-off] --drive (the worker)--> [emulated BMC: Off]
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.power import policy, services
from console.power.models import PolicyRun, PoolPowerPolicy, PowerEvent
from console.power.tasks import apply_policies_task
from console.tenancy.context import Actor
from console.tenancy.models import Tenant
from scheduling.models import Node
from scheduling.services.reservations import reserve
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, emulator_power
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for, tenant_principal

pytestmark = pytest.mark.django_db
OPERATOR = Actor.system("op-tests")
#: The policy's default margin on top of a node's boot time.
MARGIN = dt.timedelta(minutes=5)


@pytest.fixture
def published(monkeypatch) -> list[tuple[int, str]]:
    """The BMC tasks enqueued after commit (node, action): recorded instead of sent to a broker."""
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(services, "_publish", lambda node_id, action: sent.append((node_id, action)))
    return sent


@pytest.fixture
def idle_pool(attach_bmc):
    """Three DGX-H100 nodes with BMCs in one pool, all on and idle for two hours."""
    fabric = make_fabric("pol", {"topology": "fat-tree", "nodes": 3, "node_type": "DGX-H100"})
    nodes = list(Node.objects.filter(fabric=fabric).order_by("name"))
    bmcs = {node.pk: attach_bmc(node) for node in nodes}
    Node.objects.filter(fabric=fabric).update(power_changed_at=timezone.now() - dt.timedelta(hours=2))
    return make_pool(fabric, "pol", nodes=nodes), nodes, bmcs


def _set(pool, **data):
    data.setdefault("idle_after", dt.timedelta(minutes=30))
    return policy.set_policy(pool.pk, actor=OPERATOR, data={"enabled": True, **data})


def _state(node) -> str:
    return Node.objects.get(pk=node.pk).power_state


def test_an_idle_node_past_its_time_is_powered_off_through_its_bmc(
    idle_pool, redfish, published, django_capture_on_commit_callbacks
):
    pool, nodes, bmcs = idle_pool
    _set(pool, buffer_nodes=2)  # keep two of the three on
    with django_capture_on_commit_callbacks(execute=True):
        run = policy.apply(pool.pk)
    # the one surplus node goes: first by name among equals (same group, same idle time)
    off = nodes[0]
    assert [(a["node"], a["action"], a["outcome"]) for a in run.actions] == [(off.name, "off", "done")]
    assert run.actions[0]["reason"].startswith("idle for 2 h (policy: off after 30 min)")
    assert published == [(off.pk, "off")]
    assert [_state(n) for n in nodes] == ["powering-off", "on", "on"]
    event = PowerEvent.objects.get(node=off)
    assert (event.actor, event.to_state, event.intended) == ("policy", "powering-off", True)
    # when the worker carries the task out, the emulated BMC reports the system off
    assert emulator_power(redfish, bmcs[off.pk]) == "On"
    assert drive_to_end(off.pk, "off") == "off"
    assert emulator_power(redfish, bmcs[off.pk]) == "Off"
    assert [emulator_power(redfish, bmcs[n.pk]) for n in nodes[1:]] == ["On", "On"]


def test_a_node_not_idle_long_enough_stays_on(idle_pool, published):
    pool, nodes, _ = idle_pool
    _set(pool, idle_after=dt.timedelta(hours=3))
    run = policy.apply(pool.pk)
    assert run.actions == [] and run.summary == "nothing to do"
    assert [_state(n) for n in nodes] == ["on"] * 3 and published == []


def test_a_node_reserved_within_its_boot_time_is_never_powered_off(idle_pool, published):
    pool, nodes, _ = idle_pool
    tenant = Tenant.objects.create(name="Soon", slug="soon")
    give_quota(tenant, pool, 24)
    # a reservation of one node starting within boot + margin, another far beyond it
    soon = timezone.now() + services.boot_time(nodes[0]) + MARGIN - dt.timedelta(minutes=1)
    later = timezone.now() + dt.timedelta(hours=5)
    first = reserve(SYSTEM_ACTOR, tenant_principal(tenant), request_for(pool, gpus=8, start=soon))
    second = reserve(SYSTEM_ACTOR, tenant_principal(tenant), request_for(pool, gpus=16, start=later))
    needed = set(first.allocations.values_list("node_id", flat=True))
    assert len(needed) == 1
    _set(pool)
    run = policy.apply(pool.pk)
    switched = {a["node_id"] for a in run.actions if a["outcome"] == "done"}
    # every node but the one needed soon is powered off (the later reservation's node can boot in time)
    assert switched == {n.pk for n in nodes} - needed
    later_only = set(second.allocations.values_list("node_id", flat=True)) - needed
    assert later_only and later_only <= switched
    assert {_state(n) for n in nodes if n.pk in needed} == {"on"}


def test_a_dry_run_changes_nothing_and_sends_nothing(idle_pool, redfish, published, django_capture_on_commit_callbacks):
    pool, nodes, bmcs = idle_pool
    _set(pool, dry_run=True)
    before = list(
        Node.objects.filter(pk__in=[n.pk for n in nodes]).values_list("pk", "power_state", "power_changed_at")
    )
    with django_capture_on_commit_callbacks(execute=True):
        run = policy.apply(pool.pk)
    # it reports what it would do: all three off (no buffer)
    assert run.dry_run and sorted(a["node"] for a in run.actions) == sorted(n.name for n in nodes)
    assert {(a["action"], a["outcome"]) for a in run.actions} == {("off", "would")}
    assert run.summary == "dry run: would power off 3 node(s)"
    # and did nothing: same rows, no power event, no task, every emulated system still on
    after = list(Node.objects.filter(pk__in=[n.pk for n in nodes]).values_list("pk", "power_state", "power_changed_at"))
    assert after == before
    assert not PowerEvent.objects.filter(node__in=nodes).exists() and published == []
    assert [emulator_power(redfish, bmcs[n.pk]) for n in nodes] == ["On"] * 3
    # an operator's dry run of a policy that is not itself a dry run changes nothing either
    _set(pool, dry_run=False)
    run = policy.apply(pool.pk, trigger="operator", actor=OPERATOR, dry_run=True)
    assert run.dry_run and len(run.actions) == 3 and [_state(n) for n in nodes] == ["on"] * 3


def test_the_rate_limit_counts_the_policys_own_actions_in_the_last_minute(idle_pool, published):
    pool, nodes, _ = idle_pool
    _set(pool, max_actions_per_minute=1)
    now = timezone.now()
    first = policy.apply(pool.pk, now=now)
    assert [a["node"] for a in first.actions] == [nodes[0].name]
    # the same minute: nothing more
    assert policy.apply(pool.pk, now=now + dt.timedelta(seconds=30)).actions == []
    # a minute later: one more
    later = policy.apply(pool.pk, now=now + dt.timedelta(seconds=61))
    assert [a["node"] for a in later.actions] == [nodes[1].name]
    assert [_state(n) for n in nodes] == ["powering-off", "powering-off", "on"]


def test_a_pinned_node_stays_on_and_a_pinned_off_node_is_powered_on(idle_pool, published):
    pool, nodes, _ = idle_pool
    services.power_off(nodes[2].pk, actor=SYSTEM_ACTOR, enqueue=False)
    drive_to_end(nodes[2].pk, "off")
    policy.pin(nodes[0].pk, actor=OPERATOR, reason="firmware test tonight")
    policy.pin(nodes[2].pk, actor=OPERATOR, reason="needed on")
    _set(pool)
    run = policy.apply(pool.pk)
    assert sorted((a["node"], a["action"]) for a in run.actions) == [(nodes[1].name, "off"), (nodes[2].name, "on")]
    assert [_state(n) for n in nodes] == ["on", "powering-off", "powering-on"]
    # unpinned, it goes like the others
    policy.unpin(nodes[0].pk, actor=OPERATOR)
    assert [a["node"] for a in policy.apply(pool.pk).actions] == [nodes[0].name]


def test_the_minute_task_applies_enabled_policies_past_a_failing_pool_and_is_idempotent(idle_pool, published):
    pool, nodes, _ = idle_pool
    other_fabric = make_fabric("pol-bad", {"topology": "fat-tree", "nodes": 1, "node_type": "DGX-H100"})
    broken = make_pool(other_fabric, "broken")
    disabled = make_pool(other_fabric, "disabled")
    _set(pool)
    _set(broken)
    policy.set_policy(disabled.pk, actor=OPERATOR, data={"enabled": False})
    # a stored value the planner refuses (written past the service): that pool's run fails
    PoolPowerPolicy.objects.filter(pool=broken).update(buffer_percent=150)
    outcome = apply_policies_task()
    assert set(outcome) == {pool.pk, broken.pk}
    assert outcome[broken.pk].startswith("error:") and outcome[pool.pk] == "powered off 3 node(s)"
    assert [_state(n) for n in nodes] == ["powering-off"] * 3
    assert not PolicyRun.objects.filter(pool__in=[broken, disabled]).exists()
    # again: the nodes are already going off, nothing more is done
    assert apply_policies_task()[pool.pk] == "nothing to do"
    assert PowerEvent.objects.filter(node__in=nodes, actor="policy").count() == 3


def test_bad_policy_values_are_refused(idle_pool):
    pool, _, _ = idle_pool
    with pytest.raises(policy.Invalid):
        policy.set_policy(pool.pk, actor=OPERATOR, data={"buffer_percent": 101.0})
    assert not PoolPowerPolicy.objects.filter(pool=pool).exists()
