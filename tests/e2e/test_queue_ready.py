"""The queue and the webhooks in the browser, made real on a lab fabric (OpenSM on ibsim).

Tenant A holds 240 of the lab pool's 256 GPUs. Tenant B's admin registers a webhook on the
Notifications page (a real HTTP server started here), then asks for 32 GPUs as soon as possible:
the page shows the request queued, first in line, with the estimated start the end of A's
reservation. A's admin releases hers on her own page; nothing else is done: the release publishes
a queue pass after commit, the Celery worker running in this process places B's request, pushes
its partition to the lab and verifies it, and B's page (which polls the API) shows it ready. The
receiver gets the ``reservation.placed`` and ``reservation.ready`` events, each signed with the
secret the page showed once; the signature and the payload's schema are checked here from what
docs/api.md says.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid

import pytest
from jsonschema import Draft202012Validator
from playwright.sync_api import expect

from console.fabric.lab.fabrics import start_lab, stop_lab
from console.tenancy.models import AuditEntry
from designer.services import create_design
from scheduling.models import Reservation
from scheduling.services import quotas
from tests.e2e.conftest import sign_in
from tests.e2e.test_reservations import ACTOR, FABRIC_WAIT_MS, ONE_SU, OPERATOR, card_named
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import whole_lab_pool, with_agent
from tests.notify.documented import documented_schemas, signature_ok
from tests.notify.receiver import Receiver

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.lab,
    requires_lab,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(420),
]

#: POST /api/reservations/ from the page, with its session and CSRF token, as the page's own script does.
RESERVE = """async (body) => {
  const token = document.cookie.match(/(?:^|;\\s*)csrftoken=([^;]+)/)[1];
  const response = await fetch("/api/reservations/", {
    method: "POST",
    credentials: "same-origin",
    headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": token},
    body: JSON.stringify(body),
  });
  return {status: response.status, body: await response.json()};
}"""


@pytest.fixture
def lab_pool(tmp_path, tenant_a, tenant_b, lab_console):
    """The lab of a 1-SU design (256 GPUs) pooled whole; A may hold all of it, B only borrows."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"e2e-queue-{uid}", options=ONE_SU)
    fabric, _ = start_lab(
        revision, name=f"e2e-queue-{uid}", actor=ACTOR, workdir=tmp_path / "lab", socket_name=f"q-{uid}"
    )
    try:
        with_agent(fabric, lab_console)
        pool = whole_lab_pool(fabric, ACTOR)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=256)
        # Borrowing only: B's request cannot reclaim A's guaranteed GPUs, it has to wait for them.
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_b, pool=pool, guaranteed_gpus=0, borrow_limit_gpus=64)
        yield pool
    finally:
        fabric.refresh_from_db()
        stop_lab(fabric)


@pytest.fixture
def receiver(settings):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True  # the receiver is on 127.0.0.1
    settings.NOTIFY_WEBHOOK_BACKOFF_S = 1
    r = Receiver().start()
    yield r
    r.stop()


def utc_minute(iso: str) -> str:
    """How the page writes a time: ``2026-12-02 14:30 UTC``."""
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M UTC")


