"""Fixtures for the scheduling Django layer: a designed fabric, its inventory, pools and quotas.

The small fabric is a plain fat tree of 16 DGX H100 (128 GPUs):

    [spine-01] [spine-02]
    [leaf-01] [leaf-02] [leaf-03] [leaf-04]     4 nodes (32 GPUs) under each leaf
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer import services as designer_services
from scheduling.models import Node, Pool
from scheduling.placement.registry import params as constraint_params
from scheduling.services import inventory, quotas
from scheduling.services.reservations import ReservationRequest

OPERATOR = Principal(None, Role.OPERATOR, None)
SYSTEM = Actor.system("tests")


def make_fabric(name: str, options: dict, **fabric_kw) -> Fabric:
    _, revision = designer_services.create_design(SYSTEM, OPERATOR, name=name, options=options)
    fabric = Fabric.objects.create(name=name, revision=revision, **fabric_kw)
    inventory.import_inventory(fabric)
    return fabric


def make_pool(fabric: Fabric, name: str = "all", nodes=None) -> Pool:
    nodes = list(Node.objects.filter(fabric=fabric)) if nodes is None else nodes
    return inventory.create_pool(SYSTEM, OPERATOR, fabric=fabric, name=name, nodes=nodes)


def give_quota(tenant, pool, guaranteed: int, borrow: int = 0, classes=("training", "inference", "best-effort")):
    """A quota allowing every priority class unless ``classes`` says (the tests of the class
    entitlement itself: tests/scheduling/test_quota_classes.py)."""
    return quotas.set_quota(
        SYSTEM,
        OPERATOR,
        tenant=tenant,
        pool=pool,
        guaranteed_gpus=guaranteed,
        borrow_limit_gpus=borrow,
        classes=list(classes),
    )


def tenant_principal(tenant, role=Role.TENANT_ADMIN) -> Principal:
    return Principal(None, role, tenant.pk)


def request_for(pool, **kw) -> ReservationRequest:
    """A request in ``pool``; keywords naming a registered constraint parameter go to
    ``constraints``."""
    if "end" not in kw:
        kw.setdefault("duration", dt.timedelta(hours=2))
    names = {p.name for p in constraint_params()}
    constraints = {k: kw.pop(k) for k in list(kw) if k in names}
    return ReservationRequest(pool_id=pool.pk, constraints=constraints, **kw)


def at(hours: float) -> dt.datetime:
    """A time ``hours`` from now, rounded to the minute (windows in tests)."""
    base = timezone.now().replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return base + dt.timedelta(hours=hours)


@pytest.fixture
def fat_tree(db) -> Fabric:
    return make_fabric("ft16", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})


@pytest.fixture
def pool(fat_tree) -> Pool:
    return make_pool(fat_tree)


def report_power(node_id: int, state: str) -> None:
    """What the power app (the one writer of power state) does when a BMC reports ``state`` for a
    node without a BMC call: the row, then ``power_state_changed`` after commit, whose receiver
    tells scheduling (``powered_on`` / ``powered_off``)."""
    from console.power.signals import power_state_changed

    with transaction.atomic():
        Node.objects.filter(pk=node_id).update(power_state=state, power_changed_at=timezone.now())
        transaction.on_commit(lambda: power_state_changed.send(sender=Node, node_id=node_id, state=state))
