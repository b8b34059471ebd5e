"""A pool's nodes may belong to fabrics of several sites, its home fabric holding some."""

from __future__ import annotations

import pytest

from console.tenancy.errors import Invalid
from scheduling.models import Node
from scheduling.services import inventory
from tests.scheduling.conftest import OPERATOR, SYSTEM, make_fabric

pytestmark = pytest.mark.django_db

FOUR = {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"}


def test_a_pool_may_span_fabrics_when_its_home_fabric_holds_some_of_its_nodes():
    a, b = make_fabric("span-a", FOUR), make_fabric("span-b", FOUR)
    nodes_a, nodes_b = list(Node.objects.filter(fabric=a)), list(Node.objects.filter(fabric=b))

    pool = inventory.create_pool(SYSTEM, OPERATOR, fabric=a, name="both", nodes=nodes_a + nodes_b)
    assert pool.nodes.count() == 8 and pool.fabric == a

    with pytest.raises(Invalid, match="home fabric"):
        inventory.create_pool(SYSTEM, OPERATOR, fabric=a, name="elsewhere", nodes=nodes_b)
