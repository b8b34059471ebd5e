"""The P_Key index of the "how to use it" guide comes from the lab's verified ports.

A reservation of a tenant member on the 1-SU lab (OpenSM on ibsim) is made ready by the real
pipeline, whose verify step reads its member ports' P_Key tables; the guide's ``NCCL_IB_PKEY``
must be the index at which ``smpquery pkeys`` (read here, independently) shows the P_Key.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse

from console.tenancy.models import Principal, Role
from scheduling.models import Reservation
from scheduling.services.reservations import ReservationRequest, reserve
from tests.fabric.conftest import requires_lab
from tests.scheduling.test_fabric_lifecycle_lab import ACTOR, converge, guids_of, su1  # noqa: F401  (fixture)
from tests.scheduling.test_usage_guide import parse_env

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db]


def indexes_on_the_wire(lab, pkey: int, guids: set[int]) -> set[int]:
    """The index of ``pkey`` in each port's table, read with smpquery."""
    diags = lab.diags(timeout=20)
    cas = (n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch)
    lid_of = {n.guid + 1: n.lid for n in cas if n.guid is not None}
    found = set()
    for guid in guids:
        entries = [e.index for e in diags.pkeys(lid_of[guid]).entries if e.pkey == pkey]
        assert len(entries) == 1, (hex(guid), entries)
        found.add(entries[0])
    return found


def test_the_guide_names_the_verified_index_of_the_pkey(su1, tenant_a, member_a, client, client_for):  # noqa: F811
    fabric, lab, pool = su1
    request = ReservationRequest(pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=1), tenant_id=tenant_a.pk)
    reservation = reserve(ACTOR, Principal(member_a.pk, Role.TENANT_MEMBER, tenant_a.pk), request)
    client.force_login(member_a)
    before = parse_env(client.get(reverse("web:reservation-use-env", args=[reservation.pk])).content.decode())
    assert "NCCL_IB_PKEY" not in before

    change = converge(fabric)
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.READY
    (wire,) = indexes_on_the_wire(lab, reservation.pkey, guids_of(reservation))
    assert change.outcome["pkey_indexes"][f"{reservation.pkey:#06x}"]  # recorded at verification

    env = parse_env(client.get(reverse("web:reservation-use-env", args=[reservation.pk])).content.decode())
    assert env["NCCL_IB_PKEY"] == str(wire)
    assert env["IBC_PKEY"] == f"{reservation.pkey:#06x}" and int(env["IBC_PKEY"], 16) != wire
    body = client_for(member_a).get(f"/api/reservations/{reservation.pk}/usage-guide/").json()
    assert body["pkey_index"] == wire and body["verified"]
    html = client.get(reverse("web:reservation-use", args=[reservation.pk])).content.decode()
    assert f'data-testid="use-pkey-index">{wire}<' in html
