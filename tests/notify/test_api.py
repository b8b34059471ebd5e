"""The webhooks API: isolation (another tenant's webhooks answer 404), the secret shown once and
never returned, who may read and write, audited mutations, the URL guard, e-mail preferences."""

from __future__ import annotations

import pytest

from console.notify.api import views
from console.notify.models import Webhook
from console.notify.signing import decrypt_secret
from console.tenancy.models import AuditEntry
from tests.isolation import IsolationSuite
from tests.notify.conftest import add_webhook

pytestmark = pytest.mark.django_db


class TestWebhookIsolation(IsolationSuite):
    viewset = views.WebhookViewSet
    basename = "webhook"
    custom_actions = [("get", "deliveries"), ("post", "test")]

    def make_object(self, tenant, user):
        return add_webhook(tenant, "http://127.0.0.1:9/hook")

    def create_payload(self, other_tenant):
        return {"name": "planted", "url": "http://127.0.0.1:9/x", "tenant": other_tenant.pk}


def test_secret_is_returned_once_and_never_again(client_for, admin_a):
    client = client_for(admin_a)
    created = client.post("/api/webhooks/", {"name": "ci", "url": "https://127.0.0.1:8443/hook"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["secret"]
    assert secret.startswith("whsec_") and body["events"] and "webhook.test" not in body["events"]
    webhook = Webhook.objects.get(pk=body["id"])
    assert secret not in webhook.secret_encrypted and decrypt_secret(webhook.secret_encrypted) == secret
    for response in (client.get(f"/api/webhooks/{webhook.pk}/"), client.get("/api/webhooks/")):
        assert secret not in response.content.decode() and "secret" not in response.content.decode()
    # rotating is write-only too, and audited without the secret
    rotated = client.patch(f"/api/webhooks/{webhook.pk}/", {"secret": "a-new-secret-of-16+"}, format="json")
    assert rotated.status_code == 200 and "secret" not in rotated.json()
    webhook.refresh_from_db()
    assert decrypt_secret(webhook.secret_encrypted) == "a-new-secret-of-16+"
    entries = AuditEntry.objects.filter(object_type="notify.webhook").order_by("pk")
    assert [e.action for e in entries] == ["webhook.create", "webhook.update"]
    assert entries[1].after["secret_rotated"] is True
    for entry in entries:
        assert secret not in str(entry.after) and "secret_encrypted" not in (entry.after or {})
    assert client.delete(f"/api/webhooks/{webhook.pk}/").status_code == 204
    assert AuditEntry.objects.filter(action="webhook.delete", object_id=str(webhook.pk)).exists()


def test_members_neither_read_nor_write_auditors_read(client_for, member_a, admin_a, auditor, tenant_a):
    webhook = add_webhook(tenant_a, "http://127.0.0.1:9/hook")
    member = client_for(member_a)
    assert member.get("/api/webhooks/").status_code == 403
    assert member.post("/api/webhooks/", {"name": "x", "url": "http://127.0.0.1:9/"}, format="json").status_code == 403
    reader = client_for(auditor)
    assert reader.get(f"/api/webhooks/{webhook.pk}/").status_code == 200
    assert reader.post(f"/api/webhooks/{webhook.pk}/test/").status_code == 403


@pytest.mark.parametrize(
    "url", ["ftp://example.org/hook", "file:///etc/passwd", "gopher://127.0.0.1/", "javascript:alert(1)"]
)
def test_only_http_and_https(client_for, admin_a, url):
    response = client_for(admin_a).post("/api/webhooks/", {"name": "x", "url": url}, format="json")
    assert response.status_code == 400 and "url" in response.json()["fields"]


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/", "http://10.1.2.3/", "http://169.254.169.254/latest/"])
def test_private_addresses_are_refused_unless_allowed(client_for, admin_a, settings, url):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    response = client_for(admin_a).post("/api/webhooks/", {"name": "x", "url": url}, format="json")
    assert response.status_code == 400 and "url" in response.json()["fields"]
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True
    assert client_for(admin_a).post("/api/webhooks/", {"name": "x", "url": url}, format="json").status_code == 201


@pytest.mark.parametrize(
    "url",
    [
        "http://[::a9fe:a9fe]/",  # IPv4-compatible form of the metadata address
        "http://[::169.254.169.254]/",
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[64:ff9b::a9fe:a9fe]/latest/",  # NAT64 of the metadata address
        "http://[2002:a9fe:a9fe::1]/",  # 6to4 of it
        "http://[2002:7f00:1::1]:8080/",  # 6to4 of loopback
        "http://[fec0::1]/",  # site-local
        "http://[ff02::1]/",  # multicast
        "http://224.0.0.1/",
        "http://240.0.0.1/",  # reserved
    ],
)
def test_addresses_that_lead_inside_in_every_spelling_are_refused(client_for, admin_a, settings, url):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    response = client_for(admin_a).post("/api/webhooks/", {"name": "x", "url": url}, format="json")
    assert response.status_code == 400 and "url" in response.json()["fields"], response.content


def test_a_bad_port_or_a_user_part_is_a_400_naming_the_url_and_errors_tell_no_resolution(client_for, admin_a, settings):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    api = client_for(admin_a)
    for url in ("https://example.org:99999/hook", "https://user:pw@example.org/hook", "https://user@example.org/"):
        response = api.post("/api/webhooks/", {"name": "x", "url": url}, format="json")
        assert response.status_code == 400 and "url" in response.json()["fields"], (url, response.content)
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True
    made = api.post("/api/webhooks/", {"name": "x", "url": "http://127.0.0.1:9/"}, format="json").json()
    patched = api.patch(f"/api/webhooks/{made['id']}/", {"url": "http://127.0.0.1:70000/"}, format="json")
    assert patched.status_code == 400 and "url" in patched.json()["fields"]
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    refused = api.post("/api/webhooks/", {"name": "y", "url": "http://localhost:9/"}, format="json")
    assert (
        refused.status_code == 400
        and "127.0.0.1" not in refused.content.decode()
        and "::1" not in refused.content.decode()
    )


def test_unknown_events_are_refused(client_for, admin_a):
    body = {"name": "x", "url": "http://127.0.0.1:9/", "events": ["reservation.exploded"]}
    assert client_for(admin_a).post("/api/webhooks/", body, format="json").status_code == 400


def test_email_preferences_are_per_user(client_for, member_a):
    client = client_for(member_a)
    assert client.get("/api/me/notifications/").json() == {"email_own": True, "email_tenant": False}
    assert client.patch("/api/me/notifications/", {"email_tenant": True}, format="json").status_code == 200
    assert client.get("/api/me/notifications/").json() == {"email_own": True, "email_tenant": True}
    assert AuditEntry.objects.filter(action="notify.preference.update").count() == 1
