"""Discovery and design-vs-actual compare: pure comparisons first, then the real lab (OpenSM on
ibsim), the REST endpoints and the console page.

The 1-SU design cables every rail leaf to every spine with 8 parallel links::

    su01-n01..n32 [HCA-r] --- [1..32] su01-leaf-r<r> [33..64] === 8 × spine-01..04
"""

from __future__ import annotations

import io
import time

import pytest
from django.urls import reverse

from console.fabric.discovery import jobs, services
from console.fabric.discovery.compare import (
    LAB_SPEED_POLICY,
    SpeedPolicy,
    compare_topology,
    discovered_topology,
)
from console.fabric.discovery.sources import DiscoveryFailed
from console.fabric.lab.fabrics import stop_lab
from console.fabric.lab.faults import replug, unplug
from console.fabric.models import DiscoveryJob, DiscoveryRun
from console.management.commands.up import Command as UpCommand
from console.tenancy.models import AuditEntry
from designer.exports import export
from designer.imports.ibnetdiscover import parse_ibnetdiscover
from designer.plan import plan
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, ONE_SU, routing_passes, wait_for_new_routing_pass

# Fixtures shared with the other lab test modules.
lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

LEAF_SPINE = {"a": "su01-leaf-r1", "a_port": 33, "b": "spine-01", "b_port": 1}


def _ends(entry: dict) -> dict:
    return {k: entry[k] for k in ("a", "a_port", "b", "b_port")}


# -- pure: no lab, no database ---------------------------------------------------------------


@pytest.fixture(scope="module")
def one_su():
    """The 1-SU graph and its planned discovery (the export parsed back, rates as designed)."""
    graph = plan(ONE_SU).graph
    disc = parse_ibnetdiscover(export(graph, "ibnetdiscover")[0])
    return graph, discovered_topology(disc, graph)


def _without(topology: dict, *removed: tuple[str, int]) -> dict:
    links = [row for row in topology["links"] if (row[0], row[1]) not in removed]
    links = [row for row in links if (row[2], row[3]) not in removed]
    return {"nodes": topology["nodes"], "links": links}


def test_planned_discovery_matches_its_design(one_su):
    graph, topology = one_su
    result = compare_topology(graph, topology)
    assert result["ok"] and result["summary"]["matched"] == 512 == len(topology["links"])
    assert not (result["missing"] or result["extra"] or result["miswired"] or result["fixes"])
    spine = next(n for n in topology["nodes"] if n["name"] == "spine-01")
    assert spine["guid"] == f"0x{graph.switches['spine-01'].guid:016x}"


def test_missing_cable_gets_a_fix_an_engineer_can_follow(one_su):
    graph, topology = one_su
    result = compare_topology(graph, _without(topology, ("su01-leaf-r1", 33)))
    assert [_ends(m) for m in result["missing"]] == [LEAF_SPINE]
    assert result["missing"][0]["cable"] == "NDR-MMF"
    assert result["fixes"][0].startswith("connect su01-leaf-r1 port 33 to spine-01 port 1 with NDR-MMF (racks ")
    assert not result["ok"]


def test_swapped_cables_are_miswired_and_the_fix_pulls_then_plugs(one_su):
    graph, topology = one_su
    links = []
    for a, ap, b, bp, rate in topology["links"]:
        if (a, ap) == ("su01-leaf-r1", 33):
            bp = 2  # leaf-r1[33] landed on spine-01[2] and leaf-r1[34] on spine-01[1]
        elif (a, ap) == ("su01-leaf-r1", 34):
            bp = 1
        links.append([a, ap, b, bp, rate])
    result = compare_topology(graph, {"nodes": topology["nodes"], "links": links})
    assert not result["missing"] and not result["extra"]
    assert {(m["a_port"], m["b_port"]) for m in result["miswired"]} == {(33, 1), (34, 2)}
    fixes = result["fixes"]
    disconnects = [f for f in fixes if f.startswith("disconnect")]
    connects = [f for f in fixes if f.startswith("connect")]
    assert len(disconnects) == 2 and len(connects) == 2 and fixes == disconnects + connects
    assert any("su01-leaf-r1 port 33 from spine-01 port 2" in f for f in disconnects)


