"""Demo only: the demo's built-in webhook receiver (/demo/webhook-sink/). ``manage.py up`` on a
seeded demo registers the demo tenant's webhook at it; a delivery through the real Celery worker
reaches it signed, it verifies the signature (a forged or stale one is refused, and the delivery
log would show the 401), and operators read what it got. The private-address guard lets exactly
that URL through, nothing else on loopback."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
import requests

from console.notify import demo_sink
from console.notify.models import DemoSinkReceipt, Webhook
from console.notify.signing import check_url, decrypt_secret
from console.tenancy.errors import Invalid
from console.tenancy.models import AuditEntry, Tenant
from tests.notify.test_delivery import settled

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]


@pytest.fixture
def demo(settings, monkeypatch):
    """A seeded demo's tenant, the guard as the demo runs it (private URLs refused)."""
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    settings.NOTIFY_DEMO_SINK_URL = ""  # restored after the test (ensure_webhook sets it)
    monkeypatch.setenv("NOTIFY_DEMO_SINK_URL", "")
    return Tenant.objects.create(name="Aurora Labs", slug=demo_sink.DEMO_SINK_TENANT)


def webhook_secret(webhook: Webhook) -> str:
    """The secret the console signs with (what a real receiver is configured with)."""
    return decrypt_secret(webhook.secret_encrypted)


def signed(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {"X-IBConsole-Timestamp": str(timestamp), "X-IBConsole-Signature": f"sha256={mac}"}


def test_the_demo_webhook_delivers_a_signed_event_the_sink_verifies(demo, worker, live_server):
    # given `up` registering the demo webhook at its own receiver
    webhook = demo_sink.ensure_webhook(live_server.url)
    assert webhook is not None and webhook.tenant_id == demo.pk
    assert webhook.url == f"{live_server.url}/demo/webhook-sink/"
    assert AuditEntry.objects.filter(action="webhook.create", object_id=str(webhook.pk)).exists()
    # when a test event is sent through the real worker
    demo_sink.send_test(webhook)
    delivery = settled({"webhook": webhook})
    # then it succeeded with the sink's 204, and the sink recorded it as verified
    assert delivery.status == "succeeded", list(delivery.attempt_log.values("http_status", "error"))
    assert [a.http_status for a in delivery.attempt_log.all()] == [204]
    (receipt,) = DemoSinkReceipt.objects.all()
    assert receipt.verified and receipt.problem == ""
    assert receipt.event_id == str(delivery.event_id) and receipt.event_type == "webhook.test"
    assert receipt.payload == delivery.event.payload


def test_a_forged_or_stale_signature_is_refused_and_never_evicts_a_genuine_receipt(demo, live_server):
    webhook = demo_sink.ensure_webhook(live_server.url)
    assert webhook is not None
    body = json.dumps({"id": "e1", "type": "reservation.ready"}).encode()
    url = webhook.url
    genuine = requests.post(url, data=body, headers=signed(webhook_secret(webhook), body, int(time.time())), timeout=10)
    assert genuine.status_code == 204
    forged = requests.post(url, data=body, headers=signed("not-the-secret-000", body, int(time.time())), timeout=10)
    stale = requests.post(url, data=body, headers=signed("x", body, int(time.time()) - 3600), timeout=10)
    unsigned = requests.post(url, data=body, timeout=10)
    assert (forged.status_code, stale.status_code, unsigned.status_code) == (401, 401, 401)
    assert "does not match" in forged.text and "replay" in stale.text and "missing" in unsigned.text
    # anyone can post here: more unsigned posts than the sink keeps receipts push nothing out
    with requests.Session() as session:
        for _ in range(demo_sink.KEEP + 5):
            assert session.post(url, data=body, timeout=10).status_code == 401
    assert list(DemoSinkReceipt.objects.values_list("verified", flat=True)) == [True]


def test_the_guard_lets_exactly_the_sink_url_through_and_re_points_it(demo, live_server):
    webhook = demo_sink.ensure_webhook(live_server.url)
    assert webhook is not None
    check_url(webhook.url)  # no exception
    for other in (f"{live_server.url}/demo/webhook-sink/x", "http://127.0.0.1:1/", f"{live_server.url}/"):
        with pytest.raises(Invalid):
            check_url(other)
    # another start on another port re-points the same webhook (audited), never a second one
    moved = demo_sink.ensure_webhook("http://127.0.0.1:8123")
    assert moved is not None and moved.pk == webhook.pk and moved.url == "http://127.0.0.1:8123/demo/webhook-sink/"
    assert Webhook.objects.count() == 1
    assert AuditEntry.objects.filter(action="webhook.update", object_id=str(webhook.pk)).exists()


def test_off_without_the_demo_and_only_readers_see_the_page(db, client, operator, admin_a, settings):
    settings.NOTIFY_DEMO_SINK_URL = ""
    assert demo_sink.ensure_webhook("http://127.0.0.1:8000") is None  # no demo tenant: nothing registered
    assert client.post("/demo/webhook-sink/", b"{}", content_type="application/json").status_code == 404
    assert not DemoSinkReceipt.objects.exists()
    client.force_login(admin_a)
    assert client.get("/demo/webhook-sink/").status_code == 404
    client.force_login(operator)
    page = client.get("/demo/webhook-sink/")
    assert page.status_code == 200 and b'data-testid="demo-sink-off"' in page.content
