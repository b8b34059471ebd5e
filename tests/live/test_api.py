"""Telemetry API: events scoped per tenant (the isolation suite), snapshots and history that
show a tenant only its own links, acknowledge/resolve audited, /metrics protected."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from console import broadcast
from console.fabric.models import Fabric
from console.telemetry import store
from console.telemetry.api.views import FabricEventViewSet
from console.telemetry.models import FabricEvent
from console.tenancy.models import AuditEntry, Principal, Role
from designer.services import create_design
from scheduling.models import Reservation
from tests.isolation import IsolationSuite
from tests.live.fabric_fixtures import ONE_SU, statuses
from tests.live.helpers import SYSTEM

pytestmark = pytest.mark.django_db


def _fabric() -> Fabric:
    _, revision = create_design(
        SYSTEM, Principal(None, Role.OPERATOR, None), name=f"ev-{uuid.uuid4().hex[:6]}", options=ONE_SU
    )
    return Fabric.objects.create(name=f"ev-{uuid.uuid4().hex[:6]}", revision=revision)


class TestFabricEventIsolation(IsolationSuite):
    viewset = FabricEventViewSet
    basename = "fabric-event"
    custom_actions = [("post", "acknowledge"), ("post", "resolve")]
    filter_fields = ["fabric", "tenant"]
    supports_create = supports_update = supports_delete = False

    def make_object(self, tenant, user):
        event = FabricEvent.objects.create(
            fabric=_fabric(), kind="link_down", subject="x/1", message="link x/1 is down", opened_at=timezone.now()
        )
        event.tenants.set([tenant])
        return event


def _publish_snapshot(world):
    collector = world["collector"]
    collector._snapshot(statuses(collector), 1.0, 0.1)


def test_snapshot_and_link_detail_show_a_tenant_only_its_links(world, client_for, admin_a, operator):
    _publish_snapshot(world)
    fid = world["fabric"].pk
    collector = world["collector"]
    mine = collector.workload.tenant_links[world["a"].pk]
    theirs = sorted(collector.workload.tenant_links[world["b"].pk])[0]
    body = client_for(admin_a).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
    assert {lk["id"] for lk in body["links"]} == mine
    assert body["group"] == f"tenant.{world['a'].pk}"
    assert "tenants" not in body and list(body["reservations"]) == [str(world["res_a"].pk)]
    nodes_b = {n for r, j in collector.workload.jobs if r and r.tenant_id == world["b"].pk for n in j.nodes}
    assert not nodes_b & {n for ns in body["reservations"].values() for n in ns}
    op = client_for(operator).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
    assert len(op["links"]) == len(collector.lm.ends) and op["group"] == f"fabric.{fid}"
    a = client_for(admin_a)
    assert a.get(f"/api/telemetry/fabrics/{fid}/links/{sorted(mine)[0]}/").status_code == 200
    assert a.get(f"/api/telemetry/fabrics/{fid}/links/{theirs}/").status_code == 404
    res_b = world["res_b"].pk
    assert a.get(f"/api/telemetry/fabrics/{fid}/history/?reservation={res_b}").status_code == 404
    assert a.get(f"/api/telemetry/fabrics/{fid}/history/?tenant={world['b'].pk}").status_code == 404


def test_the_snapshot_names_tenants_and_reservations_and_a_tenant_only_its_own(world, client_for, admin_a, operator):
    """The live filters show names: the operator's snapshot names every tenant and its
    reservations (a reservation without a name by its partition, ``res-<id>``); a tenant's names
    only its own reservations and nothing of the other tenant."""
    Reservation.objects.filter(pk=world["res_a"].pk).update(name="llama-pretrain")
    # reservations get a generated name now; one stored without (before that) shows its partition
    Reservation.objects.filter(pk=world["res_b"].pk).update(name="")
    world["collector"].workload.jobs = []  # the next refresh reads the reservations again
    world["collector"]._refresh_jobs()
    _publish_snapshot(world)
    fid = world["fabric"].pk
    a, b = world["a"], world["b"]
    res_a, res_b = world["res_a"].pk, world["res_b"].pk
    op = client_for(operator).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
    assert op["tenants"][str(a.pk)]["name"] == a.name and op["tenants"][str(b.pk)]["name"] == b.name
    assert op["tenants"][str(a.pk)]["reservation_names"] == {str(res_a): "llama-pretrain"}
    assert op["tenants"][str(b.pk)]["reservation_names"] == {str(res_b): f"res-{res_b}"}
    mine = client_for(admin_a).get(f"/api/telemetry/fabrics/{fid}/snapshot/")
    assert mine.json()["reservation_names"] == {str(res_a): "llama-pretrain"}
    text = mine.content.decode()
    assert b.name not in text and f"res-{res_b}" not in text and a.name not in text


def test_the_snapshot_seq_is_the_one_its_links_are_current_with(world, client_for, admin_a, operator):
    """A sweep's deltas go out before the collector rewrites the snapshot. A client resyncing in
    between gets the older snapshot, so it must get that snapshot's seq too (and keep the newer
    delta), not the group's current seq (and drop the delta as already held)."""
    fid = world["fabric"].pk
    groups = {operator: f"fabric.{fid}", admin_a: f"tenant.{world['a'].pk}"}
    _publish_snapshot(world)
    written = broadcast.current_seqs(list(groups.values()))
    for group in groups.values():
        broadcast.next_seq(group)  # the next sweep's delta, numbered before its snapshot is written
    for user, group in groups.items():
        body = client_for(user).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
        assert body["group"] == group
        assert body["seq"] == written[group] == broadcast.current_seq(group) - 1
    _publish_snapshot(world)
    for user, group in groups.items():
        body = client_for(user).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
        assert body["seq"] == written[group] + 1


