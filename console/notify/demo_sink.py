"""Demo only: a webhook receiver the demo console serves itself, so a person trying the product
sees a notification delivered, signed and verified, without running a receiver of their own.

``manage.py up`` (on a seeded demo: tenant ``aurora`` exists) registers the webhook
``DEMO_WEBHOOK_NAME`` of that tenant, pointing at ``<the console>/demo/webhook-sink/``, and lets
exactly that URL past the private-address guard (``NOTIFY_DEMO_SINK_URL``; nothing else on
loopback is allowed). The receiver checks each POST the way the docs tell a real receiver to
(:mod:`.signing`: HMAC-SHA256 over ``"<timestamp>." + body`` with the webhook's secret, compared
in constant time, timestamps at most ``MAX_SKEW_S`` old) and only then records a
:class:`DemoSinkReceipt` and answers 204; a POST that does not verify answers 401 with the reason
(so the delivery log shows it) and is not stored: anyone can post here, and unsigned posts must
not push genuine receipts out of the ``KEEP`` kept. With no demo webhook the receiver answers 404:
outside the demo it is not there.
"""

from __future__ import annotations

import hmac
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction

from console.notify import services
from console.notify.models import DemoSinkReceipt, Webhook, all_event_types
from console.notify.signing import EVENT_ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, decrypt_secret, signature
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role, Tenant

DEMO_WEBHOOK_NAME = "demo receiver (built in)"
DEMO_SINK_TENANT = "aurora"
DEMO_SINK_PATH = "/demo/webhook-sink/"
MAX_SKEW_S = 300
KEEP = 200  # receipts kept (the newest)


def sink_webhook() -> Webhook | None:
    """The demo's webhook, when the demo registered one."""
    return Webhook.objects.filter(tenant__slug=DEMO_SINK_TENANT, name=DEMO_WEBHOOK_NAME).first()


def check(secret: str, headers: Mapping[str, str], body: bytes, now: float) -> str:
    """Why a POST does not verify ("" when it does)."""
    stamp, given = headers.get(TIMESTAMP_HEADER, ""), headers.get(SIGNATURE_HEADER, "")
    if not stamp.isdigit() or not given:
        return f"missing {TIMESTAMP_HEADER} or {SIGNATURE_HEADER}"
    if abs(now - int(stamp)) > MAX_SKEW_S:
        return f"timestamp {stamp} is more than {MAX_SKEW_S} s from now (a replay?)"
    if not hmac.compare_digest(signature(secret, int(stamp), body), given):
        return "signature does not match the webhook's secret"
    return ""


def receive(headers: Mapping[str, str], body: bytes) -> DemoSinkReceipt | str | None:
    """Verify one POST and record it: its receipt; why it does not verify (not recorded); or
    None when the demo has no webhook (the receiver is off)."""
    webhook = sink_webhook()
    if webhook is None:
        return None
    problem = check(decrypt_secret(webhook.secret_encrypted), headers, body, time.time())
    if problem:
        return problem
    try:
        payload: Any = json.loads(body)
    except ValueError:
        return "body is not JSON"
    event_type = str(payload.get("type", "")) if isinstance(payload, dict) else ""
    with transaction.atomic():
        receipt = DemoSinkReceipt.objects.create(
            event_id=headers.get(EVENT_ID_HEADER, "")[:64],
            event_type=event_type[:40],
            verified=True,
            problem="",
            payload=payload if isinstance(payload, dict) else None,
        )
        stale = DemoSinkReceipt.objects.order_by("-received_at", "-id").values_list("pk", flat=True)[KEEP:]
        DemoSinkReceipt.objects.filter(pk__in=list(stale)).delete()
    return receipt


def ensure_webhook(base_url: str) -> Webhook | None:
    """Register (or re-point) the demo webhook at ``base_url + DEMO_SINK_PATH`` when the demo is
    seeded; None otherwise. Lets that one URL past the private-address guard, in this process
    and (through the environment) in the processes ``up`` starts."""
    tenant = Tenant.objects.filter(slug=DEMO_SINK_TENANT).first()
    if tenant is None:
        return None
    url = base_url.rstrip("/") + DEMO_SINK_PATH
    allow_sink_url(url)
    actor, operator = Actor.system("demo-webhook"), Principal(None, Role.OPERATOR, None)
    webhook = sink_webhook()
    if webhook is None:
        webhook, _ = services.create_webhook(
            actor, operator, tenant=tenant, name=DEMO_WEBHOOK_NAME, url=url, events=all_event_types()
        )
    elif webhook.url != url or not webhook.is_active:
        webhook = services.update_webhook(actor, operator, webhook, url=url, is_active=True)
    return webhook


def allow_sink_url(url: str) -> None:
    """Let exactly ``url`` past :func:`.signing.check_url` here and in child processes."""
    settings.NOTIFY_DEMO_SINK_URL = url
    os.environ["NOTIFY_DEMO_SINK_URL"] = url


def send_test(webhook: Webhook) -> None:
    """A ``webhook.test`` event to the demo webhook, so the log shows a delivery at once."""
    services.send_test(Actor.system("demo-webhook"), Principal(None, Role.OPERATOR, None), webhook)
