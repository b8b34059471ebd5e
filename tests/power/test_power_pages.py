"""The power UI served by Django: the occupancy map's power marks and legend, and a node's power
page (state, boot time, BMC without its password, the history table, the buttons) for operators,
read-only for auditors, 404 for tenants.

The fabric is a 16-node fat tree (4 leaves × 4 DGX H100) in one pool. History rows come from the
power services themselves (an operator's power-off, the reaper calling a stuck node failed); the
BMC is only stored here (no BMC is called), so no emulator runs.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from console.power import services
from console.tenancy.context import Actor
from scheduling.models import Node
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db
SECRET = "pw-never-shown-42"
OPERATOR_ACTOR = Actor.system("ops-desk")


@pytest.fixture
def nodes(db) -> list[Node]:
    fabric = make_fabric("pw16", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"})
    make_pool(fabric)
    return list(Node.objects.filter(fabric=fabric).order_by("name"))


def _bmc(node: Node) -> None:
    services.set_bmc(
        node.pk,
        actor=OPERATOR_ACTOR,
        data={"driver": "redfish", "address": "https://bmc-7.example:8443", "username": "root", "password": SECRET},
    )


def _cells(html: str) -> dict[str, dict[str, str]]:
    """Every occupancy cell: node name → its href, data-power and text (the glyph)."""
    out = {}
    for match in re.finditer(r'<a href="([^"]+)" class="occ-cell[^"]*"([^>]*)>([^<]*)</a>', html):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', match.group(2)))
        out[attrs["data-node"]] = {"href": match.group(1), "power": attrs["data-power"], "glyph": match.group(3)}
    return out


def test_occupancy_map_marks_each_power_state_with_a_glyph_a_legend_and_a_link(client, operator, nodes):
    # given nodes in every power state
    wanted = {
        nodes[0].name: ("off", "○"),
        nodes[1].name: ("off", "○"),
        nodes[2].name: ("powering-on", "↑"),
        nodes[3].name: ("powering-off", "↓"),
        nodes[4].name: ("failed", "✕"),
    }
    for node in nodes:
        state = wanted.get(node.name, ("on", ""))[0]
        Node.objects.filter(pk=node.pk).update(power_state=state, power_changed_at=timezone.now())
    client.force_login(operator)
    html = client.get(reverse("web:reservation-occupancy")).content.decode()
    cells = _cells(html)
    # then every node is a link to its power page carrying its state and glyph
    assert len(cells) == 16
    for node in nodes:
        state, glyph = wanted.get(node.name, ("on", ""))
        assert cells[node.name] == {"href": f"/nodes/{node.pk}/power/", "power": state, "glyph": glyph}, node.name
    # and the legend names every state with its glyph and how many nodes are in it
    legend = dict(
        re.findall(
            r'data-power="([\w-]+)"><span class="occ-cell occ-key[^>]*>[^<]*</span>[^<]+<span class="muted">(\d+)', html
        )
    )
    assert legend == {"on": "11", "powering-on": "1", "off": "2", "powering-off": "1", "failed": "1"}
    for label in ("powered off", "booting", "powering off", "power failed"):
        assert f"{label} <span" in html
    # and a cell's title says the state in words and since when (UTC)
    assert re.search(
        rf'data-node="{nodes[4].name}"[^>]*title="[^"]*power: power failed since \d{{4}}-\d\d-\d\d \d\d:\d\d UTC"', html
    )


def test_node_power_page_shows_state_boot_time_bmc_and_history_to_an_operator(client, operator, nodes):
    node = nodes[0]
    _bmc(node)
    # given an operator's power-off and, long after, the reaper calling the stuck node failed
    services.power_off(node.pk, actor=OPERATOR_ACTOR, reason="idle all weekend", enqueue=False)
    later = timezone.now() + dt.timedelta(hours=2)
    assert services.reap_stuck(now=later) == [node.pk]
    node.refresh_from_db()
    client.force_login(operator)
    response = client.get(reverse("web:node-power", args=[node.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    # then the state is in words, with since when in UTC
    assert 'data-testid="power-state" data-state="failed"' in html
    assert '<span data-testid="power-label">power failed</span>' in html
    assert f"since {node.power_changed_at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC" in html
    # the boot time is the node type's (the catalogue's, as the services read it)
    assert f'data-testid="boot-time">{int(services.boot_time(node).total_seconds())} s' in html
    # the BMC is summarised, never its password or its encrypted form
    assert "https://bmc-7.example:8443" in html and ">Redfish<" in html
    assert "set (stored encrypted, never shown)" in html
    assert SECRET not in html and node.bmc.password_encrypted not in html
    # the history: newest first, from → to, intended or observed, actor, reason
    rows = re.findall(r'<tr data-testid="power-event" data-to="([\w-]+)" data-intended="(\w+)"', html)
    assert rows == [("failed", "no"), ("powering-off", "yes")]
    assert "ops-desk" in html and "idle all weekend" in html and "no BMC answer recorded since" in html
    assert re.search(
        r"power-powering-off\"><span class=\"power-glyph\" aria-hidden=\"true\">↓</span> powering off<", html
    )
    # and an operator gets the three buttons
    for testid in ("power-on", "power-off", "power-force-off"):
        assert f'data-testid="{testid}"' in html


def test_history_filters_and_exports_csv(client, operator, nodes):
    node = nodes[1]
    _bmc(node)
    services.power_off(node.pk, actor=OPERATOR_ACTOR, reason="drain test", enqueue=False)
    services.reap_stuck(now=timezone.now() + dt.timedelta(hours=2))
    client.force_login(operator)
    url = reverse("web:node-power", args=[node.pk])
    observed = client.get(url, {"kind": "observed"}).content.decode()
    assert re.findall(r'data-testid="power-event" data-to="([\w-]+)"', observed) == ["failed"]
    export = client.get(url, {"_export": "csv"})
    assert export["Content-Type"].startswith("text/csv")
    assert f"power-{node.name}-" in export["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    assert [(r["From"], r["To"], r["Intended or observed"]) for r in rows] == [
        ("powering-off", "failed", "observed"),
        ("on", "powering-off", "intended"),
    ]
    assert rows[1]["Actor"] == "ops-desk" and rows[1]["Reason"] == "drain test"
    assert SECRET not in export.content.decode()


def test_auditors_read_without_buttons_and_tenants_get_404(client, auditor, admin_a, member_a, nodes):
    node = nodes[2]
    _bmc(node)
    url = reverse("web:node-power", args=[node.pk])
    client.force_login(auditor)
    html = client.get(url).content.decode()
    assert 'data-testid="power-state" data-state="on"' in html
    assert 'data-testid="power-actions"' not in html and 'data-testid="power-off"' not in html
    assert '"can_act": false' in html
    for user in (admin_a, member_a):
        client.force_login(user)
        assert client.get(url).status_code == 404
        assert client.get(reverse("web:reservation-occupancy")).status_code == 404


def test_unknown_node_is_404_and_a_node_without_bmc_says_so(client, operator, nodes):
    client.force_login(operator)
    assert client.get(reverse("web:node-power", args=[10_000_000])).status_code == 404
    html = client.get(reverse("web:node-power", args=[nodes[3].pk])).content.decode()
    assert 'data-testid="bmc-none"' in html and 'data-testid="power-no-bmc"' in html
    assert 'data-testid="power-actions"' not in html