def test_history_per_reservation_switch_and_downsampling(world, client_for, operator):
    from console.telemetry import services

    _publish_snapshot(world)
    collector = world["collector"]
    fid = world["fabric"].pk
    # Both samples in one minute bucket (at :00 and :10), whatever the clock says now.
    past = (timezone.now() - timezone.timedelta(minutes=3)).replace(second=0, microsecond=0)
    where = {lid: (e.switch, e.tier) for lid, e in collector.lm.ends.items()}
    rows = {lid: {"tx_bps": 1e9, "rx_bps": 2e9, "util": 0.5, "errors": 1, "up": True} for lid in where}
    services.store_samples(fid, past, rows, where)
    services.store_samples(fid, past + timezone.timedelta(seconds=10), rows, where)
    res = world["res_a"].pk
    body = client_for(operator).get(f"/api/telemetry/fabrics/{fid}/history/?reservation={res}").json()
    job = next(j for r, j in collector.workload.jobs if r is not None and r.id == res)
    assert set(body["links"]) == collector.lm.links_of_nodes(set(job.nodes))
    assert len(body["links"]) == 16  # 2 nodes × 8 rails
    assert all(len(series) == 2 for series in body["links"].values())
    out = services.downsample_and_prune()
    assert out["minutes"] == len(where)
    minute = services.history(fid, None, since=past - timezone.timedelta(minutes=1), resolution=60)
    assert all(s[0][4] == 2 for s in minute.values())  # errors summed over the minute
    assert services.downsample_and_prune()["minutes"] == 0  # idempotent


def test_operators_acknowledge_and_resolve_with_audit_tenants_cannot(world, client_for, operator, admin_a):
    event = FabricEvent.objects.create(
        fabric=world["fabric"],
        kind="link_down",
        subject="l/1",
        message="link l/1 is down",
        opened_at=timezone.now(),
        reservations=[world["res_a"].pk, world["res_b"].pk],
    )
    event.tenants.set([world["a"], world["b"]])
    a = client_for(admin_a)
    seen = a.get(f"/api/telemetry/events/{event.pk}/").json()
    assert seen["reservations"] == [world["res_a"].pk] and seen["tenants"] == [world["a"].pk]
    assert a.post(f"/api/telemetry/events/{event.pk}/acknowledge/").status_code == 403
    op = client_for(operator)
    assert op.post(f"/api/telemetry/events/{event.pk}/acknowledge/").json()["status"] == "acknowledged"
    assert op.post(f"/api/telemetry/events/{event.pk}/acknowledge/").status_code == 409
    assert op.post(f"/api/telemetry/events/{event.pk}/resolve/").json()["status"] == "resolved"
    actions = list(
        AuditEntry.objects.filter(object_id=str(event.pk), object_type__icontains="fabricevent").values_list(
            "action", flat=True
        )
    )
    assert sorted(actions) == ["telemetry.event.acknowledge", "telemetry.event.resolve"]