def test_queued_request_becomes_ready_when_the_pool_frees_and_the_signed_event_arrives(
    page, browser, live_server, worker, lab_pool, receiver, admin_a, admin_b
):
    # given tenant A holding 240 of the 256 GPUs (through the API, from A's admin's browser)
    other = browser.new_context().new_page()
    sign_in(other, live_server.url, "admin-a")
    held = other.evaluate(RESERVE, {"pool": lab_pool.pk, "gpus": 240, "duration_minutes": 180, "name": "a-big"})
    assert held["status"] == 201, held
    a_end = held["body"]["end"]

    # and tenant B's admin registering a webhook on the Notifications page (every event)
    sign_in(page, live_server.url, "admin-b")
    page.goto(f"{live_server.url}/notifications/")
    page.get_by_label("Name").fill("ci-receiver")
    page.get_by_label("URL").fill(receiver.url)
    page.get_by_role("button", name="Register webhook").click()
    secret = page.get_by_test_id("new-webhook-secret").locator("code.secret").inner_text().strip()
    assert secret.startswith("whsec_")

    # when B asks for 32 GPUs as soon as possible (16 are free), in its reservation form
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    page.get_by_test_id("res-pool").select_option(str(lab_pool.pk))
    page.get_by_test_id("res-size").fill("32")
    page.get_by_test_id("res-duration").fill("1")
    page.get_by_test_id("res-name").fill("b-waits")
    page.get_by_test_id("res-when-asap").check()
    # the preview says it will queue, and the button says so
    expect(page.get_by_test_id("preview-state")).to_have_text("will queue")
    expect(page.get_by_test_id("res-submit")).to_have_text("Queue it")
    page.get_by_test_id("res-submit").click()
    expect(card_named(page, "b-waits")).to_be_visible()
    queued_row = Reservation.objects.get(name="b-waits")
    assert queued_row.status == "queued" and queued_row.tenant.slug == "tenant-b", queued_row.status
    queued_id = queued_row.pk
    page.reload()
    card = card_named(page, "b-waits")
    # then it is shown queued, first in line, to start when A's reservation ends
    expect(card.get_by_test_id("res-status")).to_have_text("queued")
    expect(card.get_by_test_id("res-queue")).to_contain_text("position 1")
    expect(card.get_by_test_id("res-queue")).to_contain_text(f"estimated start {utc_minute(a_end)}")
    # and it says why, in words: no room until then, first in the queue
    expect(card.get_by_test_id("res-reason")).to_contain_text("no room for 32 GPUs now: expected to start about")
    expect(card.get_by_test_id("res-reason")).to_contain_text("(first in the queue)")
    expect(card.get_by_test_id("res-pkey")).to_have_text("–")

    # when A's admin releases her reservation on her own page (once it is ready on the lab)
    other.goto(f"{live_server.url}/reservations/")
    big = card_named(other, "a-big")
    expect(big.get_by_test_id("res-status")).to_have_text("ready", timeout=FABRIC_WAIT_MS)
    big.get_by_test_id("res-release").click()
    other.get_by_test_id("confirm-act").click()
    expect(big.get_by_test_id("res-status")).to_have_text(re.compile("ending|released"))
    other.context.close()

    # then, with no one touching it, B's page shows the request placed and then ready
    expect(card.get_by_test_id("res-status")).to_have_text("ready", timeout=FABRIC_WAIT_MS)
    expect(card.get_by_test_id("res-pkey")).to_have_text(re.compile(r"^0x[0-9a-f]{4}$"))
    expect(card.get_by_test_id("res-queue")).to_have_count(0)
    expect(card.get_by_test_id("res-reason")).to_have_count(0)  # it waits no more
    placed_row = Reservation.objects.get(pk=queued_id)
    assert placed_row.status == Reservation.Status.READY and placed_row.gpus == 32
    # placed by the queue pass the worker ran, not by this test
    entry = AuditEntry.objects.get(action="reservation.place", object_id=str(queued_id))
    assert entry.actor_label == "task:scheduling.queue_pass"

    # and the receiver got the placed and the ready events, signed with the secret shown once
    schemas = documented_schemas()
    bodies = {}
    for event_type in ("reservation.placed", "reservation.ready"):
        got = receiver.wait_until(lambda r, t=event_type: r.headers.get("x-ibconsole-event-type") == t, timeout=60)
        assert signature_ok(secret, got.headers, got.body), event_type
        assert not signature_ok("whsec_not-the-secret-at-all", got.headers, got.body)
        body = json.loads(got.body)
        checker = Draft202012Validator(schemas[event_type], format_checker=Draft202012Validator.FORMAT_CHECKER)
        assert [e.message for e in checker.iter_errors(body)] == [], event_type
        assert got.headers["x-ibconsole-event-id"] == body["id"]
        assert body["data"]["reservation"]["id"] == queued_id and body["tenant"]["slug"] == "tenant-b"
        bodies[event_type] = body
    nodes = sorted(set(placed_row.allocations.values_list("node__name", flat=True)))
    assert sorted(bodies["reservation.ready"]["data"]["reservation"]["nodes"]) == nodes
    assert bodies["reservation.ready"]["data"]["reservation"]["status"] == "ready"
    assert bodies["reservation.placed"]["data"]["waited_s"] >= 0
    # nothing about A's reservation reached B's webhook
    assert all(json.loads(r.body)["data"]["reservation"]["id"] == queued_id for r in receiver.received)
