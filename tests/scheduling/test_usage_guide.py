"""How to use a reservation: the page, the env file and the API answer alike, for the tenant, its
operators and auditors only; before the partition is verified the P_Key index is left out.

The P_Key index read from a lab's verified ports: tests/scheduling/test_usage_guide_lab.py.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from scheduling.hostlist import expand
from scheduling.models import HCA, Reservation
from tests.scheduling.test_reservation_pages import booked, logged_in  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def parse_env(text: str) -> dict[str, str]:
    """KEY=VALUE lines, ``#`` comments; anything else fails the test."""
    env = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep and key.isidentifier() and key.upper() == key and value and " " not in value, line
        env[key] = value
    return env


def test_page_env_and_api_before_the_partition_is_verified(client, admin_a, client_for, booked):  # noqa: F811
    mine, _ = booked
    Reservation.objects.filter(pk=mine.pk).update(created_by=admin_a)  # as when admin-a books it
    nodes = sorted(mine.placement["nodes"])
    devices = sorted({h.index for h in HCA.objects.filter(node__name__in=nodes, node__fabric=mine.fabric)})
    logged_in(client, admin_a)

    page = client.get(reverse("web:reservation-use", args=[mine.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="use-not-verified"' in html and "use-pkey-index-missing" in html
    assert 'data-copy="use-hostlist"' in html and "<script>" not in html  # CSP: no inline scripts
    for node in nodes:
        assert f"admin-a@{node}" in html

    download = client.get(reverse("web:reservation-use-env", args=[mine.pk]))
    assert download.status_code == 200 and download["Content-Type"].startswith("text/plain")
    assert download["Content-Disposition"] == f'attachment; filename="res-{mine.pk}.env"'
    env = parse_env(download.content.decode())
    assert "NCCL_IB_PKEY" not in env  # not guessed before verification
    assert env["IBC_HOSTS"].split(",") == nodes
    assert sorted(expand(env["IBC_HOSTLIST"])) == nodes and len(env["IBC_HOSTLIST"]) < len(env["IBC_HOSTS"])
    assert env["NCCL_IB_HCA"] == ",".join(f"mlx5_{i}" for i in devices)
    assert env["NCCL_IB_SL"] == env["UCX_IB_SL"] == str(mine.sl)
    assert env["IBC_PKEY"] == f"0x{mine.pkey:04x}"
    # the SL is the class's in the fabric's QoS table (the default one here), and the file says so
    assert (mine.priority_class, mine.sl) in {("training", 1), ("inference", 2), ("best-effort", 0)}
    note = f"SL {mine.sl} is the {mine.priority_class} class: the fabric maps it to VL {mine.sl}"
    assert f"# NCCL_IB_SL, UCX_IB_SL: {note}" in download.content.decode()
    assert note in html

    api = client_for(admin_a).get(f"/api/reservations/{mine.pk}/usage-guide/")
    assert api.status_code == 200
    body = api.json()
    assert body["env"] == env and body["pkey_index"] is None and not body["verified"]
    assert "not verified" in body["pkey_index_note"]
    assert [n["ssh"] for n in body["nodes"]] == [f"admin-a@{n}" for n in nodes]
    assert all(n["gpus"] == 8 for n in body["nodes"])


def test_other_tenants_get_404_and_operators_and_auditors_read(
    client,
    client_for,
    member_a,
    admin_b,
    member_b,
    operator,
    auditor,
    booked,  # noqa: F811
):
    mine, theirs = booked
    Reservation.objects.filter(pk=mine.pk).update(created_by=member_a)  # booked by a member of A
    for user in (admin_b, member_b):
        logged_in(client, user)
        assert client.get(reverse("web:reservation-use", args=[mine.pk])).status_code == 404
        assert client.get(reverse("web:reservation-use-env", args=[mine.pk])).status_code == 404
        assert client_for(user).get(f"/api/reservations/{mine.pk}/usage-guide/").status_code == 404
        assert client.get(reverse("web:reservation-use", args=[theirs.pk])).status_code == 200
    for user in (operator, auditor):
        logged_in(client, user)
        assert client.get(reverse("web:reservation-use", args=[mine.pk])).status_code == 200
        body = client_for(user).get(f"/api/reservations/{mine.pk}/usage-guide/").json()
        # the SSH targets name the tenant's user, not the reader's
        assert {n["ssh"].split("@")[0] for n in body["nodes"]} == {"member-a"}
        assert user.get_username() not in json.dumps(body)


def test_ready_without_a_recorded_index_says_so(client, admin_a, booked):  # noqa: F811
    from console.fabric.hooks import notify_verified

    mine, _ = booked
    notify_verified(mine.fabric_id, present_pkeys={mine.pkey}, change_id=1)
    mine.refresh_from_db()
    assert mine.status == Reservation.Status.READY
    env = parse_env(logged_in(client, admin_a).get(reverse("web:reservation-use-env", args=[mine.pk])).content.decode())
    assert "NCCL_IB_PKEY" not in env  # no verified change recorded where the key sits
    html = client.get(reverse("web:reservation-use", args=[mine.pk])).content.decode()
    assert "did not record the index" in html and "use-not-verified" not in html


def test_the_env_file_sourced_by_bash_runs_nothing_a_node_name_holds(client, admin_a, booked, tmp_path):  # noqa: F811
    """Imported node names are anyone's: one holding shell syntax and a line break, sourced as
    the file says (``set -a; . ./use.env``) by a real bash, runs nothing and reads back as
    written."""
    import subprocess

    from scheduling.models import Node

    mine, _ = booked
    marker = tmp_path / "ran"
    hostile = "n$(touch ran);`touch ran`'\n touch ran #"
    first = sorted(mine.placement["nodes"])[0]
    Node.objects.filter(fabric=mine.fabric, name=first).update(name=hostile)
    placement = dict(mine.placement, nodes=[hostile if n == first else n for n in mine.placement["nodes"]])
    Reservation.objects.filter(pk=mine.pk).update(placement=placement)
    logged_in(client, admin_a)
    text = client.get(reverse("web:reservation-use-env", args=[mine.pk])).content.decode()
    (tmp_path / "use.env").write_text(text)
    script = 'set -a; . ./use.env; printf "%s" "$IBC_HOSTS"'
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), text
    assert hostile in done.stdout.split(",")


def test_a_reservation_booked_by_no_tenant_member_names_the_tenant_and_the_secret_asks_for_a_token(
    client_for,
    operator,
    booked,  # noqa: F811
):
    mine, _ = booked
    Reservation.objects.filter(pk=mine.pk).update(created_by=operator)  # an operator booked it for them
    body = client_for(operator).get(f"/api/reservations/{mine.pk}/usage-guide/").json()
    assert {n["ssh"].split("@")[0] for n in body["nodes"]} == {mine.tenant.slug}
