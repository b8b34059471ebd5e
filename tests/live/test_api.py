"""Telemetry API: events scoped per tenant (the isolation suite), snapshots and history that
show a tenant only its own links, acknowledge/resolve audited, /metrics protected."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone

from console.fabric.models import Fabric
from console.telemetry import store
from console.telemetry.api.views import FabricEventViewSet
from console.telemetry.models import FabricEvent
from console.tenancy.models import AuditEntry, Principal, Role
from designer.services import create_design
from tests.isolation import IsolationSuite
from tests.live.fabric_fixtures import ONE_SU, statuses
from tests.live.helpers import SYSTEM

pytestmark = pytest.mark.django_db


def _fabric() -> Fabric:
    _, revision = create_design(SYSTEM, Principal(None, Role.OPERATOR, None),
                                name=f"ev-{uuid.uuid4().hex[:6]}", options=ONE_SU)  # fmt: skip
    return Fabric.objects.create(name=f"ev-{uuid.uuid4().hex[:6]}", revision=revision)


class TestFabricEventIsolation(IsolationSuite):
    viewset = FabricEventViewSet
    basename = "fabric-event"
    custom_actions = [("post", "acknowledge"), ("post", "resolve")]
    filter_fields = ["fabric", "tenant"]
    supports_create = supports_update = supports_delete = False

    def make_object(self, tenant, user):
        event = FabricEvent.objects.create(fabric=_fabric(), kind="link_down", subject="x/1",
                                           message="link x/1 is down", opened_at=timezone.now())  # fmt: skip
        event.tenants.set([tenant])
        return event


def _publish_snapshot(world):
    collector = world["collector"]
    collector._snapshot(statuses(collector), 1.0, 0.1)


def test_snapshot_and_link_detail_show_a_tenant_only_its_links(
    world, client_for, admin_a, operator
):
    _publish_snapshot(world)
    fid = world["fabric"].pk
    collector = world["collector"]
    mine = collector.tenant_links[world["a"].pk]
    theirs = sorted(collector.tenant_links[world["b"].pk])[0]
    body = client_for(admin_a).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
    assert {lk["id"] for lk in body["links"]} == mine
    assert body["group"] == f"tenant.{world['a'].pk}"
    assert "tenants" not in body and list(body["reservations"]) == [str(world["res_a"].pk)]
    nodes_b = {n for r, j in collector.jobs if r and r.tenant_id == world["b"].pk for n in j.nodes}
    assert not nodes_b & {n for ns in body["reservations"].values() for n in ns}
    op = client_for(operator).get(f"/api/telemetry/fabrics/{fid}/snapshot/").json()
    assert len(op["links"]) == len(collector.lm.ends) and op["group"] == f"fabric.{fid}"
    a = client_for(admin_a)
    assert a.get(f"/api/telemetry/fabrics/{fid}/links/{sorted(mine)[0]}/").status_code == 200
    assert a.get(f"/api/telemetry/fabrics/{fid}/links/{theirs}/").status_code == 404
    res_b = world["res_b"].pk
    assert a.get(f"/api/telemetry/fabrics/{fid}/history/?reservation={res_b}").status_code == 404
    assert a.get(f"/api/telemetry/fabrics/{fid}/history/?tenant={world['b'].pk}").status_code == 404


def test_history_per_reservation_switch_and_downsampling(world, client_for, operator):
    from console.telemetry import services

    _publish_snapshot(world)
    collector = world["collector"]
    fid = world["fabric"].pk
    # Both samples in one minute bucket (at :00 and :10), whatever the clock says now.
    past = (timezone.now() - timezone.timedelta(minutes=3)).replace(second=0, microsecond=0)
    where = {lid: (e.switch, e.tier) for lid, e in collector.lm.ends.items()}
    rows = {lid: {"tx_bps": 1e9, "rx_bps": 2e9, "util": 0.5, "errors": 1, "up": True}
            for lid in where}  # fmt: skip
    services.store_samples(fid, past, rows, where)
    services.store_samples(fid, past + timezone.timedelta(seconds=10), rows, where)
    res = world["res_a"].pk
    body = (
        client_for(operator).get(f"/api/telemetry/fabrics/{fid}/history/?reservation={res}").json()
    )
    job = next(j for r, j in collector.jobs if r is not None and r.id == res)
    assert set(body["links"]) == collector.lm.links_of_nodes(set(job.nodes))
    assert len(body["links"]) == 16  # 2 nodes × 8 rails
    assert all(len(series) == 2 for series in body["links"].values())
    out = services.downsample_and_prune()
    assert out["minutes"] == len(where)
    minute = services.history(fid, None, since=past - timezone.timedelta(minutes=1), resolution=60)
    assert all(s[0][4] == 2 for s in minute.values())  # errors summed over the minute
    assert services.downsample_and_prune()["minutes"] == 0  # idempotent


def test_operators_acknowledge_and_resolve_with_audit_tenants_cannot(
    world, client_for, operator, admin_a
):
    event = FabricEvent.objects.create(fabric=world["fabric"], kind="link_down", subject="l/1",
                                       message="link l/1 is down", opened_at=timezone.now(),
                                       reservations=[world["res_a"].pk, world["res_b"].pk])  # fmt: skip
    event.tenants.set([world["a"], world["b"]])
    a = client_for(admin_a)
    seen = a.get(f"/api/telemetry/events/{event.pk}/").json()
    assert seen["reservations"] == [world["res_a"].pk] and seen["tenants"] == [world["a"].pk]
    assert a.post(f"/api/telemetry/events/{event.pk}/acknowledge/").status_code == 403
    op = client_for(operator)
    assert (
        op.post(f"/api/telemetry/events/{event.pk}/acknowledge/").json()["status"] == "acknowledged"
    )
    assert op.post(f"/api/telemetry/events/{event.pk}/acknowledge/").status_code == 409
    assert op.post(f"/api/telemetry/events/{event.pk}/resolve/").json()["status"] == "resolved"
    actions = list(AuditEntry.objects.filter(object_id=str(event.pk),
                                             object_type__icontains="fabricevent")
                   .values_list("action", flat=True))  # fmt: skip
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
