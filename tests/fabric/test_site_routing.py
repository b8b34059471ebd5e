"""Routing by site: a task that talks to a fabric goes to the queue of the fabric's site
(``site.<slug>``), the rest to the default queue; and a site's reachability from its workers'
heartbeats, its SMs and its waiting changes, as the dashboard says it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import TestCase
from django.utils import timezone

from console.celery import app as celery_app
from console.fabric import routing, sites
from console.fabric.changes.pipeline import reap_stuck_changes
from console.fabric.enqueue import enqueue_apply, enqueue_reconcile
from console.fabric.models import ChangeRequest, Fabric, Site, WorkerHeartbeat
from console.telemetry.models import FabricEvent
from designer.models import Design, DesignRevision
from scheduling.models import Node

pytestmark = pytest.mark.django_db


@pytest.fixture
def placed(db, settings):
    """Fabric ``fa`` at site A, ``fb`` at site B, ``fc`` at no site, each an OpenSM host the
    site's workers reach (not through an agent); production mode (routing)."""
    settings.EMBEDDED = False
    design = Design.objects.create(name="routing", topology="fat-tree")
    revision = DesignRevision.objects.create(design=design, number=1, graph={}, summary={})
    a = Site.objects.create(name="A", slug="a")
    b = Site.objects.create(name="B", slug="b")
    opensm = Fabric.Driver.OPENSM
    fa = Fabric.objects.create(name="fa", revision=revision, site=a, driver=opensm)
    fb = Fabric.objects.create(name="fb", revision=revision, site=b, driver=opensm)
    fc = Fabric.objects.create(name="fc", revision=revision, driver=opensm)
    routing.forget()
    return a, b, fa, fb, fc


@pytest.fixture
def published(monkeypatch):
    """Task name → the queue each message built for the broker would go to (captured, not sent)."""
    sent: list[tuple[str, str]] = []

    def capture(producer, name, message, queue=None, routing_key=None, **options):
        sent.append((name, routing_key or (queue.name if queue is not None else "")))

    monkeypatch.setattr(celery_app.amqp, "send_task_message", capture)
    return sent


def change_of(fabric: Fabric) -> ChangeRequest:
    return ChangeRequest.objects.create(fabric=fabric, status=ChangeRequest.Status.QUEUED)


def test_the_router_sends_fabric_tasks_to_their_sites_queue(placed):
    a, b, fa, fb, fc = placed
    assert routing.route("fabric.reconcile", (), {"fabric_id": fa.pk}, {}) == {"queue": "site.a"}
    assert routing.route("fabric.reconcile", (fb.pk,), {}, {}) == {"queue": "site.b"}
    assert routing.route("fabric.apply_change", (), {"change_id": change_of(fb).pk}, {}) == {"queue": "site.b"}
    assert routing.route("telemetry.collect_fabric", (), {"fabric_id": fa.pk}, {}) == {"queue": "site.a"}
    node = Node.objects.create(fabric=fb, name="gpu-b-1")
    assert routing.route("power.drive", (node.pk, "on"), {}, {}) == {"queue": "site.b"}
    assert routing.route("power.poll", (node.pk, "on", 0.0), {}, {}) == {"queue": "site.b"}
    # a fabric without a site, an unknown fabric and a task of no fabric: the default queue
    assert routing.route("fabric.reconcile", (), {"fabric_id": fc.pk}, {}) is None
    assert routing.route("fabric.reconcile", (), {"fabric_id": 10**9}, {}) is None
    assert routing.route("scheduling.tick", (), {}, {}) is None
    assert routing.route("fabric.reap_stuck_changes", (), {}, {}) is None


def test_published_messages_carry_the_sites_queue(placed, published):
    a, b, fa, fb, fc = placed
    change = change_of(fa)
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue_apply(change.pk)
        enqueue_reconcile(fb.pk)
        enqueue_reconcile(fc.pk)
    assert published == [
        ("fabric.apply_change", "site.a"),
        ("fabric.reconcile", "site.b"),
        ("fabric.reconcile", "console"),
    ]


