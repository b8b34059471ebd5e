"""The power policy racing reservations on PostgreSQL with real transactions: two threads with
their own connections, released together by a barrier, one asking for a node that starts within
the node's boot time, the other applying the pool's policy (idle nodes off at once, no buffer).
The policy reads and acts under the pool's reservation lock, so whichever commits first, the node
is never off (or powering off) while a reservation holds it within its boot time: either the
reservation is placed and the policy leaves the node on, or the policy powers it off and the
reservation is not placed on it.

    [tenant] --reserve (start in 2 min)--> [pool: one node] <--policy run-- [minute task]
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.power import policy
from console.tenancy.context import Actor
from console.tenancy.models import Tenant
from scheduling.models import Node, Reservation
from scheduling.services.reservations import reserve
from tests.needs import needs
from tests.power.conftest import SYSTEM_ACTOR
from tests.power.racing import race
from tests.power.test_power_race import _reserved_soon_and_off
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for, tenant_principal

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
ROUNDS = 10


def test_policy_runs_racing_reservations_never_leave_a_reserved_node_off(attach_bmc):
    fabric = make_fabric("prace", {"topology": "fat-tree", "nodes": ROUNDS, "node_type": "DGX-H100"})
    Node.objects.filter(fabric=fabric).update(power_changed_at=timezone.now() - dt.timedelta(hours=1))
    outcomes: dict[str, int] = {"reservation first": 0, "policy first": 0}
    for i, node in enumerate(Node.objects.filter(fabric=fabric).order_by("pk")):
        # given a one-node pool whose node has been idle an hour, and a policy switching idle nodes off
        attach_bmc(node)
        pool = make_pool(fabric, f"p{i}", nodes=[node])
        policy.set_policy(pool.pk, actor=Actor.system("tests"), data={"enabled": True, "idle_after": dt.timedelta(0)})
        tenant = Tenant.objects.create(name=f"Policy race {i}", slug=f"policy-race-{i}")
        give_quota(tenant, pool, 8)

        def book(pool=pool, tenant=tenant) -> object:
            start = timezone.now() + dt.timedelta(minutes=2)  # well within the boot time
            return reserve(SYSTEM_ACTOR, tenant_principal(tenant), request_for(pool, gpus=8, start=start)).status

        # when both go at the same instant
        results = race(reservation=book, run=lambda pool=pool: policy.apply(pool.pk).actions)

        # then one of them won and the other saw it
        node.refresh_from_db()
        assert isinstance(results["run"], list), results
        done = [a for a in results["run"] if a["outcome"] == "done"]
        # it decided on what it read under the lock: never an off the power service then refused
        assert [a for a in results["run"] if a["outcome"] == "refused"] == [], results
        if results["reservation"] in Reservation.HOLDING:
            assert done == [] and node.power_state == "on", results
            outcomes["reservation first"] += 1
        else:
            assert results["reservation"] == Reservation.Status.REJECTED, results
            assert [(a["node"], a["action"]) for a in done] == [(node.name, "off")]
            assert node.power_state == "powering-off"
            outcomes["policy first"] += 1
        assert _reserved_soon_and_off() == []
    print(outcomes)
    assert sum(outcomes.values()) == ROUNDS
