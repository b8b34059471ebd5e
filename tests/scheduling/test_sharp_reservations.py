"""SHARP through the console: a reservation asks for it, records its tree, and the next SHARP
request is refused (or queued) until the tree is released.

The fabric is one designed SU of 32 DGX H100 (256 GPUs) on QM9700 switches whose catalogue
figure an operator set to 1 tree per switch: every multi-node gang of the SU uses all 8 rail
leaves, so one SHARP job at a time fits, whatever the free nodes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from console.fabric.sharp_am import IDLE_GROUP, group_name, parse_port_groups
from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.models import CatalogueEntry
from designer.serialize import _model_dict
from designer.services import revision_graph
from scheduling.models import Reservation
from scheduling.services.sharp import sharp_am_files
from scheduling.services.topology import pool_topology
from scheduling.tasks import queue_pass_task
from tests.scheduling.conftest import at, give_quota, make_fabric, make_pool
from tests.scheduling.test_reservation_pages import logged_in

pytestmark = pytest.mark.django_db
SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}


def one_tree_per_switch() -> None:
    """The operator's catalogue figure: 1 SHARP tree per QM9700."""
    one_tree = dataclasses.replace(DEFAULT_CATALOGUE.switch("QM9700"), sharp_trees=1)
    data = {k: v for k, v in _model_dict(one_tree).items() if k != "name"}
    CatalogueEntry.objects.create(kind="switch", name="QM9700", data=data)


@pytest.fixture
def sharp_pool(db):
    one_tree_per_switch()
    return make_pool(make_fabric("sharp-su", SU))


def post(client, pool, **body):
    return client.post("/api/reservations/", {"pool": pool.pk, "duration_minutes": 60, **body}, format="json")


def test_a_sharp_reservation_holds_its_tree_until_released(sharp_pool, tenant_a, admin_a, client_for, client):
    give_quota(tenant_a, sharp_pool, 256)
    api = client_for(admin_a)
    named = pool_topology(sharp_pool)
    leaves = set(named.leaf_names)
    assert len(leaves) == 8 and all(named.sharp_trees[k] == 1 for k in named.switch_keys().values())
    # the preview shows the tree it would take (the page lists it under "Which switches and nodes")
    preview = api.post(
        "/api/reservations/preview/",
        {"pool": sharp_pool.pk, "nodes": 2, "sharp": True, "duration_minutes": 60},
        format="json",
    )
    assert preview.status_code == 200 and len(preview.json()["placement"]["sharp"]) == 9, preview.content
    # a SHARP reservation of 2 nodes gets a tree: the SU's 8 rail leaves and one spine
    first = post(api, sharp_pool, nodes=2, sharp=True)
    assert first.status_code == 201, first.content
    body = first.json()
    tree = body["placement"]["sharp"]
    assert set(tree[:-1]) == leaves and tree[-1] in named.spine_names
    row = Reservation.objects.get(pk=body["id"])
    assert row.constraint_params == {"sharp": True} and row.placement["sharp"] == tree
    # its "how to use it" turns NCCL's CollNet (the SHARP plugin) on; a plain reservation's does not
    guide = api.get(f"/api/reservations/{body['id']}/usage-guide/").json()
    assert guide["sharp_switches"] == tree and guide["env"]["NCCL_COLLNET_ENABLE"] == "1"
    page = logged_in(client, admin_a).get(reverse("web:reservation-use", args=[body["id"]])).content.decode()
    assert 'data-testid="use-sharp"' in page and all(name in page for name in tree)
    env_file = logged_in(client, admin_a).get(reverse("web:reservation-use-env", args=[body["id"]])).content.decode()
    assert "NCCL_COLLNET_ENABLE=1" in env_file.splitlines()
    # a second SHARP reservation for the same hour is refused with the reason, nodes being free
    refused = post(api, sharp_pool, nodes=2, sharp=True)
    assert refused.status_code == 409, refused.content
    assert refused.json()["code"] == "sharp"
    explanation = refused.json()["reservation"]["explanation"]
    assert explanation["reason"] == "sharp"
    assert explanation["message"].startswith("SHARP requested: ")
    assert explanation["message"].endswith("has no free aggregation tree; 1 job holds its tree")
    assert explanation["details"]["switch"] in leaves
    # the same size without SHARP is placed, without CollNet in its environment
    plain = post(api, sharp_pool, nodes=2)
    assert plain.status_code == 201 and "sharp" not in plain.json()["placement"]
    plain_guide = api.get(f"/api/reservations/{plain.json()['id']}/usage-guide/").json()
    assert plain_guide["sharp_switches"] == [] and "NCCL_COLLNET_ENABLE" not in plain_guide["env"]
    # an asap SHARP request queues behind the tree's holder
    queued = post(api, sharp_pool, nodes=2, sharp=True, start="asap")
    assert queued.status_code == 202 and queued.json()["status"] == "queued", queued.content
    assert dt.datetime.fromisoformat(queued.json()["estimated_start"]) == dt.datetime.fromisoformat(body["end"])
    # releasing the holder frees its tree: the queue pass places the waiting one with a tree
    assert api.post(f"/api/reservations/{body['id']}/release/").status_code == 200
    assert queue_pass_task.apply(kwargs={"pool_id": sharp_pool.pk}).get() == {"placed": 1, "queued": 0}
    placed = Reservation.objects.get(pk=queued.json()["id"])
    assert placed.status == Reservation.Status.PROVISIONING
    assert set(placed.placement["sharp"][:-1]) == leaves


