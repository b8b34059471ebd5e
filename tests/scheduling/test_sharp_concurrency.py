"""Two pools of one SU share its switches' aggregation trees: SHARP reservations racing in both
pools, with real PostgreSQL transactions, never take the same last tree."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from console.tenancy.models import Role, Tenant
from scheduling.models import Node, Reservation
from tests.needs import needs
from tests.scheduling.conftest import give_quota, make_fabric, make_pool
from tests.scheduling.test_sharp_reservations import SU, one_tree_per_switch

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]
ROUNDS = 5  # without the fabric-wide lock both won within 2 rounds here


def test_sharp_reserves_in_two_pools_sharing_leaves_take_the_last_tree_once(make_user, client_for):
    one_tree_per_switch()
    fabric = make_fabric("sharp-race", SU)
    nodes = list(Node.objects.filter(fabric=fabric).order_by("name"))
    pools = [make_pool(fabric, "left", nodes=nodes[:16]), make_pool(fabric, "right", nodes=nodes[16:])]
    tenant = Tenant.objects.create(name="Racer", slug="racer")
    clients = []
    for i, pool in enumerate(pools):
        give_quota(tenant, pool, 128)
        clients.append((client_for(make_user(f"racer-{i}", Role.TENANT_ADMIN, tenant)), pool))
    for round_ in range(ROUNDS):
        barrier = threading.Barrier(len(clients))

        def post(pair, barrier=barrier):
            client, pool = pair
            try:
                barrier.wait(timeout=30)
                body = {"pool": pool.pk, "nodes": 2, "sharp": True, "duration_minutes": 60}
                return client.post("/api/reservations/", body, format="json").status_code
            finally:
                connection.close()

        with ThreadPoolExecutor(len(clients)) as executor:
            codes = sorted(executor.map(post, clients))
        # every rail leaf of the SU serves one tree: whichever pool wins, the other is refused
        assert codes == [201, 409], (round_, codes)
        holding = Reservation.objects.filter(status__in=Reservation.HOLDING, placement__has_key="sharp")
        assert holding.count() == 1
        for reservation in holding:
            reservation.status = Reservation.Status.RELEASED
            reservation.save(update_fields=["status"])
