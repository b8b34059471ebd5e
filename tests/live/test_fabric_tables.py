"""A fabric's ports and events as tables (sort, filter, CSV). The ports come from a real
discovery of the 1-SU design's ibnetdiscover export (parsed and named as the lab's would be)
joined with a snapshot the collector's own publisher writes; the events are rows made here.
Operators and auditors read and export them; tenants get 404."""

from __future__ import annotations

import csv
import datetime as dt
import io
import time

import pytest
from django.db.models import Sum
from django.urls import reverse
from django.utils import timezone

from console.fabric.discovery.compare import discovered_topology
from console.fabric.models import DiscoveryRun, Fabric
from console.telemetry import store
from console.telemetry.core import LinkStatus
from console.telemetry.models import FabricEvent
from designer.exports import export
from designer.imports.ibnetdiscover import parse_ibnetdiscover
from designer.services import revision_graph
from scheduling.models import Quota
from tests.live.fabric_fixtures import statuses

pytestmark = pytest.mark.django_db


def rows_of(response) -> list[dict[str, str]]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


@pytest.fixture
def ports(world):
    fabric, collector = world["fabric"], world["collector"]
    graph = revision_graph(fabric.revision)
    topology = discovered_topology(parse_ibnetdiscover(export(graph, "ibnetdiscover")[0]), graph)
    run = DiscoveryRun.objects.create(fabric=fabric, topology=topology)
    down, erring, congested = sorted(collector.lm.ends)[:3]
    live = statuses(collector, down={down})  # every other link at 60 % of line rate
    live[erring] = LinkStatus(erring, True, utilisation=0.1, error_totals={"SymbolErrorCounter": 7})
    live[congested] = LinkStatus(congested, True, utilisation=0.95, bucket=5, xmit_wait=1500.0)
    collector._snapshot(live, time.time(), 0.01)
    yield {**world, "topology": topology, "run": run, "down": down, "erring": erring, "congested": congested}
    if (r := store._redis()) is not None:
        r.delete(store._key("snap", fabric.pk))


def _ends(link: str) -> set[str]:
    """The two ports (``device/port``) of the discovered link measured at ``link``."""
    return {link, *(f"{peer}/{port}" for peer, port in [_peer_of(link)])}


_TOPOLOGY: dict = {}


def _peer_of(link: str) -> tuple[str, int]:
    name, port = link.rsplit("/", 1)
    for a, a_port, b, b_port, _ in _TOPOLOGY["links"]:
        if (a, a_port) == (name, int(port)):
            return b, b_port
        if (b, b_port) == (name, int(port)):
            return a, a_port
    raise AssertionError(f"{link} not discovered")


def test_every_discovered_port_with_its_live_counters(client, operator, ports):
    _TOPOLOGY.update(ports["topology"])
    client.force_login(operator)
    url = reverse("web:fabric-ports", args=[ports["fabric"].pk])
    response = client.get(url, {"_export": "csv"})
    assert f'filename="ports-{ports["fabric"].name}-' in response["Content-Disposition"]
    rows = rows_of(response)
    assert len(rows) == 2 * len(ports["topology"]["links"]) == 2 * 512
    by_port = {f"{r['Switch or node']}/{r['Port']}": r for r in rows}
    assert {p for p, r in by_port.items() if r["State"] == "Down"} == _ends(ports["down"])
    erring = [by_port[p] for p in _ends(ports["erring"])]
    assert {r["Symbol errors (count)"] for r in erring} == {"7"} and {r["Errors (count)"] for r in erring} == {"7"}
    hot = by_port[ports["congested"]]
    assert (hot["Xmit wait (ticks/s)"], hot["Utilisation (%)"], hot["State"]) == ("1500", "95.0", "Active")
    assert (hot["Width (lanes)"], hot["Speed"]) == ("4x", "NDR")
    assert {r["Utilisation (%)"] for r in rows} == {"60.0", "10.0", "95.0"}
    # filters: errors only, congested only, state, switch name
    only = {
        key: {f"{r['Switch or node']}/{r['Port']}" for r in rows_of(client.get(url, {"_export": "csv", key: value}))}
        for key, value in [("with_errors", "on"), ("congested", "on"), ("state", "Down")]
    }
    assert only == {
        "with_errors": _ends(ports["erring"]),
        "congested": _ends(ports["congested"]),
        "state": _ends(ports["down"]),
    }
    spine = rows_of(client.get(url, {"_export": "csv", "switch": "spine-01"}))
    expected = sum((a == "spine-01") + (b == "spine-01") for a, _, b, _, _ in ports["topology"]["links"])
    assert len(spine) == expected > 0 and {r["Switch or node"] for r in spine} == {"spine-01"}
    # sort: most congested first, then by port number descending
    first = rows_of(client.get(url, {"_export": "csv", "sort": "-xmit_wait"}))[0]
    assert f"{first['Switch or node']}/{first['Port']}" in _ends(ports["congested"])
    numbers = [int(r["Port"]) for r in rows_of(client.get(url, {"_export": "csv", "sort": "-port"}))]
    assert numbers == sorted(numbers, reverse=True)
    # the page: units in headings and cells, the discovery named, linked from the fabric and live pages
    page = client.get(url).content.decode()
    assert "Utilisation (%)" in page and "95.0 %" in page and "1,500 ticks/s" in page
    assert f"discovery {ports['run'].pk} of" in page and " UTC" in page
    for name in ("web:fabric", "web:fabric-live"):
        assert (
            f'href="{url}"'
            in client.get(reverse(name, args=[ports["fabric"].pk]), {"discover": "false"}).content.decode()
        )


