"""Search against a real OpenSM-on-ibsim lab: a port GUID and a LID the lab's subnet assigned lead
the operator and the owning tenant to the node; the other tenant finds nothing. The console knows
the LIDs from the fabric's discovery (run through the lab's agent); the LID expected is the one
the lab recorded when its subnet came up (``lids.json``), read here independently."""

from __future__ import annotations

import pytest

from console.fabric.discovery import services as discovery
from console.telemetry.search import search
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling.models import HCA, ReservationAllocation
from scheduling.services import inventory
from tests.fabric.conftest import requires_lab
from tests.live.helpers import ready_reservation

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db]

OPERATOR = Principal(None, Role.OPERATOR, None)


def test_a_port_guid_and_a_lid_from_the_lab(lab_fabric, tenant_a, tenant_b):
    fabric, lab = lab_fabric("search")
    inventory.import_inventory(fabric)
    discovery.discover(fabric, actor=Actor.system("test"))
    res = ready_reservation(fabric, tenant_a, nodes=1)
    node = ReservationAllocation.objects.filter(reservation=res).first().node
    hca = HCA.objects.filter(node=node).order_by("index").first()
    lids = lab.port_lids()
    guid = int(hca.port_guid, 16)
    assert guid in lids, "the lab knows the designed port GUID"
    lid = lids[guid][0]
    digits = f"{guid:016x}"
    ibdiag_spelling = ":".join(digits[i : i + 2] for i in range(0, 16, 2))

    for principal in (OPERATOR, Principal(None, Role.TENANT_MEMBER, tenant_a.pk)):
        by_guid = [r for r in search(principal, ibdiag_spelling) if r["kind"] == "node"]
        assert [r["label"] for r in by_guid] == [node.name]
        by_lid = [r for r in search(principal, f"lid:{lid}") if r["kind"] == "node"]
        # (an operator's hit is the discovered device, "su01-n01 HCA-1"; a tenant's, its node)
        assert [r["label"].split(" HCA-")[0] for r in by_lid] == [node.name]
        assert by_lid[0]["fields"]["lid"] == lid

    other = Principal(None, Role.TENANT_MEMBER, tenant_b.pk)
    assert search(other, ibdiag_spelling) == []
    assert search(other, f"lid:{lid}") == []
