"""Each site runs on its own, through its agent: with site B's agent stopped, reservations on A
proceed and a change for B waits, said on the dashboard; it applies and verifies the moment B's
agent is back.

The two labs of tests/sites/conftest.py (fabric A at site ``site-a``, fabric B at ``site-b``, each
with its pool and the agent of its SM host). One central ``celery -A console worker`` subprocess
on the default queue (a site reached through its agents needs no worker of its own), on this
run's database (``transaction=True``: the worker sees committed rows). Nothing is done in this
process that a worker would do: reservations are made through the service, and the reconcile,
push and verification run on the worker, through the site's agent.
"""

from __future__ import annotations

import pytest

from console.fabric import changes, sites
from console.fabric.models import ChangeRequest, Site
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from scheduling.models import Reservation
from scheduling.services import quotas
from tests.conftest import flush_broker
from tests.fabric.lab_fixtures import with_agent
from tests.fabric.pipeline_fixtures import hca_guids, wait_for
from tests.fabric.test_worker_crash import Worker
from tests.scheduling.test_fabric_lifecycle_lab import book, guids_of, holders_of
from tests.sites.conftest import TwoLabs

pytestmark = [pytest.mark.timeout(420), pytest.mark.django_db(transaction=True)]
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
S = Reservation.Status


@pytest.fixture
def central_worker(tmp_path):
    flush_broker()  # this run's own Redis db: no stale tasks (the agents' sockets kept)
    worker = Worker("central", tmp_path / "worker.log")
    yield worker
    worker.stop()


def reachable(site: Site) -> bool:
    return sites.reachability()[site.pk].reachable


def status_of(reservation: Reservation) -> str:
    return Reservation.objects.get(pk=reservation.pk).status


def test_site_b_down_a_proceeds_b_waits_then_applies_and_verifies_on_return(
    two_labs: TwoLabs, central_worker, tenant_a, operator, client, lab_console
):
    site_a, site_b = two_labs.sites
    fabric_b, (lab_a, lab_b) = two_labs.fabric_b, two_labs.labs
    for pool in (two_labs.pool_a, two_labs.pool_b):
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=32)
    # given both sites reached through their agents, with no worker of their own
    assert reachable(site_a) and reachable(site_b)
    # when site B's agent stops (its SM host cut off)
    lab_b.stop_agent()
    wait_for(lambda: not reachable(site_b), timeout=30)
    # then a reservation on A still becomes ready: reconciled by the central worker, pushed and
    # verified through A's agent
    on_a = book(two_labs.pool_a, tenant_a, 16, "train-a")
    wait_for(lambda: status_of(on_a) == S.READY, timeout=180)
    on_a.refresh_from_db()
    assert set(holders_of(lab_a, on_a.pkey, guids_of(on_a)).values()) <= {"full", "limited"}
    # and a change for B (an operator's partition, and a reservation on B's pool) waits
    on_b = book(two_labs.pool_b, tenant_a, 16, "train-b")
    guid = min(set(hca_guids(lab_b).values()) - guids_of(on_b))  # an HCA of no reservation
    changes.set_partition(ACTOR, OPERATOR, fabric_b, name="ops-b", pkey="0x0011", members=[f"{guid:#018x}"])
    change = changes.request_change(ACTOR, OPERATOR, fabric_b, reason="while site B is down")
    assert reachable(site_a)
    assert sites.reachability()[site_b.pk].reason == (
        f"subnet manager not answering ({fabric_b.name}: waiting for the subnet manager's agent)"
    )
    assert not ChangeRequest.objects.get(pk=change.pk).is_terminal
    assert status_of(on_b) == S.PROVISIONING
    # and the dashboard says so
    client.force_login(operator)
    page = client.get("/").content.decode()
    assert "Site B unreachable:" in page and "waiting for the subnet manager&#x27;s agent" in page, page
    assert 'data-testid="site-unreachable-site-a"' not in page
    # when B's agent returns, the change applies and is verified on B's fabric
    with_agent(fabric_b, lab_console)
    done = wait_for(lambda: (c := ChangeRequest.objects.get(pk=change.pk)).is_terminal and c, timeout=180)
    assert done.status == ChangeRequest.Status.APPLIED, (done.error, list(done.steps.values("name", "status")))
    assert done.steps.filter(name="verify", status="ok").exists()
    assert holders_of(lab_b, 0x0011, {guid}) == {guid: "full"}
    # and B's reservation becomes ready with its P_Key on its HCAs, B reachable again
    wait_for(lambda: status_of(on_b) == S.READY, timeout=180)
    on_b.refresh_from_db()
    assert set(holders_of(lab_b, on_b.pkey, guids_of(on_b)).values()) <= {"full", "limited"}
    assert reachable(site_b)
    assert 'data-testid="site-unreachable-site-b"' not in client.get("/").content.decode()