def test_ports_and_events_are_for_operators_and_auditors(client, admin_a, member_a, auditor, ports):
    fabric = ports["fabric"]
    for user in (admin_a, member_a):
        client.force_login(user)
        for name in ("web:fabric-ports", "web:fabric-events"):
            assert client.get(reverse(name, args=[fabric.pk])).status_code == 404
            assert client.get(reverse(name, args=[fabric.pk]), {"_export": "csv"}).status_code == 404
    client.force_login(auditor)
    assert len(rows_of(client.get(reverse("web:fabric-ports", args=[fabric.pk]), {"_export": "csv"}))) == 1024
    assert client.post(reverse("web:fabric-ports", args=[fabric.pk])).status_code in (403, 405)


def _event(fabric: Fabric, kind: str, severity: str, subject: str, minutes_ago: int, **kw) -> FabricEvent:
    return FabricEvent.objects.create(
        fabric=fabric,
        kind=kind,
        severity=severity,
        subject=subject,
        message=f"{kind} on {subject}",
        opened_at=timezone.now().replace(microsecond=0) - dt.timedelta(minutes=minutes_ago),
        **kw,
    )


def test_events_sort_filter_and_csv(client, operator, auditor, world):
    fabric = world["fabric"]
    down = _event(fabric, "link_down", "critical", "su01-leaf-r1/33", 30)
    errs = _event(fabric, "link_errors", "warning", "spine-01/4", 20, status="acknowledged")
    sm = _event(fabric, "sm_state", "info", "sm", 5, status="resolved", resolution="master again")
    other = Fabric.objects.create(name="elsewhere", revision=fabric.revision)
    _event(other, "link_down", "critical", "elsewhere/1", 1)
    client.force_login(operator)
    url = reverse("web:fabric-events", args=[fabric.pk])
    rows = rows_of(client.get(url, {"_export": "csv"}))
    assert [(r["Subject"], r["Severity"], r["Status"]) for r in rows] == [
        ("sm", "Info", "Resolved"),
        ("spine-01/4", "Warning", "Acknowledged"),
        ("su01-leaf-r1/33", "Critical", "Open"),
    ]
    assert rows[2]["Opened (UTC)"] == f"{down.opened_at:%Y-%m-%d %H:%M:%S}"
    assert rows[0]["Resolution"] == "master again"
    oldest = rows_of(client.get(url, {"_export": "csv", "sort": "opened_at"}))
    assert [r["Subject"] for r in oldest] == ["su01-leaf-r1/33", "spine-01/4", "sm"]
    assert [r["Subject"] for r in rows_of(client.get(url, {"_export": "csv", "severity": "warning"}))] == ["spine-01/4"]
    assert [r["Subject"] for r in rows_of(client.get(url, {"_export": "csv", "kind": "link_down"}))] == [down.subject]
    assert [r["Subject"] for r in rows_of(client.get(url, {"_export": "csv", "q": "spine"}))] == [errs.subject]
    window = {"since": f"{errs.opened_at:%Y-%m-%dT%H:%M}", "until": f"{sm.opened_at:%Y-%m-%dT%H:%M}"}
    assert [r["Subject"] for r in rows_of(client.get(url, {"_export": "csv", **window}))] == [errs.subject]
    page = client.get(url).content.decode()
    assert "Opened (UTC)" in page and f"{sm.opened_at:%Y-%m-%d %H:%M:%S}" in page and "elsewhere/1" not in page
    assert f'href="{url}"' in client.get(reverse("web:fabric-live", args=[fabric.pk])).content.decode()
    client.force_login(auditor)
    assert len(rows_of(client.get(url, {"_export": "csv"}))) == 3


def test_quota_table_sorts_filters_and_exports_with_units(client, operator, auditor, world):
    pool = world["fabric"].pools.get()
    Quota.objects.update_or_create(
        tenant=world["a"], pool=pool, defaults={"guaranteed_gpus": 32, "borrow_limit_gpus": 8}
    )
    client.force_login(operator)
    url = reverse("web:reservation-quotas")
    rows = rows_of(client.get(url, {"_export": "csv", "pool": pool.pk, "sort": "-guaranteed"}))
    held = {q.tenant.name: q.guaranteed_gpus for q in Quota.objects.filter(pool=pool).select_related("tenant")}
    assert held[world["a"].name] == 32
    assert [(r["Tenant"], r["Guaranteed (GPUs)"]) for r in rows if r["Tenant"] in held] == [
        (name, f"{gpus} GPUs") for name, gpus in sorted(held.items(), key=lambda kv: -kv[1])
    ]
    mine = next(r for r in rows if r["Tenant"] == world["a"].name)
    assert (mine["Borrowable (GPUs)"], mine["Pool capacity"]) == (
        "8 GPUs",
        f"{pool.nodes.aggregate(n=Sum('gpus'))['n']} GPUs",
    )
    assert {r["Pool"] for r in rows} == {pool.name} and "" not in rows[0]
    only_b = rows_of(client.get(url, {"_export": "csv", "tenant": world["b"].pk, "pool": pool.pk}))
    assert [r["Tenant"] for r in only_b] == [world["b"].name]
    page = client.get(url, {"tenant": world["a"].pk}).content.decode()
    assert page.count('data-testid="quota-row"') == 1 and 'data-testid="quota-save"' in page and "_export=csv" in page
    assert '<input name="guaranteed_gpus" type="number"' in page and "&lt;input" not in page
    client.force_login(auditor)
    page = client.get(url).content.decode()
    assert (
        "32 GPUs" in page and 'data-testid="quota-save"' not in page and "<input" not in page.split("quota-editor")[1]
    )