def test_extra_cable_and_unknown_device_are_reported(one_su):
    graph, topology = one_su
    # every port of the 1-SU design is cabled, so an extra cable joins devices it does not know
    links = [*topology["links"], ["rogue-switch", 2, "storage-01 HCA-1", 1, "4xNDR"]]
    nodes = [
        *topology["nodes"],
        {"name": "rogue-switch", "kind": "switch", "known": False},
        {"name": "storage-01 HCA-1", "kind": "ca", "known": False},
    ]
    result = compare_topology(graph, {"nodes": nodes, "links": links})
    assert [_ends(e) for e in result["extra"]] == [
        {"a": "rogue-switch", "a_port": 2, "b": "storage-01 HCA-1", "b_port": 1}
    ]
    assert result["summary"]["unknown_devices"] == ["rogue-switch", "storage-01 HCA-1"]
    assert result["fixes"] == [
        "disconnect the cable between rogue-switch port 2 and storage-01 HCA-1 port 1: it is not in the design"
    ]
    # a cable from a designed port to a stranger is miswired, not extra: the port is taken
    unplugged = _without(topology, ("spine-01", 64))["links"]
    taken = [*unplugged, ["spine-01", 64, "rogue-switch", 1, "4xNDR"]]
    result = compare_topology(graph, {"nodes": nodes, "links": taken})
    assert not result["extra"] and result["miswired"]


def test_rates_are_checked_on_real_fabrics_and_explained_in_the_lab(one_su):
    graph, topology = one_su
    links = [[a, ap, b, bp, "4xSDR"] for a, ap, b, bp, _ in topology["links"]]
    slow = {"nodes": topology["nodes"], "links": links}
    real = compare_topology(graph, slow, speed=SpeedPolicy())
    assert len(real["mismatches"]) == 512 and not real["ok"]
    assert real["mismatches"][0]["expected"] == "4xNDR"
    assert "runs at 4xSDR" in real["fixes"][0]
    lab = compare_topology(graph, slow, speed=LAB_SPEED_POLICY)
    assert lab["ok"] and not lab["mismatches"]
    assert lab["speed_check"] == {"checked": False, "reason": LAB_SPEED_POLICY.reason}
    assert "4X SDR" in lab["speed_check"]["reason"]


# -- the real lab ---------------------------------------------------------------------------


def lab_test(fn):
    """Marks of a test against the real lab: tools present, own lab, bounded, database."""
    for mark in (requires_lab, pytest.mark.lab, pytest.mark.timeout(180), pytest.mark.django_db):
        fn = mark(fn)
    return fn