def test_the_replay_cli_takes_a_sharp_share_with_the_designs_trees(sharp_pool, tmp_path):
    # 40 jobs of 4 nodes at t=0 on a 2,048-GPU design whose QM9700s serve 1 tree each (the
    # operator's catalogue figure): one SHARP job per SU at a time, 8 SUs
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,arrival_s,duration_s,gpus\n" + "".join(f"j{i},0,100,32\n" for i in range(40)))
    out = io.StringIO()
    argv = f"schedule replay --trace {trace} --design rail-optimized:gpus=2048 --sharp-share 1 --json"
    call_command(*argv.split(), stdout=out)
    result = json.loads(out.getvalue())
    assert result["sharp"] == {"requested": 40, "placed": 40, "waited": 32, "refused": 0}
    with pytest.raises(CommandError, match="between 0 and 1"):
        call_command(
            "schedule", "replay", "--trace", str(trace), "--design", "rail-optimized:gpus=256", "--sharp-share", "2"
        )


def test_sharp_am_input_carries_exactly_the_allocated_switches(sharp_pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, sharp_pool, 256)
    api = client_for(admin_a)
    fabric = sharp_pool.fabric
    graph = revision_graph(fabric.revision)
    capable = {sw.guid for sw in graph.switches.values()}  # every QM9700 of the SU serves trees
    body = post(api, sharp_pool, nodes=2, sharp=True).json()
    tree = {graph.switches[name].guid for name in body["placement"]["sharp"]}
    files = sharp_am_files(fabric)
    groups = parse_port_groups(files["pgrp_policy_file"])
    assert set(groups) == {group_name(body["id"]), IDLE_GROUP}
    assert set(groups[group_name(body["id"])]) == tree and len(tree) == 9  # 8 rail leaves + 1 spine
    assert set(groups[IDLE_GROUP]) == capable - tree
    assert f"port-group-name: {IDLE_GROUP}" in files["device_configuration_file"]
    assert "sharp-enabled: 0" in files["device_configuration_file"]
    # the CLI prints the same two files
    out = io.StringIO()
    call_command("schedule", "sharp-am", "--fabric", fabric.name, stdout=out)
    printed = out.getvalue()
    pgrp = printed.split("# ---- pgrp_policy_file\n", 1)[1].split("# ---- device_configuration_file\n", 1)[0]
    assert parse_port_groups(pgrp) == groups
    # released: no tree left, every SHARP-capable switch idle
    assert api.post(f"/api/reservations/{body['id']}/release/").status_code == 200
    after = parse_port_groups(sharp_am_files(fabric)["pgrp_policy_file"])
    assert after == {IDLE_GROUP: sorted(capable)}


def test_extending_into_another_sharp_reservations_tree_is_refused(sharp_pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, sharp_pool, 256)
    api = client_for(admin_a)
    first, second = at(1), at(2)
    window = {"nodes": 2, "sharp": True}
    a = api.post(
        "/api/reservations/",
        {"pool": sharp_pool.pk, **window, "start": first.isoformat(), "end": second.isoformat()},
        format="json",
    )
    b = api.post(
        "/api/reservations/",
        {"pool": sharp_pool.pk, **window, "start": second.isoformat(), "end": at(3).isoformat()},
        format="json",
    )
    assert a.status_code == b.status_code == 201, (a.content, b.content)  # one after the other: one tree each time
    # A's tree cannot last into B's hour: every switch serves 1 tree
    longer = api.post(f"/api/reservations/{a.json()['id']}/extend/", {"end": at(2.5).isoformat()}, format="json")
    assert longer.status_code == 409 and longer.json()["code"] == "sharp", longer.content
    assert "has no free aggregation tree for the extension; 1 job holds its tree" in longer.json()["detail"]
    # once B is cancelled, the extension is granted
    assert api.post(f"/api/reservations/{b.json()['id']}/cancel/").status_code == 200
    again = api.post(f"/api/reservations/{a.json()['id']}/extend/", {"end": at(2.5).isoformat()}, format="json")
    assert again.status_code == 200, again.content
