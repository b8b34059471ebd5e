"""``fabric compare`` says what it compares, and compares a current discovery (issue 14, finding 9);
the lab's cable faults read the port back over SMPs and fail loudly when ibsim did not act.

One 1-SU lab (real OpenSM on ibsim) serves the whole module; every test binds its own Fabric row
to it and leaves every cable plugged in. The cable under test::

    su01-leaf-r1 [33] --- [1] spine-01    (one of the 8 parallel leaf-spine cables)
"""

from __future__ import annotations

import io
import json
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from console.fabric.discovery import services
from console.fabric.lab.faults import read_port, replug, unplug
from console.fabric.lab.manager import Lab
from console.fabric.lab.plan import design_spec, lab_plan
from console.fabric.lab.spec import LabError
from console.fabric.models import DiscoveryRun, Fabric
from console.tenancy.models import AuditEntry
from designer.models import DesignRevision
from designer.plan import plan
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, ONE_SU

su1_revision = lab_fixtures.su1_revision

LEAF, PORT = "su01-leaf-r1", 33
LEAF_SPINE = {"a": "su01-leaf-r1", "a_port": 33, "b": "spine-01", "b_port": 1}
pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180), pytest.mark.django_db]


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The 1-SU design's lab, started once for the module (the design is deterministic: its
    GUIDs are those of every saved 1-SU revision)."""
    workdir: Path = tmp_path_factory.mktemp("compare-lab")
    lab = Lab.start(design_spec(lab_plan(plan(ONE_SU).graph), workdir, f"t-cmp-{uuid.uuid4().hex[:6]}"))
    yield lab
    lab.stop()


@pytest.fixture
def fabric(shared_lab: Lab, su1_revision: DesignRevision, transactional_db, lab_console: str) -> Iterator[Fabric]:
    """A lab Fabric bound to the shared lab, with the lab's agent; its cable is plugged back in
    if a test left it out (and OpenSM's sweep after that awaited, so the next test starts on a
    quiet subnet)."""
    status = shared_lab.status()
    fabric = Fabric.objects.create(
        name=f"cmp-{uuid.uuid4().hex[:6]}",
        driver=Fabric.Driver.LAB,
        revision=su1_revision,
        config={"workdir": status["workdir"], "ibsim_sockname": status["ibsim_sockname"]},
    )
    yield lab_fixtures.with_agent(fabric, lab_console)
    shared_lab.stop_agent()
    node_id = shared_lab.node_id("S-0002c90200000001")  # su01-leaf-r1
    if read_port(shared_lab, node_id, PORT).is_down:
        _after_sweep(shared_lab, lambda: shared_lab.replug(node_id, PORT))


def _ends(entry: dict) -> dict:
    return {k: entry[k] for k in ("a", "a_port", "b", "b_port")}


def _after_sweep(lab: Lab, action: Callable[[], object], timeout: float = 20.0) -> None:
    """Run ``action`` (a cable fault) and return once OpenSM ended a heavy sweep after it."""
    mark = lab.sweep_mark()
    action()
    deadline = time.monotonic() + timeout
    while not lab.swept_since(mark):
        assert time.monotonic() < deadline, f"OpenSM logged no end of sweep within {timeout}s"
        time.sleep(0.1)


def _cli(*args: str) -> str:
    out = io.StringIO()
    call_command("fabric", *args, stdout=out)
    return out.getvalue()


def test_a_replugged_cable_is_no_longer_missing_at_the_next_compare(fabric, shared_lab):
    # given a compare that found the leaf uplink missing
    _after_sweep(shared_lab, lambda: unplug(fabric, LEAF, PORT, actor=ACTOR))
    missing = services.compare(fabric)
    assert [_ends(m) for m in missing["missing"]] == [LEAF_SPINE] and missing["discovered_now"]
    stored_id = missing["discovery_id"]
    # when the cable goes back in and OpenSM sweeps (well within the 10 s age limit)
    _after_sweep(shared_lab, lambda: replug(fabric, LEAF, PORT, actor=ACTOR))
    # then the next default compare discovers afresh and the cable is no longer missing
    again = services.compare(fabric)
    assert again["ok"] and not again["missing"], again["fixes"][:3]
    assert again["discovered_now"] and again["discovery_id"] != stored_id
    assert "OpenSM ended a heavy sweep" in again["freshness"]["note"]
    # and --no-discover compares the stored discovery (now the fresh one) without a new sweep
    reused = json.loads(_cli("compare", "--fabric", fabric.name, "--no-discover", "--json"))
    assert reused["discovery_id"] == again["discovery_id"] and not reused["discovered_now"]


def test_no_discover_reuses_the_stale_discovery_and_says_how_old_it_is(fabric, shared_lab):
    # given a stored discovery with the uplink missing
    _after_sweep(shared_lab, lambda: unplug(fabric, LEAF, PORT, actor=ACTOR))
    stored = services.compare(fabric)["discovery_id"]
    _after_sweep(shared_lab, lambda: replug(fabric, LEAF, PORT, actor=ACTOR))
    runs = DiscoveryRun.objects.filter(fabric=fabric).count()
    # when compared with --no-discover, it is reused (stale: OpenSM swept since) and says so
    text = _cli("compare", "--fabric", fabric.name, "--no-discover")
    body = json.loads(_cli("compare", "--fabric", fabric.name, "--no-discover", "--json"))
    assert DiscoveryRun.objects.filter(fabric=fabric).count() == runs  # nothing discovered
    assert body["discovery_id"] == stored and not body["discovered_now"]
    assert [_ends(m) for m in body["missing"]] == [LEAF_SPINE]
    assert body["freshness"]["stale"] and body["freshness"]["sm_swept_since"] is True
    assert body["discovered_at"] == DiscoveryRun.objects.get(pk=stored).created_at.isoformat()
    assert 0 < body["discovery_age_s"] < 60
    first_line = text.splitlines()[0]
    assert first_line.startswith(f"discovery {stored} of ") and " s old (reused as asked" in first_line
    assert "WARNING: the fabric may have changed" in text and "missing    su01-leaf-r1[33]" in text
    # and the service behind the API flag (discover=false) does the same
    response = services.compare(fabric, refresh=False)
    assert response["discovery_id"] == stored and response["freshness"]["stale"]


def test_an_unplug_after_a_compare_shows_in_the_next_compare(fabric, shared_lab):
    # given a compare of the healthy fabric
    first = services.compare(fabric)
    assert first["ok"] and first["discovered_now"]
    # when the uplink is pulled right after it (well within the 10 s age limit)
    _after_sweep(shared_lab, lambda: unplug(fabric, LEAF, PORT, actor=ACTOR))
    # then the next compare discovers afresh and reports it
    after = json.loads(_cli("compare", "--fabric", fabric.name, "--json"))
    assert [_ends(m) for m in after["missing"]] == [LEAF_SPINE] and after["discovered_now"]
    assert after["discovery_id"] != first["discovery_id"]


def test_a_current_discovery_is_reused_and_an_old_one_is_not(fabric, shared_lab, settings):
    first = services.compare(fabric)
    # a compare right after: the same discovery, its age stated
    second = services.compare(fabric)
    assert second["discovery_id"] == first["discovery_id"] and not second["discovered_now"]
    assert second["freshness"]["sm_swept_since"] is False and not second["freshness"]["stale"]
    assert second["freshness"]["note"].startswith(f"reused: discovery {first['discovery_id']} is ")
    # a discovery older than the limit is discovered afresh, even with no sweep since
    DiscoveryRun.objects.filter(pk=first["discovery_id"]).update(
        created_at=DiscoveryRun.objects.get(pk=first["discovery_id"]).created_at - timedelta(seconds=60)
    )
    third = services.compare(fabric)
    assert third["discovered_now"] and third["discovery_id"] != first["discovery_id"]
    assert "s old (limit 10 s) and OpenSM has not swept since" in third["freshness"]["note"]
    # the limit is a setting (FABRIC_COMPARE_MAX_AGE_S)
    settings.FABRIC_COMPARE_MAX_AGE_S = 0.0
    assert services.compare(fabric)["discovered_now"]


def test_compare_api_discovers_by_default_and_reuses_with_discover_false(
    fabric, shared_lab, client_for, auditor, worker
):
    # a stale compare queues a discovery that a real worker runs; the request waits for it
    api = client_for(auditor)
    url = f"/api/fabrics/{fabric.pk}/compare/"
    assert api.get(url, {"discover": "false"}).status_code == 404  # nothing stored yet
    fresh = api.get(url)
    assert fresh.status_code == 200, fresh.content
    body = fresh.json()
    assert body["discovered_now"] and body["ok"] and body["discovery_age_s"] >= 0
    assert set(body["freshness"]) == {"max_age_s", "sm_swept_since", "stale", "note"}
    _after_sweep(shared_lab, lambda: unplug(fabric, LEAF, PORT, actor=ACTOR))
    stale = api.get(url, {"discover": "false"}).json()
    assert stale["discovery_id"] == body["discovery_id"] and stale["ok"] and stale["freshness"]["stale"]
    current = api.get(url).json()
    assert current["discovered_now"] and [_ends(m) for m in current["missing"]] == [LEAF_SPINE]
    assert api.get(url, {"discover": "maybe"}).status_code == 400
    assert AuditEntry.objects.filter(action="fabric.discover", object_id=str(fabric.pk)).count() == 2
    run = api.get(f"/api/fabrics/{fabric.pk}/discovery/").json()
    assert run["id"] == current["discovery_id"] and run["age_s"] >= 0


def test_fabric_page_states_the_discovery_time_and_age(fabric, shared_lab, client, operator, worker):
    client.force_login(operator)
    url = reverse("web:fabric", args=[fabric.pk])
    assert b"No discovery yet" in client.get(url, {"discover": "false"}).content
    page = client.get(url).content.decode()
    run = DiscoveryRun.objects.get(fabric=fabric)
    assert 'data-testid="discovered-now"' in page and f"Compared discovery {run.pk} of" in page
    assert run.created_at.strftime("%Y-%m-%d %H:%M:%S") in page and " s old</strong>" in page
    _after_sweep(shared_lab, lambda: unplug(fabric, LEAF, PORT, actor=ACTOR))
    stale = client.get(url, {"discover": "false"}).content.decode()
    assert 'data-testid="discovery-stale"' in stale and "matches the design" in stale
    current = client.get(url).content.decode()
    assert "differs from the design" in current and "connect su01-leaf-r1 port 33 to spine-01 port 1" in current


# -- cable faults read back over SMPs -----------------------------------------------------------


def test_cable_faults_are_read_back_and_fail_loudly_when_ibsim_does_not_act(fabric, shared_lab):
    done = unplug(fabric, LEAF, PORT, actor=ACTOR)
    assert done.as_dict()["before"] == "Active/LinkUp" and done.after.is_down
    # pulling it again: ibsim answers "# port 33 ... is not linked" and does nothing
    with pytest.raises(LabError, match=r"ibsim did not act, the cable was already out \(the port read Down/"):
        unplug(fabric, LEAF, PORT, actor=ACTOR)
    back = replug(fabric, LEAF, PORT, actor=ACTOR)
    assert back.as_dict()["before"].startswith("Down/") and back.after.phys_state == "LinkUp"
    # putting back a cable that is in: ibsim answers "# no previous link stored" and does nothing
    with pytest.raises(LabError, match="ibsim did not act, the cable was already in"):
        replug(fabric, LEAF, PORT, actor=ACTOR)
    actions = list(
        AuditEntry.objects.filter(object_id=str(fabric.pk), action__startswith="fabric.lab.").values_list(
            "action", flat=True
        )
    )
    assert sorted(actions) == ["fabric.lab.replug", "fabric.lab.unplug"]  # the no-ops are not faults
    text = io.StringIO()
    call_command("lab", "cable", "unplug", "--fabric", fabric.name, "--node", LEAF, "--port", str(PORT), stdout=text)
    assert "/LinkUp → Down/Polling" in text.getvalue() and "read back over SMP" in text.getvalue()
    with pytest.raises(Exception, match="ibsim did not act"):
        call_command("lab", "cable", "unplug", "--fabric", fabric.name, "--node", LEAF, "--port", str(PORT))