def _discover_until(fabric, predicate, timeout: float = 15.0) -> dict:
    """Discover + compare until ``predicate(result)`` holds (OpenSM re-sweeps asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        services.discover(fabric, actor=ACTOR)
        result = services.compare(fabric)
        if predicate(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


@lab_test
def test_pristine_lab_matches_and_is_stored_with_real_guids_and_lids(lab_fabric):
    fabric, _ = lab_fabric("pristine")
    run = services.discover(fabric, actor=ACTOR)
    result = services.compare(fabric)
    assert result["ok"], result["fixes"][:5]
    assert (result["fabric_id"], result["discovery_id"]) == (fabric.pk, run.pk)
    assert not (result["missing"] or result["extra"] or result["miswired"])
    assert result["routing"]["in_use"] == "ftree" and result["routing"]["fallback"] is False
    assert result["speed_check"]["checked"] is False  # lab: ibsim reports 4X SDR everywhere
    stored = DiscoveryRun.objects.get(pk=run.pk)
    assert stored.summary["switches"] == 12 and stored.summary["cas"] == 256
    answer_only = ("discovery_age_s", "discovered_now", "freshness")  # stated per answer, never stored
    assert stored.compare == {k: v for k, v in result.items() if k not in answer_only}
    assert stored.routing == result["routing"]
    leaf = next(n for n in stored.topology["nodes"] if n["name"] == "su01-leaf-r1")
    assert leaf["guid"] == "0x0002c90200000001" and leaf["lid"] > 0
    hca = next(n for n in stored.topology["nodes"] if n["name"] == "su01-n01 HCA-1")
    assert hca["guid"] == "0x0002c90300000000" and hca["lids"]["1"] > 0
    assert all(row[4] == "4xSDR" for row in stored.topology["links"])
    assert AuditEntry.objects.filter(action="fabric.discover", object_id=str(fabric.pk)).exists()
    # the validation tests pass on the healthy lab, its agent's OpenSM the one master
    assert [(v["code"], v["status"]) for v in stored.summary["validation"]] == [
        ("guids", "pass"),
        ("lids", "pass"),
        ("link-rates", "pass"),
        ("subnet-managers", "pass"),
    ]


@lab_test
def test_unplugged_cable_is_exactly_the_missing_link_and_replug_clears_it(lab_fabric):
    fabric, lab = lab_fabric("unplug")
    assert services.compare(fabric)["ok"]  # no run yet: compare discovers first
    passes = routing_passes(lab)
    # when one leaf-spine cable of the 8-cable bundle su01-leaf-r1 -- spine-01 is pulled
    unplug(fabric, "su01-leaf-r1", 33, actor=ACTOR)
    wait_for_new_routing_pass(lab, passes)  # OpenSM re-routed after the link-down trap
    result = _discover_until(fabric, lambda r: bool(r["missing"]))
    # then compare reports exactly that link, and the fix puts it back
    assert [_ends(m) for m in result["missing"]] == [LEAF_SPINE]
    assert not result["extra"] and not result["miswired"] and not result["ok"]
    assert len(result["fixes"]) == 1
    assert result["fixes"][0].startswith("connect su01-leaf-r1 port 33 to spine-01 port 1 with NDR-MMF")
    # Observed with OpenSM 3.3.23: with the design's root GUID file, ftree still routes the
    # fabric with one bundle member down (every leaf keeps 4 up-port groups), so there is no
    # fallback to report; the routing check says so from the new routing pass.
    assert result["routing"]["in_use"] == "ftree" and result["routing"]["fallback"] is False
    # when it is plugged back, the comparison clears
    replug(fabric, "su01-leaf-r1", 33, actor=ACTOR)
    cleared = _discover_until(fabric, lambda r: r["ok"])
    assert cleared["ok"] and not cleared["missing"], cleared["fixes"]
    assert cleared["routing"]["fallback"] is False


@lab_test
def test_unplugged_hca_cable_is_reported_with_its_hca_name(lab_fabric):
    fabric, _ = lab_fabric("hca")
    unplug(fabric, "su01-n05", 3, actor=ACTOR)  # su01-n05 HCA-3 -- su01-leaf-r3[5]
    result = _discover_until(fabric, lambda r: bool(r["missing"]))
    assert [_ends(m) for m in result["missing"]] == [{"a": "su01-n05", "a_port": 3, "b": "su01-leaf-r3", "b_port": 5}]
    assert result["fixes"][0].startswith("connect su01-n05 port 3 (HCA-3) to su01-leaf-r3 port 5 with ")


@lab_test
def test_up_discovers_a_new_lab_through_its_agent_once_and_a_stopped_lab_says_so(lab_fabric, worker):
    fabric, _ = lab_fabric("stopped")
    # `manage.py up` queues one discovery of a lab never discovered (ports table, drift) once its
    # agent reports the master; a worker runs it through the agent
    up = UpCommand(stdout=io.StringIO())
    up.lab_fabrics = (fabric,)
    up._first_discoveries()
    job = DiscoveryJob.objects.get(fabric=fabric)
    deadline = time.monotonic() + 60
    while DiscoveryJob.objects.get(pk=job.pk).state in DiscoveryJob.ACTIVE:
        assert time.monotonic() < deadline, "the first discovery did not run"
        time.sleep(0.1)
    job.refresh_from_db()
    assert job.state == DiscoveryJob.State.DONE and DiscoveryRun.objects.get(fabric=fabric).pk == job.run_id
    up._first_discoveries()  # discovered already: nothing more
    assert DiscoveryJob.objects.filter(fabric=fabric).count() == 1
    # the lab stopped (its agent with it): a discovery says what it waits for
    stop_lab(fabric)
    with pytest.raises(DiscoveryFailed, match="agent of fabric .* none connected"):
        services.discover(fabric, actor=ACTOR)


# -- REST and the console page ----------------------------------------------------------------


def _job_until_done(client, url: str, timeout: float = 60.0) -> dict:
    """Poll a discovery job as a script would, until it is no longer queued or running."""
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(url).json()
        if job["state"] not in ("queued", "running") or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


@lab_test
def test_discovery_api_queues_a_job_for_operators_reads_for_auditors_and_403s_tenants(
    lab_fabric, worker, client_for, operator, auditor, admin_a, member_a, settings
):
    fabric, _ = lab_fabric("api")
    url = f"/api/fabrics/{fabric.pk}/discovery/"
    compare_url = f"/api/fabrics/{fabric.pk}/compare/"
    op, aud = client_for(operator), client_for(auditor)
    assert op.get(url).status_code == 404  # nothing discovered yet
    queued = op.post(url)
    assert queued.status_code == 202, queued.content  # the web request only queues it
    job = queued.json()
    assert job["state"] == "queued" and job["url"] == f"{url}jobs/{job['id']}/"
    done = _job_until_done(aud, job["url"])
    assert done["state"] == "done" and done["error"] == "" and done["discovery_id"], done
    assert done["started_at"] and done["finished_at"]
    latest = aud.get(url)
    assert latest.status_code == 200 and latest.json()["id"] == done["discovery_id"]
    assert latest.json()["compare"]["ok"] is True
    assert "topology" not in latest.json()
    assert len(aud.get(url, {"topology": "1"}).json()["topology"]["links"]) == 512
    body = aud.get(compare_url).json()  # current: the stored one
    for key in ("fabric_id", "discovery_id", "missing", "extra", "miswired", "mismatches", "fixes", "routing", "ok"):
        assert key in body, key
    assert body["discovery_id"] == done["discovery_id"] and body["discovered_now"] is False
    assert set(body["routing"]) >= {"configured", "in_use", "fallback", "evidence"}
    # stale: the compare queues a discovery and waits for the worker
    settings.FABRIC_COMPARE_MAX_AGE_S = 0
    fresh = aud.get(compare_url)
    assert fresh.status_code == 200 and fresh.json()["discovery_id"] > done["discovery_id"]
    assert fresh.json()["discovered_now"] is True
    # ... or answers 202 with the job when it does not finish in time
    settings.FABRIC_COMPARE_WAIT_S = 0
    pending = aud.get(compare_url)
    assert pending.status_code == 202 and pending.json()["state"] in ("queued", "running")
    assert _job_until_done(aud, pending.json()["url"])["state"] == "done"
    assert aud.post(url).status_code == 403  # auditors read only
    for user in (admin_a, member_a):
        client = client_for(user)
        assert client.get(url).status_code == 403
        assert client.post(url).status_code == 403
        assert client.get(compare_url).status_code == 403
        assert client.get(job["url"]).status_code == 403
    assert op.get("/api/fabrics/999999/discovery/").status_code == 404
    assert op.get(f"/api/fabrics/999999/discovery/jobs/{job['id']}/").status_code == 404
    stop_lab(fabric)
    failed = _job_until_done(op, op.post(url).json()["url"])
    assert failed["state"] == "failed" and "none connected" in failed["error"], failed
    assert AuditEntry.objects.filter(action="fabric.discover_requested", object_id=str(fabric.pk)).count() == 4


@lab_test
def test_fabric_pages_show_the_lab_and_follow_a_discovery_job(lab_fabric, client, operator, member_a, settings):
    fabric, lab = lab_fabric("page")
    settings.FABRIC_COMPARE_WAIT_S = 0  # no worker here: the test runs the queued job itself
    client.force_login(operator)
    listing = client.get(reverse("web:fabrics"))
    assert listing.status_code == 200 and fabric.name.encode() in listing.content
    assert b"No discovery yet" in client.get(reverse("web:fabric", args=[fabric.pk]), {"discover": "false"}).content
    page = client.get(reverse("web:fabric", args=[fabric.pk]))
    assert page.status_code == 200
    assert lab.status()["ibsim_sockname"].encode() in page.content  # the env line
    # a first visit queues a discovery and follows it: its state, followed in place
    (job,) = DiscoveryJob.objects.filter(fabric=fabric)
    assert f'Discovery job {job.pk} <span data-job-field="state">queued</span>'.encode() in page.content
    assert f'data-follow-job="/api/fabrics/{fabric.pk}/discovery/jobs/{job.pk}/"'.encode() in page.content
    jobs.run(job.pk)  # what the worker does
    page = client.get(reverse("web:fabric", args=[fabric.pk]))
    assert b"Compared discovery" in page.content and b"data-follow-job" not in page.content
    assert b"matches the design" in page.content and b"not checked" in page.content
    # the button queues another and the page follows it to its end
    response = client.post(reverse("web:fabric", args=[fabric.pk]))
    second = DiscoveryJob.objects.filter(fabric=fabric).exclude(pk=job.pk).get()
    assert response.status_code == 302 and response["Location"].endswith(f"?job={second.pk}")
    jobs.run(second.pk)
    page = client.get(response["Location"])
    second.refresh_from_db()
    assert f"Discovery job {second.pk} done: discovery {second.run_id}".encode() in page.content
    stop_lab(fabric)
    response = client.post(reverse("web:fabric", args=[fabric.pk]))
    third = DiscoveryJob.objects.filter(fabric=fabric, state="queued").get()
    jobs.run(third.pk)
    page = client.get(response["Location"] + "&discover=false")
    assert f"Discovery job {third.pk} failed".encode() in page.content and b"not running" in page.content
    client.force_login(member_a)
    assert client.get(reverse("web:fabrics")).status_code == 404
    assert client.get(reverse("web:fabric", args=[fabric.pk])).status_code == 404
