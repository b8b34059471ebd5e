"""The auditor reads every page and list an operator reads, and writes nothing.

Every URL pattern of the project is filled the way the leak scan fills it (tests/isolation.py) and
requested as an operator and as an auditor: wherever the operator gets 200, so does the auditor,
and the auditor's page carries no form that posts anything but their own session, password and
API tokens. Every write the pages offer an operator answers the auditor 403 and changes nothing.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from console.fabric.models import ChangeRequest, DiscoveryJob
from console.telemetry.models import ValidationRun
from console.tenancy.models import Tenant
from scheduling.models import Node, Quota, Reservation
from tests.isolation import fill_route, url_routes
from tests.live.fabric_fixtures import world  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

#: Mutations and endpoints outside the comparison (logout ends the session the walk runs in).
SKIPPED = {"logout", "token-revoke", "webhook-test", "webhook-delete", "docs", "schema", "login"}
#: Forms an auditor keeps: their own session, password and API tokens (the notifications page's
#: form for an auditor is none: read-only roles see their e-mail preferences as text).
OWN_PAGES = {"/tokens/", "/account/password/"}
OWN_FORMS = re.compile(r"/logout/|/tokens/\d+/revoke/")
POST_FORM = re.compile(r"<form\b[^>]*method=\"post\"[^>]*>", re.IGNORECASE)


@pytest.fixture
def params(world, settings):  # noqa: F811
    fabric = world["fabric"]
    # no worker runs discoveries here: the fabric page shows its queued job at once (both roles)
    settings.FABRIC_COMPARE_WAIT_S = 0
    ids = {world["res_a"].pk, world["res_b"].pk, world["a"].pk, fabric.pk, fabric.revision.design_id}
    ids |= set(Quota.objects.values_list("pk", flat=True)) | set(fabric.pools.values_list("pk", flat=True))
    leaves = sorted({name for name in world["collector"].lm.ends for name in [name.split("/")[0]]})[:1]
    return {
        "pk": sorted(str(i) for i in ids),
        "fabric_id": [str(fabric.pk)],
        "fabric_pk": [str(fabric.pk)],
        "design_id": [str(fabric.revision.design_id)],
        "revision": [str(fabric.revision.number)],
        "number": [str(fabric.revision.number)],
        "other": [str(fabric.revision.number)],
        "fmt": ["json", "csv"],
        "change_id": [str(i) for i in ChangeRequest.objects.values_list("pk", flat=True)] or ["1"],
        "switch": leaves,
        "link_id": sorted(world["collector"].lm.ends)[:1],
        "fabric": [fabric.name],
        "pkey": [f"{r.pkey:#x}" for r in (world["res_a"], world["res_b"]) if r.pkey],
        "guids": ["0002c90300000101"],
        "rest": ["resources/links"],
        "agent_pk": ["1"],
        "job_id": [str(DiscoveryJob.objects.create(fabric=fabric, state=DiscoveryJob.State.DONE).pk)],
        "run_id": [str(ValidationRun.objects.create(fabric=fabric, state=ValidationRun.State.DONE).pk)],
        "node_id": [
            str(pk) for pk in Node.objects.filter(fabric=fabric).order_by("pk").values_list("pk", flat=True)[:1]
        ],
    }


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_auditor_gets_every_page_and_list_the_operator_gets(params, operator, auditor):
    as_operator, as_auditor = _client(operator), _client(auditor)
    compared, refused, writable, exports = 0, [], [], []
    for route, name in url_routes():
        if name in SKIPPED:
            continue
        for url in fill_route(route, params):
            seen = as_operator.get(url, HTTP_ACCEPT="text/html")
            if seen.status_code != 200:
                continue
            got = as_auditor.get(url, HTTP_ACCEPT="text/html")
            compared += 1
            if got.status_code != 200:
                refused.append(f"{url} → {got.status_code}")
                continue
            if url in OWN_PAGES or got.streaming or "html" not in got.get("Content-Type", ""):
                continue
            if "_export=csv" in got.content.decode():  # a table: the auditor exports what it reads
                exported = as_auditor.get(f"{url}{'&' if '?' in url else '?'}_export=csv")
                assert exported.status_code == 200 and exported["Content-Type"].startswith("text/csv"), url
                exports.append(url)
            for form in POST_FORM.findall(got.content.decode()):
                if not OWN_FORMS.search(form):
                    writable.append(f"{url}: {form}")
    assert compared > 40  # the walk reached the project's pages and API lists
    assert {"/audit/", "/tenants/", "/reservations/all/"} <= set(exports), exports
    assert not refused, "the auditor cannot read:\n" + "\n".join(refused)
    assert not writable, "the auditor's pages offer writes:\n" + "\n".join(writable)


def test_the_reservation_pages_show_the_auditor_every_tenant_and_no_reserve_form(world, auditor):  # noqa: F811
    client = _client(auditor)
    page = client.get("/reservations/").content.decode()
    assert 'href="/reservations/"' in page  # in the navigation
    assert 'id="reserve-form"' not in page
    listing = client.get("/reservations/all/").content.decode()
    assert world["a"].name in listing and world["b"].name in listing
    quotas = client.get("/reservations/quotas/").content.decode()
    assert world["a"].name in quotas and 'data-testid="quota-save"' not in quotas


def test_every_write_an_operator_page_offers_is_403_for_the_auditor(world, auditor):  # noqa: F811
    client = _client(auditor)
    fabric, pool = world["fabric"], world["fabric"].pools.first()
    quota = Quota.objects.get(tenant=world["a"], pool=pool)
    writes = [
        ("/reservations/quotas/", {"tenant": world["a"].pk, "pool": pool.pk, "guaranteed_gpus": 1}),
        ("/tenants/", {"name": "Sneaky", "slug": "sneaky"}),
        (f"/fabrics/{fabric.pk}/", {}),
        ("/designer/import/", {"name": "x", "dump_text": "x"}),
        ("/logins/locked/unlock/", {"kind": "username", "value": "op"}),
    ]
    for url, body in writes:
        assert client.post(url, body).status_code == 403, url
    api = [
        ("/api/reservations/", {"pool": pool.pk, "nodes": 1, "duration_minutes": 60}),
        (f"/api/reservations/{world['res_a'].pk}/release/", {}),
        (f"/api/reservations/{world['res_a'].pk}/cancel/", {}),
        ("/api/quotas/", {"tenant": world["a"].pk, "pool": pool.pk, "guaranteed_gpus": 1}),
    ]
    for url, body in api:
        assert client.post(url, body, content_type="application/json").status_code == 403, url
    assert Quota.objects.get(pk=quota.pk).guaranteed_gpus == quota.guaranteed_gpus
    assert not Tenant.objects.filter(slug="sneaky").exists()
    assert Reservation.objects.get(pk=world["res_a"].pk).status == world["res_a"].status
