"""The QoS table pushed to the real lab (OpenSM on ibsim) and read back from every port.

hca01..hca06 -- leaf1 --+-- spine1
hca07..hca12 -- leaf2 --+
hca13..hca18 -- leaf3 --+-- spine2
hca19..hca24 -- leaf4 --+        (OpenSM runs on hca24)
"""

from __future__ import annotations

import pytest

from console.fabric import changes, hooks
from console.fabric.changes.pipeline import apply_change
from console.fabric.changes.qos import set_qos_table
from console.fabric.models import AppliedState, ChangeRequest, FabricQos
from console.tenancy.errors import Invalid
from console.tenancy.models import AuditEntry
from tests.fabric.conftest import requires_lab
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import OPERATOR, SYSTEM, reservation_members
from tests.fabric.test_qos_table import table_json

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db]
Status = ChangeRequest.Status

CUSTOM = table_json((1, 1, "low", 160), (2, 3, "high", 32), (0, 0, "low", 96), high_limit=6)


def training_reservation(lab, monkeypatch, sl: int = 1) -> None:
    """Scheduling wants one training reservation's partition (P_Key 3, SL of training)."""
    members = reservation_members(lab)
    monkeypatch.setitem(
        hooks.registry.partitions_providers,
        "scheduling",
        lambda fabric_id: [
            {"reservation_id": 42, "tenant_id": 1, "name": "res-42", "pkey": 3, "sl": sl, "members": members}
        ],
    )


def read_tables(lab, name: str, lid: int, port: int | None) -> tuple[list[str], list[str]]:
    """Raw ``smpquery sl2vl`` rows and ``vlarb`` VL/WEIGHT rows of one port."""
    args = [str(lid)] + ([str(port)] if port is not None else [])
    diags = lab.diags(timeout=10)
    sl2vl = [line for line in diags.run("smpquery", "sl2vl", *args).stdout.splitlines() if line.startswith("ports")]
    vlarb = [line for line in diags.run("smpquery", "vlarb", *args).stdout.splitlines() if line[:2] in ("VL", "WE")]
    return sl2vl, vlarb


def cells(values: list[int], hexa: bool) -> str:
    """How smpquery prints a row of values."""
    if hexa:
        return "|" + "|".join(f"{f'0x{v:X}':<4}" for v in values) + "|"
    return "|" + "|".join(f"{v:2d}" for v in values) + "|"


def test_qos_table_is_pushed_and_read_back_equal_on_every_port(lab_fabric, monkeypatch):
    lab, fabric = lab_fabric
    training_reservation(lab, monkeypatch)
    set_qos_table(SYSTEM, OPERATOR, fabric, CUSTOM)
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, (change.error, list(change.steps.values("name", "status", "log")))
    step = change.steps.get(name="verify-vl")
    assert step.status == "ok"

    # What the table means, worked out here: SL1 → VL1, SL2 → VL3, every other SL → VL0;
    # low table VL0:96, VL1:160; high table VL3:32 (ibsim ports have 8 entries per table).
    sl2vl = [0] * 16
    sl2vl[1], sl2vl[2] = 1, 3
    low_vls, low_w = [0, 1] + [0] * 6, [96, 160] + [0] * 6
    high_vls, high_w = [3] + [0] * 7, [32] + [0] * 7
    want_sl2vl = cells(sl2vl, hexa=False)
    want_vlarb = [cells(low_vls, True), cells(low_w, True), cells(high_vls, True), cells(high_w, True)]

    topo = lab.diags(timeout=10).ibnetdiscover()
    checked = 0
    for link in sorted(topo.links, key=lambda link: (link.a_id, link.a_port)):
        for node_id, port in ((link.a_id, link.a_port), (link.b_id, link.b_port)):
            node = topo.nodes[node_id]
            rows, arb = read_tables(lab, node.name, node.lid, port if node.is_switch else None)
            assert rows, f"{node.name}[{port}]: no SL2VL rows"
            for row in rows:
                assert row.rsplit(": ", 1)[1].strip() == want_sl2vl, (node.name, port, row)
            assert [r.split(":", 1)[1].strip() for r in arb] == want_vlarb, (node.name, port, arb)
            checked += 1
    # 24 HCA ports + 24 leaf down-links + 8 leaf up-links + 8 spine ports
    assert checked == 24 + 24 + 8 + 8
    assert f"read SL2VL and VLArb of {checked} ports (MAD helper)" in step.log

    conf = lab.artefacts.read("opensm.conf") or ""
    assert "qos_sl2vl 0,1,3,0,0,0,0,0,0,0,0,0,0,0,0,0\n" in conf and "qos_high_limit 6\n" in conf
    assert "qos_vlarb_low 0:96,1:160\n" in conf and "qos_vlarb_high 3:32\n" in conf
    # the reservation's partition carries its class's SL in both places OpenSM reads it
    assert "res-42=0x0003, sl=1" in (lab.artefacts.read("partitions.conf") or "")
    assert "any, pkey 0x0003 : 1" in (lab.artefacts.read("qos-policy.conf") or "")
    assert AuditEntry.objects.filter(action="fabric.qos.create").count() == 1

    # the same state again reprograms no port: the port read is not repeated on every push
    again = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert again.status == Status.UNCHANGED, again.error
    assert again.steps.get(name="verify-vl").status == "skipped"


def test_vl_the_ports_do_not_have_rolls_back(lab_fabric, monkeypatch):
    """ibsim ports have VL0-7; a table using VL 9 (valid for max_vls 15) does not read back equal."""
    lab, fabric = lab_fabric
    training_reservation(lab, monkeypatch)
    first = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert first.status == Status.APPLIED, first.error
    good_conf = lab.artefacts.read("opensm.conf")
    assert good_conf is not None and "qos_sl2vl 0,1,2,0," in good_conf  # the default table

    wide = {"max_vls": 15, "high_limit": 4, "classes": {**CUSTOM["classes"]}}
    wide["classes"]["training"] = {"sl": 1, "vl": 9, "table": "low", "weight": 192}
    set_qos_table(SYSTEM, OPERATOR, fabric, wide)
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.ROLLED_BACK, (change.error, list(change.steps.values("name", "status")))
    assert change.steps.get(name="verify-vl").status == "failed"
    assert "SL2VL" in change.error and "rendered" in change.error
    assert lab.artefacts.read("opensm.conf") == good_conf
    assert AppliedState.objects.get(fabric=fabric).change_id == first.pk


def test_broken_table_never_reaches_opensm(lab_fabric, monkeypatch):
    lab, fabric = lab_fabric
    training_reservation(lab, monkeypatch)
    before = lab.artefacts.read("opensm.conf")
    broken = {
        **CUSTOM,
        "classes": {**CUSTOM["classes"], "inference": {"sl": 2, "vl": 8, "table": "high", "weight": 300}},
    }
    with pytest.raises(Invalid) as refused:
        set_qos_table(SYSTEM, OPERATOR, fabric, broken)
    assert "inference: VL 8 not below max_vls=8" in str(refused.value)
    assert "inference: weight 300 outside 0-255" in str(refused.value)
    assert not FabricQos.objects.filter(fabric=fabric).exists()
    # a broken table stored behind the service's back still cannot render: no change, no file
    FabricQos.objects.create(fabric=fabric, table=broken)
    with pytest.raises(Invalid, match="does not render"):
        changes.request_change(SYSTEM, OPERATOR, fabric)
    assert lab.artefacts.read("opensm.conf") == before
    assert not ChangeRequest.objects.filter(fabric=fabric).exists()
