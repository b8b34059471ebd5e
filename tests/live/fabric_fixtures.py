"""A designed 1-SU fabric with inventory and two tenants' ready reservations (no lab needed),
and a collector wired to it without counters (statuses are fed by the test)."""

from __future__ import annotations

import uuid

import pytest

from console.fabric.models import Fabric
from console.telemetry.collector import CollectorOptions, FabricCollector
from console.telemetry.core import LinkStatus
from console.telemetry.linkmap import build_link_map
from console.tenancy.models import Principal, Role
from designer.services import create_design, revision_graph
from scheduling.services import inventory
from tests.live.helpers import SYSTEM, ready_reservation

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}


@pytest.fixture
def world(db, tenant_a, tenant_b):
    principal = Principal(None, Role.OPERATOR, None)
    _, revision = create_design(SYSTEM, principal, name=f"live-{uuid.uuid4().hex[:6]}", options=ONE_SU)
    fabric = Fabric.objects.create(name=f"live-{uuid.uuid4().hex[:6]}", revision=revision)
    inventory.import_inventory(fabric)
    res_a = ready_reservation(fabric, tenant_a, nodes=2)
    res_b = ready_reservation(fabric, tenant_b, nodes=2)
    collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False))
    collector.lm = build_link_map(revision_graph(revision))
    collector._refresh_jobs()
    return {"fabric": fabric, "a": tenant_a, "b": tenant_b, "res_a": res_a, "res_b": res_b, "collector": collector}


def statuses(collector: FabricCollector, *, bucket: int = 3, down: set[str] = frozenset()):
    """Every link of the fabric at ``bucket`` utilisation (``down`` ones down)."""
    out = {}
    for lid in collector.lm.ends:
        st = LinkStatus(lid, lid not in down, utilisation=bucket * 0.2, bucket=bucket)
        out[lid] = st
    return out
