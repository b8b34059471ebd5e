"""The demo's second site: the seed adds two sites, a second fabric with its own names and GUIDs,
a pool spanning both, a quota and a dataset; ``manage.py up`` starts and stops both labs."""

from __future__ import annotations

import io

import pytest

from console.demo import seed_all
from console.demo_sites import DEMO_LAB_DESIGNS, DEMO_SPANNING_POOL
from console.fabric.lab.fabrics import lab_status, stop_lab
from console.fabric.models import Fabric, FabricPartition, Site, SiteLink
from console.management.commands.up import Command as UpCommand
from console.tenancy.models import AuditEntry
from scheduling.models import HCA, Dataset, Node, Pool, Quota
from tests.fabric.conftest import requires_lab


def guids_of(fabric: Fabric) -> set[str]:
    return set(HCA.objects.filter(node__fabric=fabric).values_list("port_guid", flat=True))


@pytest.mark.django_db
def test_demo_seed_adds_a_second_site_with_a_pool_spanning_both():
    created = seed_all()

    fra, ams = Site.objects.get(slug="fra"), Site.objects.get(slug="ams")
    link = SiteLink.objects.get()
    assert (link.a, link.b, link.kind) == (fra, ams, SiteLink.Kind.IB_ROUTER) and link.latency_us > 0
    su1, second = (Fabric.objects.get(revision__design__name=name) for name in DEMO_LAB_DESIGNS)
    assert (su1.site, second.site, second.driver) == (fra, ams, Fabric.Driver.LAB)
    # the second fabric is a subnet of its own: no GUID and no node name shared with the first
    assert len(guids_of(second)) == 64 and not guids_of(second) & guids_of(su1)
    names = set(Node.objects.filter(fabric=second).values_list("name", flat=True))
    assert len(names) == 8 and all(n.startswith("ams-") for n in names)
    # one pool holds the nodes of both sites, at home on the first; Aurora has a quota in it
    pool = Pool.objects.get(name=DEMO_SPANNING_POOL)
    assert pool.fabric == su1
    # the subnet managers run on nodes of their own (the first site's master and standby, the
    # second site's), kept out of the pool (isolation): 32 + 8 nodes less 3
    assert {n.fabric_id for n in pool.nodes.all()} == {su1.pk, second.pk} and pool.nodes.count() == 37
    assert Quota.objects.get(pool=pool).tenant.slug == "aurora"
    # su01-n32 runs the subnet manager: in no pool, the login node every demo tenant reaches
    assert not Pool.objects.filter(nodes__name="su01-n32").exists()
    login = FabricPartition.objects.get(fabric=su1, name="login")
    assert login.source == "service" and sorted(t.slug for t in login.allowed_tenants.all()) == ["aurora", "borealis"]
    assert {m[0] for m in login.members} == set(
        HCA.objects.filter(node__name="su01-n32").values_list("port_guid", flat=True)
    )
    dataset = Dataset.objects.get()
    assert (dataset.tenant.slug, dataset.site) == ("aurora", ams)
    # every row came through an audited write
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"site.create", "site_link.create", "dataset.create", "fabric.update"} <= actions
    assert any("spanning two sites" in line for line in created)
    # and the seed stays idempotent
    assert seed_all() == []


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(180)
@pytest.mark.django_db
def test_up_starts_the_lab_of_each_site_and_stops_both(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    seed_all()
    out = io.StringIO()
    up = UpCommand(stdout=out)

    started = up._start_demo_labs()
    try:
        # both labs run, each bound to its own site's fabric, each with its own socket
        assert [f.revision.design.name for f in started] == list(DEMO_LAB_DESIGNS)
        statuses = [lab_status(f) for f in started]
        assert [s["state"] for s in statuses] == ["up", "up"]
        assert statuses[0]["ibsim_sockname"] != statuses[1]["ibsim_sockname"]
        text = out.getvalue()
        assert "(site Frankfurt, superpod-su1, up" in text and "(site Amsterdam, ams-ft8, up" in text
        # each subnet holds its own fabric's HCAs and none of the other's
        for fabric, other in (started, started[::-1]):
            lab_guids = {f"0x{g:016x}" for g in _discovered(fabric)}
            assert guids_of(fabric) <= lab_guids and not guids_of(other) & lab_guids
    finally:
        for fabric in started:
            stop_lab(fabric)
    assert [lab_status(f)["state"] for f in started] == ["stopped", "stopped"]


def _discovered(fabric: Fabric) -> set[int]:
    from console.fabric.lab.fabrics import lab_for

    return set(lab_for(fabric).diags(timeout=20).ibnetdiscover().port_guids.values())


class DeadPipe(io.StringIO):
    """stdout after ``tee`` died with the terminal: every write is EPIPE."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(180)
@pytest.mark.django_db
def test_the_shutdown_stops_every_lab_when_stdout_is_a_dead_pipe(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    seed_all()
    up = UpCommand(stdout=io.StringIO())
    up.lab_fabrics = started = up._start_demo_labs()
    try:
        assert [lab_status(f)["state"] for f in started] == ["up", "up"]
        # when Ctrl-C reaches `make run | tee`: tee is gone, and up shuts down
        up.stdout = DeadPipe()
        up.shut_down([], None, None)
        # then both labs are stopped, not only the first
        assert [lab_status(f)["state"] for f in started] == ["stopped", "stopped"]
    finally:
        for fabric in started:
            stop_lab(fabric)
    # and a start that finds a lab it did not start says so, and leaves it running on exit
    lab = UpCommand(stdout=io.StringIO())._start_demo_lab(DEMO_LAB_DESIGNS[1])
    assert lab is not None
    try:
        again = UpCommand(stdout=(said := io.StringIO()))
        assert again._start_demo_lab(DEMO_LAB_DESIGNS[1]) is None
        assert "already running, not started by this command" in said.getvalue()
    finally:
        stop_lab(lab)
