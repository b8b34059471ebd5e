"""The Notifications page: a tenant admin registers a webhook (secret shown once), sends a test
event and sees the delivery; members only set their e-mail; another tenant's webhook is 404 and
auditors cannot write."""

from __future__ import annotations

import pytest
from django.test import Client

from console.notify.models import Delivery, Preference, Webhook
from tests.notify.conftest import add_webhook

pytestmark = pytest.mark.django_db


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_admin_registers_tests_and_sees_the_delivery(admin_a, tenant_a):
    page = browser(admin_a)
    form = {"form": "webhook", "name": "ci", "url": "https://127.0.0.1:9/hook", "events": ["reservation.ready"]}
    response = page.post("/notifications/", form)
    assert response.status_code == 200
    webhook = Webhook.objects.get(tenant=tenant_a)
    html = response.content.decode()
    assert 'data-testid="new-webhook-secret"' in html and "whsec_" in html
    again = page.get("/notifications/").content.decode()
    assert "whsec_" not in again and "https://127.0.0.1:9/hook" in again
    # the form names the events in words (the codes stay the checkbox values the API uses)
    assert "placed from the queue" in again and 'value="reservation.placed"' in again
    assert "> reservation.placed</label>" not in again
    assert page.post(f"/notifications/webhooks/{webhook.pk}/test/").status_code == 302
    assert Delivery.objects.filter(webhook=webhook, event__type="webhook.test").count() == 1
    assert "webhook.test" in page.get("/notifications/").content.decode()


def test_members_set_email_only_and_others_webhooks_are_404(member_a, admin_b, auditor, tenant_b):
    theirs = add_webhook(tenant_b, "http://127.0.0.1:9/b")
    page = browser(member_a)
    html = page.get("/notifications/").content.decode()
    assert 'data-testid="webhooks"' not in html and "127.0.0.1:9/b" not in html
    assert page.post("/notifications/", {"form": "preferences", "email_tenant": "on"}).status_code == 302
    pref = Preference.objects.get(user=member_a)
    assert (pref.email_own, pref.email_tenant) == (False, True)  # unchecked boxes are off
    assert page.post(f"/notifications/webhooks/{theirs.pk}/test/").status_code == 404
    assert browser(admin_b).get("/notifications/").status_code == 200
    reader = browser(auditor)
    assert "127.0.0.1:9/b" in reader.get("/notifications/").content.decode()
    assert reader.post(f"/notifications/webhooks/{theirs.pk}/delete/").status_code == 403
    assert Webhook.objects.filter(pk=theirs.pk).exists()
