"""An imported fabric becomes a pool: its hosts come in with no GPUs (ibnetdiscover sees HCAs);
operators say which hosts are which servers afterwards, in bulk (patterns or a CSV), through the
API, the CLI and the import page; the next revision backs an inventory and a pool like a planned
design."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal
from designer import services
from designer.exports import export
from designer.models import DesignRevision
from designer.plan import plan
from scheduling.models import GPU
from scheduling.services import inventory

pytestmark = pytest.mark.django_db

SU1 = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}


def imported(operator, name: str):
    text = export(plan(SU1).graph, "ibnetdiscover")[0]
    design, revision = services.import_ibnetdiscover(
        Actor.for_user(operator), Principal.of(operator), name=name, text=text
    )
    return design, revision


def test_patterns_give_an_imported_fabric_its_gpus_and_it_backs_a_pool(operator, client_for):
    design, first = imported(operator, "brownfield")
    assert first.summary["gpus"] == 0  # what ibnetdiscover can tell
    api = client_for(operator)
    answer = api.post(
        f"/api/designs/{design.pk}/node-types/", {"host_types": "# DGX rows\nsu01-n*  DGX-H100\n"}, format="json"
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert body["number"] == 2 and body["message"] == "node types: 32 DGX-H100"
    # NVIDIA's DGX H100: 8 GPUs a node, so 32 of them hold 256
    assert body["summary"]["gpus"] == 256
    assert AuditEntry.objects.filter(action="design.revision.create").count() == 2
    # the revision backs an inventory and a pool as a planned design does
    fabric = Fabric.objects.create(name="brownfield-fab", revision=DesignRevision.objects.get(design=design, number=2))
    inventory.import_inventory(fabric)
    assert GPU.objects.filter(node__fabric=fabric).count() == 256
    assert set(fabric.nodes.values_list("node_type", flat=True)) == {"DGX-H100"}


def test_a_csv_of_hosts_and_bad_input(operator, client_for, auditor, member_a):
    design, _ = imported(operator, "sheet")
    api = client_for(operator)
    url = f"/api/designs/{design.pk}/node-types/"
    sheet = 'host,node_type\nsu01-n01,DGX-H100\n"su01-n02",DGX-H100\n'
    answer = api.post(url, {"host_types": sheet}, format="json")
    assert answer.status_code == 201 and answer.json()["summary"]["gpus"] == 16
    # nothing left to change: refused, nothing saved
    again = api.post(url, {"host_types": sheet}, format="json")
    assert again.status_code == 400 and again.json()["fields"] == {"host_types": ["no host matches"]}
    bad = api.post(url, {"host_types": "su01-n03 DGX-H100\nsu01-n04 NO-SUCH-TYPE\n"}, format="json")
    assert bad.status_code == 400 and "line 2" in bad.json()["detail"] and "NO-SUCH-TYPE" in bad.json()["detail"]
    assert design.revisions.count() == 2
    assert client_for(auditor).post(url, {"host_types": sheet}, format="json").status_code == 403
    assert client_for(member_a).post(url, {"host_types": sheet}, format="json").status_code in (403, 404)


def test_the_cli_and_the_import_page_say_which_hosts_are_which(operator, client, tmp_path, capsys):
    design, _ = imported(operator, "by-cli")
    rules = tmp_path / "types.txt"
    rules.write_text("su01-n0[1-4]  DGX-H100\n")
    call_command("design", "node-types", "--design", "by-cli", "--file", str(rules), "--json")
    body = json.loads(capsys.readouterr().out)
    assert (body["revision"], body["gpus"]) == (2, 32)
    client.force_login(operator)
    page = client.get(f"/designer/{design.pk}/imported/").content.decode()
    assert 'data-testid="node-types-form"' in page
    posted = client.post(f"/designer/{design.pk}/node-types/", {"host_types": "su01-n* DGX-H100"})
    assert posted.status_code == 302 and posted["Location"] == f"/designer/{design.pk}/r/3/"
    assert design.revisions.get(number=3).summary["gpus"] == 256
