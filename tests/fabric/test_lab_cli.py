"""``manage.py lab``: up, status --json, side by side, cable unplug/replug, counters, down, and
clear errors (non-zero exit) when the lab is not running or the packages are missing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from console.fabric.lab.fabrics import lab_for, stop_lab
from console.fabric.models import Fabric
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab

# Fixtures shared with the other lab test modules.
lab_data_dir = lab_fixtures.lab_data_dir
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180), pytest.mark.django_db]
STATUS_KEYS = ("ibsim_sockname", "umad2sim", "sm_host", "opensm_pid", "state", "fabric_id")
ROOT = Path(__file__).resolve().parents[2]


def lab(*args: str) -> dict | list:
    """Run ``manage.py lab … --json`` in-process and parse its output."""
    out = io.StringIO()
    call_command("lab", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def cli_labs(lab_data_dir):
    """Names of fabrics whose labs the test starts through the CLI; all stopped afterwards."""
    names: list[str] = []
    yield names
    for fabric in Fabric.objects.filter(name__in=names):
        stop_lab(fabric)


def test_up_status_and_down(su1_revision, cli_labs, lab_data_dir):
    cli_labs.append("cli-a")
    ref = f"{su1_revision.design_id}/{su1_revision.number}"
    up = lab("up", "--design", ref, "--name", "cli-a")
    for key in STATUS_KEYS:
        assert up[key], key
    assert up["state"] == "up" and up["routing"] == {
        "configured": "ftree",
        "in_use": "ftree",
        "fallback": False,
    }
    assert up["workdir"].startswith(str(lab_data_dir.resolve()))
    assert up["env_line"] == (
        f"export LD_PRELOAD={up['umad2sim']} IBSIM_SOCKNAME={up['ibsim_sockname']} SIM_HOST={up['sm_host']}"
    )
    status = lab("status", "--fabric", "cli-a")
    assert {k: status[k] for k in STATUS_KEYS} == {k: up[k] for k in STATUS_KEYS}
    # the env line really points infiniband-diags at the lab
    env = dict(os.environ, **up["env"])
    found = subprocess.run(["ibnetdiscover"], env=env, capture_output=True, text=True, timeout=30)
    assert found.returncode == 0 and '"MF0;spine-01:MQM9700/U1"' in found.stdout
    # lab up again (by design name this time) reuses the running lab
    again = lab("up", "--design", su1_revision.design.name, "--name", "cli-a")
    assert (again["fabric_id"], again["opensm_pid"]) == (up["fabric_id"], up["opensm_pid"])
    down = lab("down", "--fabric", str(up["fabric_id"]))
    assert down["state"] == "stopped"
    assert lab("status", "--fabric", "cli-a")["state"] == "stopped"
    text = io.StringIO()
    call_command("lab", "status", "--fabric", "cli-a", stdout=text)
    assert "lab stopped" in text.getvalue()


def test_two_labs_side_by_side_and_status_lists_both(su1_revision, cli_labs):
    cli_labs.extend(["side-a", "side-b"])
    ref = str(su1_revision.design_id)
    a = lab("up", "--design", ref, "--name", "side-a")
    b = lab("up", "--design", ref, "--name", "side-b")
    assert a["ibsim_sockname"] != b["ibsim_sockname"] and a["fabric_id"] != b["fabric_id"]
    rows = {row["fabric"]: row for row in lab("status")}
    assert rows["side-a"]["state"] == rows["side-b"]["state"] == "up"


def test_cable_and_counter_faults(su1_revision, cli_labs):
    cli_labs.append("faults")
    up = lab("up", "--design", str(su1_revision.design_id), "--name", "faults")
    fabric = Fabric.objects.get(pk=up["fabric_id"])
    diags = lab_for(fabric).diags()
    lids = {n.name: n.lid for n in diags.ibnetdiscover().nodes.values()}
    leaf = lids["MF0;su01-leaf-r2:MQM9700/U1"]
    fault = ["--fabric", "faults", "--node", "su01-leaf-r2", "--port", "35"]
    assert lab("cable", "unplug", *fault)["ok"]
    assert diags.portinfo(leaf, 35).is_down
    assert lab("cable", "replug", *fault)["ok"]
    assert not diags.portinfo(leaf, 35).is_down
    set_ = lab(
        "counters",
        "set",
        "--fabric",
        "faults",
        "--node",
        "su01-n02",
        "--port",
        "1",
        "SymbolErrorCounter=9",
        "LinkDownedCounter=2",
    )
    assert set_["counters"] == {"SymbolErrorCounter": 9, "LinkDownedCounter": 2}
    counters = diags.perfquery(lids["su01-n02 HCA-1"], 1)
    assert (counters["SymbolErrorCounter"], counters["LinkDownedCounter"]) == (9, 2)
    with pytest.raises(CommandError, match="COUNTER=VALUE"):
        call_command("lab", "counters", "set", *fault, "SymbolErrorCounter")
    with pytest.raises(CommandError, match="no node"):
        call_command("lab", "cable", "unplug", "--fabric", "faults", "--node", "x", "--port", "1")
    lab("down", "--fabric", "faults")
    with pytest.raises(CommandError, match="not running"):
        call_command("lab", "cable", "unplug", *fault)


def test_clear_errors_for_unknown_names_and_missing_packages(su1_revision, monkeypatch):
    with pytest.raises(CommandError, match="no design revision"):
        call_command("lab", "up", "--design", "no-such-design")
    with pytest.raises(CommandError, match="no fabric"):
        call_command("lab", "status", "--fabric", "no-such-fabric")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CommandError, match="apt-get install opensm ibsim-utils infiniband-diags"):
        call_command("lab", "up", "--design", str(su1_revision.design_id))


def test_errors_exit_non_zero_with_a_message(subprocess_env):
    proc = subprocess.run(
        [sys.executable, "manage.py", "lab", "down", "--fabric", "no-such-fabric-xyz"],
        cwd=ROOT,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "no fabric 'no-such-fabric-xyz'" in proc.stderr
