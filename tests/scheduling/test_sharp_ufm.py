"""A SHARP reservation on a UFM-managed fabric, end to end: scheduling's partition request says
``sharp``, the ufm driver pushes the P_Key and then reads UFM's SHARP reservations back, against
``UfmContractFake`` (a contract fake of UFM's documented REST, emulating SHARP AM's
``reservation_auto_by_pkeys``; not UFM). The GUIDs expected are the reservation's hosts' port GUIDs."""

from __future__ import annotations

import pytest

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.drivers.ufm import UfmClient
from console.fabric.drivers.ufm_sharp import ALLOCATE_RESOURCES
from scheduling.models import HCA, Reservation
from scheduling.services.reservations import reserve
from tests.fabric.ufm_fake import UfmContractFake
from tests.scheduling.conftest import OPERATOR, SYSTEM, give_quota, make_fabric, make_pool, request_for
from tests.scheduling.test_sharp_reservations import SU, one_tree_per_switch

pytestmark = pytest.mark.django_db
S = Reservation.Status


def hca_ports(fabric) -> list[dict]:
    """UFM's view of the fabric's HCA ports (what the driver checks members against)."""
    rows = HCA.objects.filter(node__fabric=fabric).values_list("port_guid", "node__name")
    return [
        {"guid": guid.removeprefix("0x"), "name": f"{guid}_1", "number": 1, "system_name": name, "systemID": guid}
        for guid, name in rows
    ]


@pytest.fixture
def ufm_pool(db, monkeypatch):
    monkeypatch.setenv("UFM_TEST_PASSWORD", "secret")
    one_tree_per_switch()
    with UfmContractFake(ports=[]) as ufm:
        config = {"url": ufm.url, "username": "admin", "password_env": "UFM_TEST_PASSWORD", "verify_timeout": 1}
        fabric = make_fabric("sharp-ufm", SU, driver="ufm", config=config)
        ufm.ports = hca_ports(fabric)
        yield make_pool(fabric), ufm


def host_guids(reservation: Reservation) -> list[str]:
    nodes = reservation.allocations.values("node_id")
    return sorted(
        f"0x{int(g, 16):016x}" for g in HCA.objects.filter(node__in=nodes).values_list("port_guid", flat=True)
    )


def test_a_sharp_reservation_through_ufm_is_ready_once_sharp_lists_its_hosts(ufm_pool, tenant_a):
    pool, ufm = ufm_pool
    give_quota(tenant_a, pool, 256)
    sharp = reserve(SYSTEM, OPERATOR, request_for(pool, nodes=2, sharp=True, tenant_id=tenant_a.pk))
    plain = reserve(SYSTEM, OPERATOR, request_for(pool, nodes=2, tenant_id=tenant_a.pk))
    assert sharp.status == plain.status == S.PROVISIONING, (sharp.reason, plain.reason)
    assert sharp.placement["sharp"] and "sharp" not in plain.placement
    change = changes.reconcile(pool.fabric, actor=SYSTEM)
    assert change is not None
    change = apply_change(change.pk, worker_id="test")
    assert change is not None and change.status == "applied", change and change.error
    assert change.steps.get(name="sharp").status == "ok"
    answer = UfmClient(ufm.url, username="admin", password="secret").request("GET", ALLOCATE_RESOURCES)
    listed = {v["pkey"]: sorted(v["guids"]) for v in answer.values()}
    expected = host_guids(sharp)
    assert len(expected) == 16 and listed[f"{sharp.pkey:#x}"] == expected  # 2 DGX H100, 8 HCAs each
    sharp.refresh_from_db()
    plain.refresh_from_db()
    assert sharp.status == plain.status == S.READY
    # only the SHARP reservation's P_Key is checked against SHARP (the plain one is SHARP AM's own)
    assert "1 SHARP reservations read back" in change.steps.get(name="sharp").log


def test_a_sharp_reservation_on_ufm_without_sharp_stays_provisioning_and_says_why(ufm_pool, tenant_a):
    pool, ufm = ufm_pool
    ufm.sharp_enabled = False
    give_quota(tenant_a, pool, 256)
    sharp = reserve(SYSTEM, OPERATOR, request_for(pool, nodes=2, sharp=True, tenant_id=tenant_a.pk))
    change = changes.reconcile(pool.fabric, actor=SYSTEM)
    assert change is not None
    change = apply_change(change.pk, worker_id="test")
    assert change is not None and change.status == "rolled_back"
    sharp.refresh_from_db()
    assert sharp.status == S.PROVISIONING
    assert f"P_Key {sharp.pkey:#06x}: no SHARP reservation in UFM" in change.error
    # the tenant sees why on the reservation (the same record a P_Key mismatch leaves)
    assert "SHARP is not ready" in sharp.fabric_error and f"fabric change {change.pk} failed" in sharp.fabric_error
    assert sharp.pkey not in ufm.pkeys