def test_metrics_need_an_operator_session_or_the_token(world, client, settings, operator):
    _publish_snapshot(world)
    assert client.get("/metrics").status_code == 403
    settings.METRICS_TOKEN = "scrape-secret"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-secret").content.decode()
    assert "ibc_link_up{" in body and "ibc_reservations{" in body and "ibc_quota_gpus{" in body
    client.force_login(operator)
    assert client.get("/metrics").status_code == 200
    assert store.load_snapshot(world["fabric"].pk) is not None


# ---- a switch's port table --------------------------------------------------------------------


def _ports(client, fid: int, switch: str):
    return client.get(f"/api/telemetry/fabrics/{fid}/switches/{switch}/ports/")


def _nodes_of(world, tenant) -> set[str]:
    jobs = world["collector"].workload.jobs
    return {n for r, j in jobs if r is not None and r.tenant_id == tenant.pk for n in j.nodes}


def test_operator_sees_every_port_of_a_switch_with_peers_rates_and_live_state(world, client_for, operator, auditor):
    collector = world["collector"]
    fid = world["fabric"].pk
    mine = sorted(collector.workload.tenant_links[world["a"].pk])
    down = mine[0]  # a host link of tenant A: "<leaf>/<port>"
    leaf, host_port = down.split("/")
    # an uplink of that leaf, measured at its spine: busier spine → leaf than leaf → spine
    uplink = next(e for e in collector.lm.ends.values() if e.peer == leaf)
    states = statuses(collector, down={down})
    states[uplink.link_id].tx_bps, states[uplink.link_id].rx_bps = 1e9, 3e9
    states[uplink.link_id].errors = {"SymbolErrorCounter": 4}
    collector._snapshot(states, 1.0, 0.1)

    response = _ports(client_for(operator), fid, leaf)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["switch"] == leaf and body["tier"] == "leaf" and body["group"] == f"fabric.{fid}"
    assert body["ports_total"] == 64 and [p["port"] for p in body["ports"]] == list(range(1, 65))
    rows = {p["port"]: p for p in body["ports"]}
    host = rows[int(host_port)]
    assert host["link"] == down and host["measured_here"] and host["state"] == "Down"
    assert host["peer"]["kind"] == "node" and host["peer"]["name"] in _nodes_of(world, world["a"])
    assert host["rate"] == "4xNDR" and host["gbps"] == 400 and host["tier"] == "node_leaf"
    up = rows[uplink.peer_port]
    assert up["link"] == uplink.link_id and not up["measured_here"] and up["state"] == "Active"
    assert up["peer"] == {"name": uplink.switch, "port": uplink.port, "kind": "switch", "tier": "spine"}
    assert (up["tx_bps"], up["rx_bps"]) == (3e9, 1e9)  # the leaf port's own directions
    assert up["errors"] == {"SymbolErrorCounter": 4} and up["bucket"] == 3
    # every host of the leaf is named to the operator, both tenants' included
    peers = {p["peer"]["name"] for p in body["ports"] if p["peer"]}
    assert _nodes_of(world, world["a"]) | _nodes_of(world, world["b"]) <= peers
    # the spine end of the same link: counters as measured
    spine = {p["port"]: p for p in _ports(client_for(operator), fid, uplink.switch).json()["ports"]}
    assert (spine[uplink.port]["tx_bps"], spine[uplink.port]["rx_bps"]) == (1e9, 3e9)
    assert spine[uplink.port]["peer"]["name"] == leaf
    # auditors read the same table; unknown switches and fabrics are 404
    assert len(_ports(client_for(auditor), fid, leaf).json()["ports"]) == 64
    assert _ports(client_for(operator), fid, "no-such-switch").status_code == 404
    assert _ports(client_for(operator), fid + 10_000, leaf).status_code == 404


