"""A power-off racing a reservation on PostgreSQL with real transactions: two threads, each with
its own connection, released together by a barrier. Whichever commits first, a node is never
both powered off (or powering off) and held by a reservation that starts within its boot time:
either the reservation wins and the power-off is refused (409), or the power-off wins and the
reservation is not placed on the node.

    [tenant] --reserve--> [pool: one node] <--power off-- [operator]
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from console.power import services
from console.tenancy.models import Tenant
from scheduling.models import Node, Reservation
from scheduling.services.reservations import reserve
from tests.needs import needs
from tests.power.conftest import SYSTEM_ACTOR
from tests.power.racing import race
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for, tenant_principal

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
ROUNDS = 12


def _reserved_soon_and_off() -> list[tuple[int, int]]:
    """(node, reservation) pairs breaking the rule, read straight from the tables."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT DISTINCT n.id, r.id FROM scheduling_node n
               JOIN scheduling_reservationallocation a ON a.node_id = n.id
               JOIN scheduling_reservation r ON r.id = a.reservation_id
              WHERE n.power_state IN ('off', 'powering-off')
                AND r.status IN ('placed', 'provisioning', 'ready')
                AND a."end" > now() AND a.start < now() + interval '12 minutes'"""
        )
        return cursor.fetchall()


def test_power_off_and_reservation_race_never_leave_a_reserved_node_off(attach_bmc):
    fabric = make_fabric("race", {"topology": "fat-tree", "nodes": ROUNDS, "node_type": "DGX-H100"})
    outcomes: dict[str, int] = {"reservation first": 0, "power-off first": 0}
    for i, node in enumerate(Node.objects.filter(fabric=fabric).order_by("pk")):
        # given a one-node pool, its tenant's quota and the node's BMC
        attach_bmc(node)
        pool = make_pool(fabric, f"p{i}", nodes=[node])
        tenant = Tenant.objects.create(name=f"Race {i}", slug=f"race-{i}")
        give_quota(tenant, pool, 8)

        def book(pool=pool, tenant=tenant) -> object:
            request = request_for(pool, gpus=8, start=timezone.now())
            return reserve(SYSTEM_ACTOR, tenant_principal(tenant), request).status

        # when both go at the same instant
        results = race(
            reservation=book,
            power=lambda node=node: services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False).power_state,
        )

        # then exactly one of them won, and the other saw it
        node.refresh_from_db()
        if isinstance(results["power"], services.NodeNeeded):
            assert results["reservation"] in Reservation.HOLDING, results
            assert node.power_state == "on"
            outcomes["reservation first"] += 1
        else:
            assert results["power"] == "powering-off", results
            assert results["reservation"] == Reservation.Status.REJECTED, results
            outcomes["power-off first"] += 1
        assert _reserved_soon_and_off() == []
    print(outcomes)
    assert sum(outcomes.values()) == ROUNDS
