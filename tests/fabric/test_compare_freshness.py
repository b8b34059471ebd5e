"""The lab's cable faults read the port back over SMPs and fail loudly when ibsim did not act.

One 1-SU lab (real OpenSM on ibsim) serves the whole module; every test binds its own Fabric row
to it and leaves every cable plugged in. The cable under test::

    su01-leaf-r1 [33] --- [1] spine-01    (one of the 8 parallel leaf-spine cables)
"""

from __future__ import annotations

import io
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.management import call_command

from console.fabric.lab.faults import read_port, replug, unplug
from console.fabric.lab.manager import Lab
from console.fabric.lab.plan import design_spec, lab_plan
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
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
def fabric(shared_lab: Lab, su1_revision: DesignRevision) -> Iterator[Fabric]:
    """A lab Fabric bound to the shared lab; its cable is plugged back in if a test left it out
    (and OpenSM's sweep after that awaited, so the next test starts on a quiet subnet)."""
    status = shared_lab.status()
    fabric = Fabric.objects.create(
        name=f"cmp-{uuid.uuid4().hex[:6]}",
        driver=Fabric.Driver.LAB,
        revision=su1_revision,
        config={"workdir": status["workdir"], "ibsim_sockname": status["ibsim_sockname"]},
    )
    yield fabric
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
