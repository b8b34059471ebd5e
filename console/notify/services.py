"""Emitting events (a row per event, a delivery per subscribed webhook, e-mail to opted-in
members) and managing webhooks. Emitters call :func:`emit` inside their own transaction; the
Celery messages go out only after it commits (the publish-after-commit pattern of
``scheduling/services/publish.py``)."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from dataclasses import dataclass
from typing import Any

from celery import current_app as celery_app
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from console.notify.models import EVENT_TYPES, Delivery, Event, Preference, Webhook
from console.notify.signing import check_url, encrypt_secret, new_secret
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Forbidden, Invalid
from console.tenancy.models import Membership, Principal, Role, Tenant

log = logging.getLogger(__name__)

DELIVER = "notify.deliver"
EMAIL = "notify.email"
ADMINS = (Role.OPERATOR, Role.TENANT_ADMIN)


def iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Notice:
    """What an emitter says: the tenant, the type, the ``data`` of the payload, and who owns the
    reservation (for e-mail)."""

    tenant_id: int
    type: str
    data: dict[str, Any]
    reservation_id: int | None = None
    owner_id: int | None = None
    dedupe_key: str | None = None


def emit(notice: Notice) -> Event | None:
    """Record the event and queue its deliveries and e-mail after commit. ``None`` when its
    ``dedupe_key`` was already used (sent once)."""
    if notice.type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {notice.type}")
    tenant = Tenant.objects.only("slug").get(pk=notice.tenant_id)
    event = Event(
        tenant_id=notice.tenant_id,
        type=notice.type,
        reservation_id=notice.reservation_id,
        owner_user_id=notice.owner_id,
    )
    event.dedupe_key = notice.dedupe_key
    event.payload = {
        "id": str(event.id),
        "type": notice.type,
        "created_at": iso(timezone.now()),
        "tenant": {"id": tenant.pk, "slug": tenant.slug},
        "data": notice.data,
    }
    try:
        with transaction.atomic():
            event.save()
    except IntegrityError:
        return None  # its dedupe key was taken: sent already
    hooks = Webhook.objects.filter(tenant_id=notice.tenant_id, is_active=True)
    for webhook in (h for h in hooks if notice.type in h.events):  # JSON containment differs per database
        delivery = Delivery.objects.create(webhook=webhook, event=event)
        transaction.on_commit(functools.partial(_publish, DELIVER, {"delivery_id": delivery.pk}))
    if recipients(notice.tenant_id, notice.owner_id):
        transaction.on_commit(functools.partial(_publish, EMAIL, {"event_id": str(event.id)}))
    return event


def _publish(task: str, kwargs: dict[str, Any]) -> None:
    try:
        celery_app.send_task(task, kwargs=kwargs, ignore_result=True)
    except Exception:  # the event row is committed; its delivery log shows it never went
        log.exception("could not enqueue %s %s", task, kwargs)


def recipients(tenant_id: int, owner_id: int | None) -> list[str]:
    """E-mail addresses of the tenant's members who want this: the reservation's creator unless
    they turned ``email_own`` off, and anyone who turned ``email_tenant`` on."""
    members = list(
        Membership.objects.filter(tenant_id=tenant_id).exclude(user__email="").values_list("user_id", flat=True)
    )
    prefs = {p.user_id: p for p in Preference.objects.filter(user_id__in=members)}
    wanted = []
    for user_id in members:
        pref = prefs.get(user_id) or Preference(user_id=user_id)
        if pref.email_tenant or (user_id == owner_id and pref.email_own):
            wanted.append(user_id)
    users = get_user_model().objects.filter(pk__in=wanted).order_by("pk")
    return [u.email for u in users]


# ---------------------------------------------------------------- webhooks (API and page)


def _check_admin(principal: Principal, tenant_id: int) -> None:
    if not (principal.can_write and principal.role in ADMINS):
        raise Forbidden("only tenant admins manage webhooks")
    if not principal.is_operator and principal.tenant_id != tenant_id:
        raise Forbidden("not your webhook")


def _check_events(events: list[str]) -> list[str]:
    unknown = sorted(set(events) - set(EVENT_TYPES))
    if unknown or not events:
        raise Invalid("unknown or no event types", fields={"events": [f"choose from {', '.join(EVENT_TYPES)}"]})
    return sorted(set(events))


def create_webhook(
    actor: Actor, principal: Principal, *, tenant: Tenant, name: str, url: str, events: list[str], secret: str = ""
) -> tuple[Webhook, str]:
    """Register a receiver; returns it and its secret (generated when none is given), which is
    shown this once and never again."""
    _check_admin(principal, tenant.pk)
    check_url(url)
    secret = secret or new_secret()
    with transaction.atomic():
        webhook = Webhook.objects.create(
            tenant=tenant,
            name=name,
            url=url,
            events=_check_events(events),
            secret_encrypted=encrypt_secret(secret),
            created_by_id=principal.user_id,
        )
        audit.record(actor, "webhook.create", webhook, after=audit.snapshot(webhook))
    return webhook, secret


def update_webhook(actor: Actor, principal: Principal, webhook: Webhook, **changes: Any) -> Webhook:
    """Change name, url, events, is_active or the secret (``secret``: write-only)."""
    _check_admin(principal, webhook.tenant_id)
    if "url" in changes:
        check_url(changes["url"])
    if "events" in changes:
        changes["events"] = _check_events(changes["events"])
    secret = changes.pop("secret", "")
    with transaction.atomic():
        webhook = Webhook.objects.select_for_update().get(pk=webhook.pk)
        before = audit.snapshot(webhook)
        for key, value in changes.items():
            setattr(webhook, key, value)
        if secret:
            webhook.secret_encrypted = encrypt_secret(secret)
        webhook.save()
        after = audit.snapshot(webhook) | {"secret_rotated": bool(secret)}
        audit.record(actor, "webhook.update", webhook, before=before, after=after)
    return webhook


def delete_webhook(actor: Actor, principal: Principal, webhook: Webhook) -> None:
    _check_admin(principal, webhook.tenant_id)
    with transaction.atomic():
        audit.record(actor, "webhook.delete", webhook, before=audit.snapshot(webhook))
        webhook.delete()


def send_test(actor: Actor, principal: Principal, webhook: Webhook) -> Delivery:
    """Queue a ``webhook.test`` event to this webhook only (whatever it subscribes to)."""
    _check_admin(principal, webhook.tenant_id)
    with transaction.atomic():
        event = Event(tenant_id=webhook.tenant_id, type="webhook.test")
        event.payload = {
            "id": str(event.id),
            "type": "webhook.test",
            "created_at": iso(timezone.now()),
            "tenant": {"id": webhook.tenant_id, "slug": webhook.tenant.slug},
            "data": {"message": f"test event for webhook {webhook.name}"},
        }
        event.save()
        delivery = Delivery.objects.create(webhook=webhook, event=event)
        audit.record(actor, "webhook.test", webhook, after={"delivery": delivery.pk, "event": str(event.id)})
        transaction.on_commit(functools.partial(_publish, DELIVER, {"delivery_id": delivery.pk}))
    return delivery
