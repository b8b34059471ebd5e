"""Webhooks connect to the address the SSRF guard checked (issue 33, item 7): the name was resolved
to check it and again to connect, so a DNS answer that changed in between (rebinding) reached an
internal address. And a delivery never stays ``pending`` without an attempt row: a secret that
cannot be read or a URL urllib cannot send is an attempt with its error.

The "internet" here: two real receivers on loopback addresses, 127.0.0.2 playing a public host
and 127.0.0.1 the internal one, and a resolver that answers the first before the second."""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket

import pytest
from django.utils import timezone

from console.notify import delivery, signing, tasks
from console.notify.models import Delivery, DeliveryAttempt, Event
from tests.notify.conftest import add_webhook
from tests.notify.receiver import Receiver

pytestmark = pytest.mark.django_db
PAYLOAD = {"id": "00000000-0000-0000-0000-000000000001", "type": "reservation.ready", "data": {}}


@pytest.fixture
def rebinding(settings, monkeypatch):
    """``rebind.test`` resolves to 127.0.0.2 ("public") first and to 127.0.0.1 (internal) after."""
    settings.NOTIFY_ALLOW_PRIVATE_URLS = False
    outside = Receiver().start("127.0.0.2")
    inside = Receiver().start("127.0.0.1", outside.server.server_address[1])  # the same port, internal
    real = socket.getaddrinfo
    answers = {"count": 0}

    def resolver(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        answers["count"] += 1
        address = "127.0.0.2" if answers["count"] == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    monkeypatch.setattr(signing, "public", lambda address: address == ipaddress.ip_address("127.0.0.2"))
    yield outside, inside, answers
    outside.stop()
    inside.stop()


def test_the_post_goes_to_the_address_that_was_checked(rebinding):
    outside, inside, answers = rebinding
    port = outside.server.server_address[1]
    url = f"http://rebind.test:{port}/hook"
    outcome = delivery.post(url, "s3cret-s3cret-s3cret", PAYLOAD, timeout=5)
    assert outcome.ok, outcome
    assert answers["count"] == 1  # resolved once, for the check; never again to connect
    (got,) = outside.wait_for(1)
    assert got.headers["host"] == f"rebind.test:{port}"  # the URL's host, as sent to a public host
    assert inside.received == []


def test_a_check_that_refuses_leaves_nothing_sent(rebinding, monkeypatch):
    outside, inside, _ = rebinding
    monkeypatch.setattr(signing, "public", lambda address: False)
    outcome = delivery.post(f"http://rebind.test:{outside.server.server_address[1]}/hook", "s", PAYLOAD, timeout=5)
    assert not outcome.ok and "is not a public address" in outcome.error
    assert outside.received == inside.received == []


@pytest.fixture
def event(tenant_a):
    return Event.objects.create(tenant=tenant_a, type="reservation.ready", payload=PAYLOAD)


def test_a_secret_that_cannot_be_read_is_an_attempt(tenant_a, event, receiver, settings):
    webhook = add_webhook(tenant_a, receiver.url)
    webhook.secret_encrypted = "not-a-fernet-token"
    webhook.save(update_fields=["secret_encrypted"])
    row = Delivery.objects.create(webhook=webhook, event=event)
    settings.NOTIFY_WEBHOOK_MAX_ATTEMPTS = 1
    assert delivery.attempt(row.pk) is None
    row.refresh_from_db()
    assert row.status == Delivery.Status.FAILED and row.attempts == 1
    (attempt,) = DeliveryAttempt.objects.filter(delivery=row)
    assert "secret cannot be read" in attempt.error and receiver.received == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:8/ho\nok", "http://user@127.0.0.1:9/hook"])
def test_a_url_urllib_cannot_send_is_an_attempt_with_its_error(tenant_a, event, receiver, url):
    webhook = add_webhook(tenant_a, receiver.url)
    type(webhook).objects.filter(pk=webhook.pk).update(url=url)  # as stored before the guard knew
    row = Delivery.objects.create(webhook=webhook, event=event)
    retry = delivery.attempt(row.pk)
    row.refresh_from_db()
    assert row.status != Delivery.Status.PENDING and row.attempts == 1 and retry is not None
    assert DeliveryAttempt.objects.get(delivery=row).error


def test_a_delivery_whose_message_was_lost_is_sent_again(tenant_a, event, receiver, monkeypatch):
    webhook = add_webhook(tenant_a, receiver.url)
    lost = Delivery.objects.create(webhook=webhook, event=event)
    Delivery.objects.filter(pk=lost.pk).update(created_at=timezone.now() - dt.timedelta(seconds=delivery.OVERDUE_S + 5))
    fresh = Delivery.objects.create(webhook=add_webhook(tenant_a, receiver.url + "?2"), event=event)
    sent: list[int] = []
    monkeypatch.setattr(tasks.deliver_task, "delay", sent.append)
    assert tasks.redeliver_task() == 1 and sent == [lost.pk]  # the fresh one's message is still on its way
    assert fresh.pk not in delivery.overdue()
