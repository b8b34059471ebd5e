"""Two grants race for the same P_Key of a shared fabric, in real PostgreSQL transactions.

Fabric B is shared: pool "b-only" holds half of its nodes, pool "span" the other half and all of
fabric A (no node in both pools: their reservation locks do not serialise them). A reservation
on B alone and one spanning A and B both read B's live keys before either writes, so both pick
B's lowest free key; ``subnet_pkey_live_unique`` fails the second insert, and that reserve
retries with the keys read anew: exactly one holds the key, the other gets another.
"""

from __future__ import annotations

import threading

import pytest

from scheduling.models import Node, Reservation, ReservationSubnet
from scheduling.services import grant, reservations, snapshots
from tests.needs import needs
from tests.scheduling.conftest import SYSTEM, give_quota, make_pool, request_for, tenant_principal
from tests.scheduling.test_lock_order import WAIT, finish, started
from tests.scheduling.test_subnets import spanning_pool, two_fabrics

pytestmark = [pytest.mark.django_db(transaction=True), needs("postgresql")]


def test_a_single_and_a_spanning_grant_wanting_the_same_key_of_the_shared_fabric(tenant_a, monkeypatch):
    snapshots.forget()
    # given fabrics A and B, pool "span" (A + half of B) and pool "b-only" (the other half)
    a, b = two_fabrics()
    b_nodes = list(Node.objects.filter(fabric=b).order_by("name"))
    span = spanning_pool(a, b_nodes[:4])
    b_only = make_pool(b, "b-only", b_nodes[4:])
    give_quota(tenant_a, span, 96)
    give_quota(tenant_a, b_only, 32)
    # and grants that, having read their fabrics' keys, wait for each other before writing
    both_read = threading.Barrier(2, timeout=WAIT)
    writes: list[str] = []
    real = grant.write_allocations

    def write_after_both_read(*args, **kwargs):
        first = threading.current_thread().name not in writes
        writes.append(threading.current_thread().name)
        if first:
            both_read.wait()
        return real(*args, **kwargs)

    monkeypatch.setattr(grant, "write_allocations", write_after_both_read)
    made: dict[str, Reservation] = {}

    def reserve(name, pool, gpus):
        def body():
            threading.current_thread().name = name
            made[name] = reservations.reserve(
                SYSTEM, tenant_principal(tenant_a), request_for(pool, gpus=gpus, span_sites=pool.name == "span")
            )

        return body

    # when both reserve at once
    single = started(reserve("single", b_only, 8))
    spanning = started(reserve("spanning", span, 80))
    finish(single, spanning)

    # then both are placed, one of them after a retry (three writes: the loser wrote twice)
    assert made["single"].status == made["spanning"].status == Reservation.Status.PROVISIONING
    assert len(writes) == 3 and writes.count("single") + writes.count("spanning") == 3
    loser = writes[-1]
    on_b = dict(ReservationSubnet.objects.filter(fabric=b).values_list("reservation_id", "pkey"))
    keys = {name: on_b[r.pk] for name, r in made.items()}
    # exactly one holds B's first key, the other got another one
    assert sorted(keys.values()) == [b.pkey_min, b.pkey_min + 1]
    assert keys[loser] == b.pkey_min + 1
    # the spanning one has one value on both fabrics either way
    spanning_keys = dict(
        ReservationSubnet.objects.filter(reservation=made["spanning"]).values_list("fabric_id", "pkey")
    )
    assert spanning_keys == {a.pk: keys["spanning"], b.pk: keys["spanning"]}
    snapshots.forget()
