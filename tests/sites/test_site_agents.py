"""Each site runs on its own: with site B's worker stopped, reservations on A proceed and a change
for B waits in B's queue; it applies and verifies when B's worker returns.

The two labs of tests/sites/conftest.py (fabric A at site ``site-a``, fabric B at ``site-b``, each
with its pool). Real ``celery -A console worker -Q site.<slug>`` subprocesses on Redis, one per
site, on this run's database (``transaction=True``: the workers see committed rows). Nothing is
done in this process that a worker would do: reservations are made through the service, and the
reconcile, push and verification run on the site's worker.
"""

from __future__ import annotations

import pytest
import redis
from django.conf import settings

from console.fabric import changes, sites
from console.fabric.models import ChangeRequest, Site
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling.models import Reservation
from scheduling.services import quotas
from tests.fabric.pipeline_fixtures import hca_guids, wait_for
from tests.fabric.test_worker_crash import Worker
from tests.scheduling.test_fabric_lifecycle_lab import book, guids_of, holders_of
from tests.sites.conftest import TwoLabs

pytestmark = [pytest.mark.timeout(420), pytest.mark.django_db(transaction=True)]
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
S = Reservation.Status
#: the workers beat every second; a site silent for 4 s is unreachable (defaults: 15 s and 90 s)
FAST_BEAT = {"SITE_HEARTBEAT_INTERVAL_S": "1"}
UNREACHABLE_AFTER_S = 4.0


@pytest.fixture
def site_workers(tmp_path):
    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # this run's own Redis db: no stale tasks
    started: list[Worker] = []

    def start(site: Site) -> Worker:
        log = tmp_path / f"worker-{site.slug}-{len(started)}.log"
        worker = Worker(f"{site.slug}-{len(started)}", log, queues=site.queue, env=FAST_BEAT)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def reachable(site: Site) -> bool:
    return sites.reachability(threshold_s=UNREACHABLE_AFTER_S)[site.pk].reachable


def status_of(reservation: Reservation) -> str:
    return Reservation.objects.get(pk=reservation.pk).status


def test_site_b_down_a_proceeds_b_waits_then_applies_and_verifies_on_return(
    two_labs: TwoLabs, site_workers, tenant_a, operator, client, settings
):
    site_a, site_b = two_labs.sites
    fabric_b, (lab_a, lab_b) = two_labs.fabric_b, two_labs.labs
    for pool in (two_labs.pool_a, two_labs.pool_b):
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=32)
    # given a worker at each site, both heard from
    site_workers(site_a)
    worker_b = site_workers(site_b)
    wait_for(lambda: reachable(site_a) and reachable(site_b), timeout=30)
    # when site B's worker stops
    worker_b.stop()
    # then a reservation on A still becomes ready: reconciled, pushed and verified by A's worker
    on_a = book(two_labs.pool_a, tenant_a, 16, "train-a")
    wait_for(lambda: status_of(on_a) == S.READY, timeout=180)
    on_a.refresh_from_db()
    assert set(holders_of(lab_a, on_a.pkey, guids_of(on_a)).values()) <= {"full", "limited"}
    # and a change for B (an operator's partition, and a reservation on B's pool) waits in B's queue
    on_b = book(two_labs.pool_b, tenant_a, 16, "train-b")
    guid = min(set(hca_guids(lab_b).values()) - guids_of(on_b))  # an HCA of no reservation
    changes.set_partition(ACTOR, OPERATOR, fabric_b, name="ops-b", pkey="0x0011", members=[f"{guid:#018x}"])
    change = changes.request_change(ACTOR, OPERATOR, fabric_b, reason="while site B is down")
    queued = redis.Redis.from_url(settings.REDIS_URL)
    wait_for(lambda: queued.llen(site_b.queue) >= 1 and not reachable(site_b), timeout=30)
    assert reachable(site_a)
    assert ChangeRequest.objects.get(pk=change.pk).status == ChangeRequest.Status.QUEUED
    assert status_of(on_b) == S.PROVISIONING
    # and the dashboard says so
    settings.SITE_UNREACHABLE_AFTER_S = UNREACHABLE_AFTER_S
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert "Site B unreachable:" in page and "1 change waiting" in page, page
    assert 'data-testid="site-unreachable-site-a"' not in page
    # when B's worker returns, the change applies and is verified on B's fabric
    site_workers(site_b)
    done = wait_for(lambda: (c := ChangeRequest.objects.get(pk=change.pk)).is_terminal and c, timeout=180)
    assert done.status == ChangeRequest.Status.APPLIED, (done.error, list(done.steps.values("name", "status")))
    assert done.steps.filter(name="verify", status="ok").exists()
    assert holders_of(lab_b, 0x0011, {guid}) == {guid: "full"}
    # and B's reservation becomes ready with its P_Key on its HCAs, B reachable again
    wait_for(lambda: status_of(on_b) == S.READY, timeout=180)
    on_b.refresh_from_db()
    assert set(holders_of(lab_b, on_b.pkey, guids_of(on_b)).values()) <= {"full", "limited"}
    wait_for(lambda: reachable(site_b), timeout=30)
    assert 'data-testid="site-unreachable-site-b"' not in client.get("/").content.decode()
