"""One webhook POST and its record: signed body, timeout, no redirects, an attempt row each time.

urllib (stdlib) rather than a new HTTP client: one POST with a timeout needs nothing more, and
refusing redirects is one handler.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.notify.models import Delivery, DeliveryAttempt
from console.notify.signing import (
    EVENT_ID_HEADER,
    EVENT_TYPE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    check_url,
    decrypt_secret,
    signature,
)
from console.tenancy.errors import Invalid


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is an answer, not an invitation to POST elsewhere


_opener = urllib.request.build_opener(_NoRedirect)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    http_status: int | None
    error: str
    duration_ms: int


def body_of(payload: dict[str, object]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def post(url: str, secret: str, payload: dict[str, object], *, timeout: float) -> Outcome:
    """POST the signed payload; 2xx is success, anything else (or no answer in time) is not."""
    body = body_of(payload)
    timestamp = int(time.time())
    request = urllib.request.Request(url, data=body, method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("User-Agent", "ibconsole-webhooks/1")
    request.add_header(TIMESTAMP_HEADER, str(timestamp))
    request.add_header(SIGNATURE_HEADER, signature(secret, timestamp, body))
    request.add_header(EVENT_ID_HEADER, str(payload["id"]))
    request.add_header(EVENT_TYPE_HEADER, str(payload["type"]))
    started = time.monotonic()
    status, error = None, ""
    try:
        check_url(url)
        with _opener.open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"HTTP {exc.code}"
    except Invalid as exc:
        error = str(exc)
    except OSError as exc:  # refused, reset, timed out, name not found
        error = f"{type(exc).__name__}: {exc}"
    duration = round((time.monotonic() - started) * 1000)
    ok = status is not None and 200 <= status < 300
    return Outcome(ok=ok, http_status=status, error="" if ok else error[:300], duration_ms=duration)


def backoff_s(attempt: int) -> int:
    """Seconds before retry number ``attempt`` (1-based): Celery's own ``retry_backoff`` formula,
    ``factor * 2**(attempt-1)`` capped, without jitter so the log can say when."""
    return int(
        get_exponential_backoff_interval(
            settings.NOTIFY_WEBHOOK_BACKOFF_S, attempt - 1, settings.NOTIFY_WEBHOOK_BACKOFF_MAX_S, full_jitter=False
        )
    )


def attempt(delivery_id: int) -> int | None:
    """Make the next attempt of a delivery and log it. Returns the seconds until the next retry,
    or ``None`` when the delivery is done (succeeded, failed for good, or already finished)."""
    delivery = Delivery.objects.select_related("webhook", "event").get(pk=delivery_id)
    if delivery.status in (Delivery.Status.SUCCEEDED, Delivery.Status.FAILED):
        return None  # a redelivered message: already finished
    webhook = delivery.webhook
    started = timezone.now()
    outcome = post(
        webhook.url,
        decrypt_secret(webhook.secret_encrypted),
        delivery.event.payload,
        timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S,
    )
    number = delivery.attempts + 1
    retry_in = None
    if not outcome.ok and number < settings.NOTIFY_WEBHOOK_MAX_ATTEMPTS:
        retry_in = backoff_s(number)
    next_at = started + dt.timedelta(seconds=retry_in) if retry_in is not None else None
    with transaction.atomic():
        DeliveryAttempt.objects.create(
            delivery=delivery,
            number=number,
            started_at=started,
            duration_ms=outcome.duration_ms,
            http_status=outcome.http_status,
            error=outcome.error,
            ok=outcome.ok,
            next_retry_at=next_at,
        )
        delivery.attempts = number
        delivery.next_retry_at = next_at
        if outcome.ok:
            delivery.status = Delivery.Status.SUCCEEDED
        elif retry_in is None:
            delivery.status = Delivery.Status.FAILED
        else:
            delivery.status = Delivery.Status.RETRYING
        delivery.save()
    return retry_in
