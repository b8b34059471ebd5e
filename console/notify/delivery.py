"""One webhook POST and its record: signed body, timeout, no redirects, an attempt row each time.

urllib (stdlib) rather than a new HTTP client: one POST with a timeout needs nothing more, and
refusing redirects is one handler. The connection goes to the address the SSRF guard checked
(``check_url`` resolves once), not to the name resolved again: an answer that changes between
the check and the connect (DNS rebinding) is never used. TLS still verifies the certificate
against the URL's host name (SNI). No HTTP proxy is used for webhooks: a proxy would resolve the
name itself, after the check.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

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
from console.tenancy.crypto import CredentialError
from console.tenancy.errors import Invalid


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a 3xx is an answer, not an invitation to POST elsewhere


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to a given address (the checked one), the Host header the URL's."""

    def __init__(self, host: str, *, address: str, **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a given address, the certificate verified against the URL's host name."""

    def __init__(self, host: str, *, address: str, context: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(host, context=context, **kwargs)
        self.address = address
        self.tls = context

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(sock, server_hostname=self.host)


def _opener(address: str) -> urllib.request.OpenerDirector:
    """An opener whose every connection goes to ``address``, with no redirects and no proxy."""

    def plain(host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _PinnedHTTP(host, address=address, **kwargs)

    def tls(host: str, /, **kwargs: Any) -> http.client.HTTPConnection:
        return _PinnedHTTPS(host, address=address, **kwargs)

    class Http(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(plain, req)

    class Https(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> Any:
            return self.do_open(tls, req, context=ssl.create_default_context())

    return urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}), Http, Https)


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
        addresses = check_url(url)
        if not addresses:
            raise OSError(f"{urllib.parse.urlsplit(url).hostname} does not resolve")
        with _opener(addresses[0]).open(request, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"HTTP {exc.code}"
    except Invalid as exc:
        error = str(exc)
    except OSError as exc:  # refused, reset, timed out, name not found
        error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # a URL urllib cannot send (http.client.InvalidURL, ValueError): recorded
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
    try:
        secret = decrypt_secret(webhook.secret_encrypted)
    except (CredentialError, ValueError) as exc:  # the key changed since it was stored: an attempt all the same
        outcome = Outcome(False, None, f"the webhook's secret cannot be read: {exc}"[:300], 0)
    else:
        outcome = post(webhook.url, secret, delivery.event.payload, timeout=settings.NOTIFY_WEBHOOK_TIMEOUT_S)
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


#: A delivery whose task message was lost (a broker restarted without persistence, a worker killed
#: before it acked) is sent again after this long past its due time.
OVERDUE_S = 120


def overdue(now: dt.datetime | None = None) -> list[int]:
    """Deliveries due for an attempt longer than :data:`OVERDUE_S` ago: pending ones never tried,
    retrying ones past their retry time. ``notify.redeliver`` (beat) sends them again."""
    now = now or timezone.now()
    late = now - dt.timedelta(seconds=OVERDUE_S)
    never = Delivery.objects.filter(status=Delivery.Status.PENDING, attempts=0, created_at__lt=late)
    again = Delivery.objects.filter(status=Delivery.Status.RETRYING, next_retry_at__lt=late)
    return sorted(set(never.values_list("pk", flat=True)) | set(again.values_list("pk", flat=True)))
