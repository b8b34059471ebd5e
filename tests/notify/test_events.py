"""Every event type emitted by the real services and checked against its JSON Schema; payloads
scoped to the tenant (another tenant's webhook gets nothing); e-mail recipients by preference;
``expiring`` once per reservation; the schemas in docs/api.md are the ones in code."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone
from jsonschema import Draft202012Validator

from console.fabric import hooks
from console.notify.models import EVENT_TYPES, Delivery, Event, Preference
from console.notify.schemas import schema_for
from console.notify.services import recipients
from console.telemetry import services as telemetry
from console.telemetry.alarms import Transition
from console.tenancy.context import Actor
from scheduling.models import Reservation
from scheduling.services import lifecycle, queue, reservations
from tests.notify.conftest import add_webhook
from tests.notify.documented import documented_schemas
from tests.scheduling.conftest import SYSTEM, give_quota, request_for, tenant_principal

pytestmark = pytest.mark.django_db


def reserve(tenant, pool, user=None, **kw) -> Reservation:
    reservation = reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))
    if user is not None:
        Reservation.objects.filter(pk=reservation.pk).update(created_by=user)
        reservation.refresh_from_db()
    return reservation


def check(event: Event) -> dict:
    """Validate against the schema (formats too) and return the payload."""
    validator = Draft202012Validator(schema_for(event.type), format_checker=Draft202012Validator.FORMAT_CHECKER)
    errors = [e.message for e in validator.iter_errors(event.payload)]
    assert not errors, (event.type, errors)
    return event.payload


def events_of(reservation: Reservation, event_type: str) -> list[Event]:
    return list(Event.objects.filter(reservation_id=reservation.pk, type=event_type).order_by("created_at"))


def test_every_event_type_is_emitted_schema_valid_and_tenant_scoped(pool, tenant_a, tenant_b, receiver):
    give_quota(tenant_a, pool, 64, borrow=64)
    give_quota(tenant_b, pool, 64)
    mine = add_webhook(tenant_a, receiver.url)
    theirs = add_webhook(tenant_b, receiver.url + "/b")

    # ready: the fabric verified its P_Key
    ready = reserve(tenant_a, pool, gpus=16)
    hooks.notify_verified(pool.fabric_id, present_pkeys={ready.pkey}, change_id=1)
    (event,) = events_of(ready, "reservation.ready")
    body = check(event)
    assert body["tenant"] == {"id": tenant_a.pk, "slug": tenant_a.slug}
    assert body["data"]["reservation"]["id"] == ready.pk and len(body["data"]["reservation"]["nodes"]) == 2

    # failed: a change carrying a provisioning reservation's partition failed
    waiting = reserve(tenant_a, pool, gpus=8)
    hooks.notify_failed(pool.fabric_id, change_id=2, error="lint: bad GUID")
    (event,) = events_of(waiting, "reservation.failed")
    assert "lint: bad GUID" in check(event)["data"]["error"]

    # fabric_fault: a link down on a reservation's node, from telemetry's alarms
    transition = Transition("open", "link_down", "link-7", "critical", "link leaf-01/1 down", {})
    telemetry.apply_transitions(
        pool.fabric_id, [transition], {"link-7": [(ready.pk, tenant_a.pk)]}, actor=Actor.system("tests")
    )
    (event,) = events_of(ready, "reservation.fabric_fault")
    assert check(event)["data"]["fault"]["kind"] == "link_down"
    assert not events_of(waiting, "reservation.fabric_fault")  # its nodes were not touched

    # fabric_fault: a node of a ready reservation marked down by an operator
    from scheduling.models import Node
    from scheduling.services import inventory
    from tests.scheduling.conftest import OPERATOR

    node = Node.objects.get(name=body["data"]["reservation"]["nodes"][0], fabric=pool.fabric)
    inventory.set_node_state(SYSTEM, OPERATOR, node, Node.State.DOWN)
    faults = [check(e)["data"]["fault"] for e in events_of(ready, "reservation.fabric_fault")]
    assert [f["kind"] for f in faults] == ["link_down", "node_down"] and node.name in faults[1]["message"]
    inventory.set_node_state(SYSTEM, OPERATOR, node, Node.State.AVAILABLE)

    # expiring: the tick, within the lead, once
    soon = ready.end - dt.timedelta(minutes=10)
    assert lifecycle.tick(soon)["expiring"] >= 1
    assert lifecycle.tick(soon + dt.timedelta(seconds=10))["expiring"] == 0
    (event,) = events_of(ready, "reservation.expiring")
    assert check(event)["data"]["lead_s"] == 1800

    # preempted: tenant B claims its guarantee from A's borrowed capacity
    borrowed = reserve(tenant_a, pool, gpus=96)
    assert borrowed.borrowed
    reserve(tenant_b, pool, gpus=64)
    (event,) = events_of(borrowed, "reservation.preempted")
    payload = check(event)
    assert "Tenant B" not in json.dumps(payload) and "tenant-b" not in json.dumps(payload)

    # placed: queued → placed by the queue pass when capacity frees
    blocker = Reservation.objects.filter(tenant=tenant_b, status=Reservation.Status.PROVISIONING).get()
    asap = queue.reserve_asap(SYSTEM, tenant_principal(tenant_a), request_for(pool, gpus=64))
    assert asap.status == Reservation.Status.QUEUED  # 40 GPUs free of 128
    lifecycle.release(SYSTEM, tenant_principal(tenant_b), blocker)
    assert queue.queue_pass(pool.pk)["placed"] == 1
    (event,) = events_of(asap, "reservation.placed")
    assert check(event)["data"]["waited_s"] >= 0

    # every reservation event went to A's webhook, none to B's (B's own: its claim was not ready)
    a_types = set(Delivery.objects.filter(webhook=mine).values_list("event__type", flat=True))
    assert a_types == {t for t in EVENT_TYPES if t != "webhook.test"}
    for event in Event.objects.filter(tenant=tenant_a):
        assert str(tenant_b.pk) not in json.dumps(event.payload["tenant"])
    assert not Delivery.objects.filter(webhook=theirs, event__tenant=tenant_a).exists()


def test_expiring_lead_is_a_setting(pool, tenant_a, settings):
    settings.NOTIFY_EXPIRING_LEAD_S = 300
    give_quota(tenant_a, pool, 64)
    reservation = reserve(tenant_a, pool, gpus=8)
    assert lifecycle.tick(reservation.end - dt.timedelta(minutes=10))["expiring"] == 0
    assert lifecycle.tick(reservation.end - dt.timedelta(minutes=4))["expiring"] == 1
    (event,) = events_of(reservation, "reservation.expiring")
    assert check(event)["data"]["lead_s"] == 300


def test_email_goes_to_the_owner_by_default_and_to_members_who_opt_in(make_user, tenant_a, tenant_b):
    from console.tenancy.models import Role

    owner = make_user("owner", Role.TENANT_MEMBER, tenant_a)
    colleague = make_user("colleague", Role.TENANT_MEMBER, tenant_a)
    watcher = make_user("watcher", Role.TENANT_ADMIN, tenant_a)
    outsider = make_user("outsider", Role.TENANT_ADMIN, tenant_b)
    for user in (owner, colleague, watcher, outsider):
        user.email = f"{user.username}@example.org"
        user.save()
    Preference.objects.create(user=watcher, email_tenant=True)
    Preference.objects.create(user=outsider, email_tenant=True)
    assert recipients(tenant_a.pk, owner.pk) == ["owner@example.org", "watcher@example.org"]
    Preference.objects.create(user=owner, email_own=False)
    assert recipients(tenant_a.pk, owner.pk) == ["watcher@example.org"]


def test_the_documented_schemas_are_the_checked_ones():
    assert documented_schemas() == {t: schema_for(t) for t in EVENT_TYPES}


def test_ready_event_time_is_utc(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    reservation = reserve(tenant_a, pool, gpus=8)
    hooks.notify_verified(pool.fabric_id, present_pkeys={reservation.pkey}, change_id=1)
    (event,) = events_of(reservation, "reservation.ready")
    assert event.payload["created_at"].endswith("Z") and event.created_at <= timezone.now()
