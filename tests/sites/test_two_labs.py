"""The two-lab fixture itself: two subnets up side by side, each swept by its own SM, neither
seeing the other, bound to fabrics at two sites with a pool spanning both."""

from __future__ import annotations

import time

import pytest

from console.fabric.lab.fabrics import lab_for
from scheduling.models import HCA, Node
from tests.sites.conftest import TwoLabs

pytestmark = [pytest.mark.timeout(180)]


def discovered_port_guids(lab) -> set[int]:
    """Port GUIDs of every port ibnetdiscover finds from ``lab``'s diag host."""
    return set(lab.diags(timeout=20).ibnetdiscover().port_guids.values())


def inventory_port_guids(fabric) -> set[int]:
    return {int(g, 16) for g in HCA.objects.filter(node__fabric=fabric).values_list("port_guid", flat=True)}


def test_two_subnets_each_with_its_own_sm_and_neither_sees_the_other(two_labs: TwoLabs):
    lab_a, lab_b = two_labs.labs
    # given both labs, each bound to its own site's fabric
    assert lab_for(two_labs.fabric_a).workdir == lab_a.workdir
    assert lab_for(two_labs.fabric_b).workdir == lab_b.workdir
    assert lab_a.status()["ibsim_sockname"] != lab_b.status()["ibsim_sockname"]
    assert [f.site.slug for f in two_labs.fabrics] == ["site-a", "site-b"]

    # then each subnet has a master SM of its own
    assert lab_a.diags().sminfo().is_master
    assert lab_b.diags().sminfo().is_master

    # and each SM sweeps its own subnet: a reload makes a heavy sweep end after the mark
    for lab in two_labs.labs:
        mark = lab.sweep_mark()
        lab.reload()
        deadline = time.monotonic() + 30
        while not lab.swept_since(mark):
            assert time.monotonic() < deadline, f"no sweep of {lab.workdir.name} within 30 s"
            time.sleep(0.1)

    # and the two subnets are independent: A's diags find A's HCAs and none of B's, and back
    seen_a, seen_b = discovered_port_guids(lab_a), discovered_port_guids(lab_b)
    ports_a, ports_b = inventory_port_guids(two_labs.fabric_a), inventory_port_guids(two_labs.fabric_b)
    assert ports_a <= seen_a and not ports_b & seen_a
    assert ports_b <= seen_b and not ports_a & seen_b
    assert len(ports_a) == 64 and len(ports_b) == 32


def test_pools_of_each_site_and_one_spanning_both(two_labs: TwoLabs):
    pool_a, pool_b, both = two_labs.pools
    assert set(pool_a.nodes.values_list("fabric", flat=True)) == {two_labs.fabric_a.pk}
    assert set(pool_b.nodes.values_list("fabric", flat=True)) == {two_labs.fabric_b.pk}
    # the spanning pool holds every node of both fabrics, at home on A
    assert both.fabric_id == two_labs.fabric_a.pk
    assert both.nodes.count() == Node.objects.filter(fabric__in=two_labs.fabrics).count() == 12
    assert {n.name for n in pool_b.nodes.all()} == {f"b-node-00{i}" for i in range(1, 5)}
    assert two_labs.link.latency_us == 2000 and two_labs.link.bandwidth_gbps == 100
    assert [s.queue for s in two_labs.sites] == ["site.site-a", "site.site-b"]