def test_a_fabric_moved_to_another_site_routes_there_at_once(placed):
    a, b, fa, fb, fc = placed
    assert routing.queue_for_fabric(fa.pk) == "site.a"  # cached now
    fa.site = b
    fa.save()
    assert routing.queue_for_fabric(fa.pk) == "site.b"
    b.slug = "b2"
    b.save()
    assert routing.queue_for_fabric(fa.pk) == "site.b2"
    fc.site = a
    fc.save()
    assert routing.queue_for_fabric(fc.pk) == "site.a"


def test_embedded_mode_routes_nothing(placed, settings):
    a, b, fa, fb, fc = placed
    settings.EMBEDDED = True
    assert routing.route("fabric.reconcile", (), {"fabric_id": fa.pk}, {}) is None
    assert sites.reachability(threshold_s=60)[a.pk].queue == "console"


def test_reachability_from_heartbeats_waiting_changes_and_sms(placed):
    a, b, fa, fb, fc = placed
    now = timezone.now()
    sites.record_heartbeat(["site.a"], "w-a@host", now=now - dt.timedelta(seconds=5))
    sites.record_heartbeat(["site.b"], "w-b@host", now=now - dt.timedelta(seconds=120))
    change_of(fb), change_of(fb), change_of(fa)
    ChangeRequest.objects.create(fabric=fb, status=ChangeRequest.Status.APPLIED)
    status = sites.reachability(now=now, threshold_s=90)
    assert status[a.pk].reachable and status[a.pk].reason == "" and status[a.pk].worker == "w-a@host"
    assert not status[b.pk].reachable
    seen = (now - dt.timedelta(seconds=120)).strftime("%Y-%m-%d %H:%M")
    assert status[b.pk].sentence == f"Site B unreachable: no worker heartbeat since {seen} UTC; 2 changes waiting"
    assert status[b.pk].as_dict() == {
        "reachable": False,
        "last_seen": (now - dt.timedelta(seconds=120)).isoformat(),
        "worker": "w-b@host",
        "waiting_changes": 2,
        "sm_down": [],
        "reason": f"no worker heartbeat since {seen} UTC",
    }
    # a newer beat of the same queue replaces the row (workers of one queue race on it)
    sites.record_heartbeat(["site.b"], "w-b2@host", now=now)
    assert WorkerHeartbeat.objects.filter(queue="site.b").count() == 1
    assert sites.reachability(now=now, threshold_s=90)[b.pk].reachable
    # a site whose SM stopped answering is unreachable although its workers beat
    FabricEvent.objects.create(
        fabric=fa, kind="sm_state", subject="sm", message="subnet manager state MASTER → NO ANSWER", opened_at=now
    )
    status = sites.reachability(now=now, threshold_s=90)
    assert not status[a.pk].reachable
    assert status[a.pk].reason == "subnet manager not answering (fa: subnet manager state MASTER → NO ANSWER)"


def test_a_site_never_heard_from_is_unreachable(placed):
    a, *_ = placed
    assert sites.reachability(threshold_s=90)[a.pk].reason == "no worker heartbeat ever"


def test_the_reaper_does_not_pile_up_copies_for_a_site_without_workers(placed, published):
    a, b, fa, fb, fc = placed
    now = timezone.now()
    sites.record_heartbeat(["site.a"], "w-a@host", now=now)
    old = now - dt.timedelta(hours=1)
    for fabric in (fa, fb, fc):
        ChangeRequest.objects.filter(pk=change_of(fabric).pk).update(created_at=old)
    with TestCase.captureOnCommitCallbacks(execute=True):
        reaped = reap_stuck_changes(now=now)
    # site B's worker never beat: its change waits in its queue, not sent again
    assert sorted(q for _, q in published) == ["console", "site.a"]
    assert len(reaped["republished"]) == 2