def test_a_tenant_sees_only_its_own_links_of_a_switch_and_404_elsewhere(world, client_for, admin_a, admin_b):
    collector = world["collector"]
    fid = world["fabric"].pk
    a = client_for(admin_a)
    leaf = sorted(collector.workload.tenant_links[world["a"].pk])[0].split("/")[0]
    # before the collector's first sweep (an empty snapshot) no link is its own anywhere
    store.save_snapshot(fid, {})
    assert _ports(a, fid, leaf).status_code == 404
    _publish_snapshot(world)

    response = _ports(a, fid, leaf)
    assert response.status_code == 200, response.content
    body = response.json()
    mine = {lid for lid in collector.workload.tenant_links[world["a"].pk] if lid.startswith(f"{leaf}/")}
    assert {p["link"] for p in body["ports"]} == mine and len(mine) == 2  # 2 nodes, one rail
    assert {p["peer"]["name"] for p in body["ports"]} <= _nodes_of(world, world["a"])
    assert all(p["state"] == "Active" for p in body["ports"])
    assert body["group"] == f"tenant.{world['a'].pk}"
    text = response.content.decode()
    assert not any(name in text for name in _nodes_of(world, world["b"]))
    theirs = {lid for lid in collector.workload.tenant_links[world["b"].pk] if lid.startswith(f"{leaf}/")}
    assert not theirs & {p["link"] for p in body["ports"]}
    # tenant B gets its own rows of the same leaf
    b_rows = _ports(client_for(admin_b), fid, leaf).json()["ports"]
    assert {p["link"] for p in b_rows} == theirs
    # a spine carries none of a tenant's host links: 404, the same answer as no such switch
    for switch in ("spine-01", "no-such-switch"):
        missing = _ports(a, fid, switch)
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"


def _live_init(response) -> dict:
    import json

    html = response.content.decode()
    start = html.index('id="live-init"')
    return json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])


def test_live_page_opens_a_switch_by_url_beside_its_pod_never_as_a_faceplate(world, client, admin_a):
    fid = world["fabric"].pk
    client.force_login(admin_a)
    leaf = sorted(world["collector"].workload.tenant_links[world["a"].pk])[0].split("/")[0]
    for query in (f"?switch={leaf}", f"?level=switch&focus={leaf}", f"?focus={leaf}"):
        response = client.get(f"/fabrics/{fid}/live/{query}")
        assert response.status_code == 200, query
        init = _live_init(response)
        assert init["switch"] == leaf and init["canvas"]["level"] == "pod", query
        assert "ports" not in init["canvas"]  # the designer's faceplate names every host
        assert leaf in {n["id"] for n in init["canvas"]["nodes"]}
    assert _live_init(client.get(f"/fabrics/{fid}/live/"))["switch"] is None
    assert client.get(f"/fabrics/{fid}/live/?switch=no-such").status_code == 404
    assert client.get(f"/fabrics/{fid}/live/?level=switch").status_code == 404


@pytest.mark.django_db
def test_a_flapping_alarm_grows_its_history_in_place_audited():
    from console.telemetry import services
    from console.telemetry.alarms import Transition

    fabric = _fabric()
    opened = {"drops": 3, "history": [0, 90, 180]}
    services.apply_transitions(
        fabric.pk, [Transition("open", "link_flapping", "s/1", "critical", "3 drops", opened)], {}, actor=SYSTEM
    )
    grown = {"drops": 4, "history": [0, 90, 180, 270]}
    changed = services.apply_transitions(
        fabric.pk, [Transition("update", "link_flapping", "s/1", "critical", "4 drops", grown)], {}, actor=SYSTEM
    )
    event = FabricEvent.objects.get(fabric=fabric, kind="link_flapping")
    assert [e.pk for e in changed] == [event.pk]
    assert (event.status, event.message, event.detail) == ("open", "4 drops", grown)
    assert AuditEntry.objects.filter(action="telemetry.event.update", object_id=str(event.pk)).count() == 1
    # an update of a condition that is not open changes nothing
    assert (
        services.apply_transitions(
            fabric.pk, [Transition("update", "link_flapping", "x/9", "critical", "?", {})], {}, actor=SYSTEM
        )
        == []
    )
