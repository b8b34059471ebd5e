"""Deliveries through a real Celery worker to a real HTTP receiver: the signed ``ready`` event
(signature verified here, independently), retry with backoff after a 500 (both attempts logged),
the test button, e-mail through Django's backend, and nothing for another tenant's webhook."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from django.core import mail

from console.fabric import hooks
from console.notify.models import Delivery
from scheduling.services import reservations
from tests.notify.conftest import add_webhook
from tests.scheduling.conftest import SYSTEM, give_quota, request_for, tenant_principal

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
SECRET = "s3cret-s3cret-s3cret"


def settled(delivery_filter: dict, timeout: float = 30.0) -> Delivery:
    """Poll until the delivery has finished (succeeded or failed) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = Delivery.objects.filter(**delivery_filter).first()
        if row is not None and row.status in (Delivery.Status.SUCCEEDED, Delivery.Status.FAILED):
            return row
        time.sleep(0.1)
    raise AssertionError(f"delivery {delivery_filter} did not finish in {timeout} s")


def verify(received, secret: str) -> dict:
    """What a receiver does: recompute the HMAC over "<timestamp>." + raw body, compare."""
    timestamp = received.headers["x-ibconsole-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["x-ibconsole-signature"], f"sha256={expected}")
    assert abs(time.time() - int(timestamp)) < 60
    return json.loads(received.body)


def test_ready_reaches_the_receiver_signed_and_not_the_other_tenant(
    worker, receiver, pool, tenant_a, tenant_b, make_user
):
    from console.tenancy.models import Role

    owner = make_user("owner-a", Role.TENANT_MEMBER, tenant_a)
    owner.email = "owner-a@example.org"
    owner.save()
    other = add_webhook(tenant_b, receiver.url.replace("/hook", "/other"), secret="other-other-other-1")
    mine = add_webhook(tenant_a, receiver.url, events=["reservation.ready"], secret=SECRET)
    give_quota(tenant_a, pool, 64)
    reservation = reservations.reserve(SYSTEM, tenant_principal(tenant_a), request_for(pool, gpus=16))
    reservation.created_by = owner
    reservation.save(update_fields=["created_by"])
    hooks.notify_verified(pool.fabric_id, present_pkeys={reservation.pkey}, change_id=1)

    (got,) = receiver.wait_for(1)
    assert got.path == "/hook"
    body = verify(got, SECRET)
    assert body["type"] == "reservation.ready" and body["data"]["reservation"]["id"] == reservation.pk
    assert got.headers["x-ibconsole-event-id"] == body["id"]
    with pytest.raises(AssertionError):  # a wrong secret does not verify
        verify(got, "not-the-secret-0000")
    delivery = settled({"webhook": mine})
    assert delivery.status == "succeeded" and delivery.attempts == 1
    (attempt,) = delivery.attempt_log.all()
    assert attempt.http_status == 200 and attempt.ok and attempt.next_retry_at is None
    assert not Delivery.objects.filter(webhook=other).exists()
    # the owner's e-mail (default on), through the worker and Django's backend
    deadline = time.monotonic() + 30
    while not mail.outbox and time.monotonic() < deadline:
        time.sleep(0.1)
    (message,) = mail.outbox
    assert message.to == ["owner-a@example.org"] and "is ready" in message.subject
    assert "UTC" in message.body


def test_a_500_is_retried_with_backoff_then_succeeds(worker, receiver, tenant_a, client_for, admin_a):
    receiver.answers = [500]
    webhook = add_webhook(tenant_a, receiver.url, secret=SECRET)
    # the test button, through the API
    response = client_for(admin_a).post(f"/api/webhooks/{webhook.pk}/test/")
    assert response.status_code == 202, response.content
    first, second = receiver.wait_for(2)
    assert verify(first, SECRET)["id"] == verify(second, SECRET)["id"]  # same event id: idempotent
    assert int(second.headers["x-ibconsole-timestamp"]) >= int(first.headers["x-ibconsole-timestamp"])
    delivery = settled({"webhook": webhook})
    assert delivery.status == "succeeded" and delivery.attempts == 2
    one, two = delivery.attempt_log.all()
    assert (one.number, one.http_status, one.ok, two.number, two.http_status, two.ok) == (1, 500, False, 2, 200, True)
    # the backoff: 1 s (NOTIFY_WEBHOOK_BACKOFF_S in these tests) after the first attempt
    assert (one.next_retry_at - one.started_at).total_seconds() == 1
    assert two.started_at >= one.next_retry_at
    log = client_for(admin_a).get(f"/api/webhooks/{webhook.pk}/deliveries/").json()["results"]
    assert [a["http_status"] for a in log[0]["attempt_log"]] == [500, 200]
    assert log[0]["payload"]["type"] == "webhook.test"


def test_attempts_stop_at_the_maximum(worker, receiver, tenant_a, settings):
    settings.NOTIFY_WEBHOOK_MAX_ATTEMPTS = 2
    receiver.answers = [503, 503, 503]
    webhook = add_webhook(tenant_a, receiver.url, secret=SECRET)
    from console.notify import services
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role

    services.send_test(Actor.system("tests"), Principal(None, Role.TENANT_ADMIN, tenant_a.pk), webhook)
    delivery = settled({"webhook": webhook})
    assert delivery.status == "failed" and delivery.attempts == 2
    assert [a.http_status for a in delivery.attempt_log.all()] == [503, 503]
    assert delivery.attempt_log.last().next_retry_at is None