def test_the_dashboard_names_the_unreachable_site(placed, operator, member_a, client):
    a, b, fa, fb, fc = placed
    sites.record_heartbeat(["site.a"], "w-a@host")
    change_of(fb)
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert 'data-testid="site-unreachable-b"' in page and "Site B unreachable:" in page
    assert "no worker heartbeat ever; 1 change waiting" in page
    assert "site-unreachable-a" not in page
    client.force_login(member_a)  # tenants do not see the sites' workers
    assert "site-unreachable" not in client.get("/").content.decode()


def test_up_starts_one_worker_per_site_on_its_queue_only(placed):
    import io

    from console.management.commands.up import Command

    a, b, fa, fb, fc = placed
    lab_site = Site.objects.create(name="L", slug="l")  # its fabric's SM host runs an agent
    Fabric.objects.create(name="fl", revision=fa.revision, site=lab_site, driver=Fabric.Driver.LAB)
    out = io.StringIO()
    workers = Command(stdout=out)._workers("python")
    assert {name: argv[argv.index("-Q") + 1] for name, argv in workers.items()} == {
        "worker": "console",
        "worker-a": "site.a",
        "worker-b": "site.b",
    }
    assert "Site L:             reached through its SM hosts' agents (no worker of its own)" in out.getvalue()


def test_the_fallback_collector_sweeps_each_fabric_on_its_sites_queue(placed, published):
    from console.telemetry.tasks import collect

    a, b, fa, fb, fc = placed
    answer = collect()
    assert answer == {"fa": "sweep queued", "fb": "sweep queued", "fc": "sweep queued"}
    assert sorted(published) == [
        ("telemetry.collect_fabric", "console"),
        ("telemetry.collect_fabric", "site.a"),
        ("telemetry.collect_fabric", "site.b"),
    ]


@pytest.mark.django_db(transaction=True)
def test_the_router_reconnects_once_when_the_database_dropped_its_connection(settings):
    """A task's retry routes its message again; after the database terminated the worker's
    connection that lookup failed, Celery rejected the message and its change stayed leased."""
    from django.db import connection, connections

    settings.EMBEDDED = False
    design = Design.objects.create(name="routing-drop", topology="fat-tree")
    revision = DesignRevision.objects.create(design=design, number=1, graph={}, summary={})
    site = Site.objects.create(name="D", slug="d")
    fabric = Fabric.objects.create(name="fd", revision=revision, site=site, driver=Fabric.Driver.OPENSM)
    change = change_of(fabric)
    routing.forget()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    assert routing.route("fabric.apply_change", (), {"change_id": change.pk}, {}) == {"queue": "site.d"}
    with connection.cursor() as cursor:  # the connection was replaced, not just the answer
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_site_reached_through_its_agents_needs_no_worker_of_its_own(placed):
    from console.fabric.agents import services as agents
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role

    a, b, fa, fb, fc = placed
    fb.driver = "agent"
    fb.save()
    lab = Fabric.objects.create(name="lab-at-a", revision=fa.revision, site=a)  # a lab: an SM host with its agent
    routing.forget()
    assert routing.route("fabric.reconcile", (), {"fabric_id": lab.pk}, {}) is None
    # its tasks go to the central workers' queue: they push through the agent's socket
    assert routing.route("fabric.reconcile", (), {"fabric_id": fb.pk}, {}) is None
    assert routing.route("fabric.reconcile", (), {"fabric_id": fa.pk}, {}) == {"queue": "site.a"}
    assert not sites.heartbeat_stale(fb.pk)
    # never a worker heartbeat at B: what counts is its agent
    status = sites.reachability(threshold_s=90)[b.pk]
    assert (
        not status.reachable
        and status.reason == "subnet manager not answering (fb: waiting for the subnet manager's agent)"
    )
    made = agents.create_agent(Actor.system("t"), Principal(None, Role.OPERATOR, None), fb, name="smhost-b")
    agents.heartbeat(made.agent.pk, {"state": "MASTER"})
    assert sites.reachability(threshold_s=90)[b.pk].reachable
    agents.heartbeat(made.agent.pk, {"state": "NO ANSWER"})
    status = sites.reachability(threshold_s=90)[b.pk]
    assert status.reason == "subnet manager not answering (fb: waiting for the subnet manager on smhost-b)"
