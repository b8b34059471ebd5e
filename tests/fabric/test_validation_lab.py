"""The fabric validation suite on the lab (a real OpenSM over ibsim, read through the fabric's
agent): it passes on the healthy fabric through the CLI and the API (a real Celery worker runs
it), and each fault injected on the wire fails its test, naming the offender:

- error counters over the threshold (ibsim's PerformanceSet) fail ``port-errors``;
- a cable pulled while OpenSM is stopped (SIGSTOP: no re-route) leaves the leaf's forwarding
  table pointing at the dead port: ``routes`` names the dead end (and ``cabling`` the missing
  link); OpenSM resumed and the cable back, both pass again;
- a second SM reporting MASTER fails ``subnet-managers`` (a stand-in row: ibsim cannot split a
  subnet into two masters);
- OpenSM's file edited by hand on the SM host fails ``sm-config`` (the isolation audit's drift);
- a rogue SM rewriting a host's P_Key table fails ``pkeys``;
- mlxlink readings in the SM host's PHY directory (ibsim has no PHY): a recorded healthy one
  passes ``phy``, a hot module (``manage.py lab phy set``) fails it, naming the switch port.

One lab for the whole module's story (labs are the slow part)."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.discovery import jobs
from console.fabric.isolation import run_audit
from console.fabric.lab.faults import replug, resolve_port, set_counters, unplug
from console.fabric.models import FabricAgent
from console.telemetry.isolation import apply_audit
from console.telemetry.models import ValidationRun
from console.tenancy.models import Role
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, routing_passes, wait_for_new_routing_pass
from tests.fabric.rogue_sm import rogue_sm, wait_for

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.django_db(transaction=True)]

CODES = {
    "guids",
    "lids",
    "link-rates",
    "subnet-managers",
    "routes",
    "port-errors",
    "pkeys",
    "sm-config",
    "cabling",
    "phy",
}
PHY = Path(__file__).resolve().parents[1] / "data" / "phy"


def validate(fabric, *flags: str) -> dict:
    out = io.StringIO()
    call_command("fabric", "validate", "--fabric", fabric.name, "--json", *flags, stdout=out)
    return json.loads(out.getvalue())


def failing(fabric) -> dict:
    """The suite's report when it fails (the command exits 1 and prints it all the same)."""
    out = io.StringIO()
    with pytest.raises(CommandError, match="validation failed: ") as raised:
        call_command("fabric", "validate", "--fabric", fabric.name, "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert str(raised.value) == "validation failed: " + ", ".join(report["failed"])
    return report


def verdict(report: dict, code: str) -> dict:
    return next(v for v in report["tests"] if v["code"] == code)


def test_the_suite_passes_on_the_healthy_lab_and_catches_each_injected_fault(
    lab_fabric, worker, client, make_user, tenant_a, tmp_path
):
    fabric, lab = lab_fabric("validate")
    change = changes.reconcile(fabric, actor=ACTOR)  # the console's partitions applied: pkeys has work
    if change is not None:  # (the lab's start may have applied them already)
        assert apply_change(change.pk, worker_id="test").status == "applied"

    # healthy: every test passes, through the CLI (phy skipped: the SM host records no PHY)…
    report = validate(fabric)
    assert {v["code"] for v in report["tests"]} == CODES
    assert report["ok"] and report["failed"] == [], report
    assert [v["code"] for v in report["tests"] if v["status"] != "pass"] == ["phy"]
    assert verdict(report, "phy")["why"].startswith("this fabric reports no transceiver temperature or BER")

    # …and the API: queued, run by a worker, polled, its CSV
    client.force_login(make_user("op", Role.OPERATOR))
    posted = client.post(f"/api/fabrics/{fabric.pk}/validation/")
    assert posted.status_code == 202, posted.content
    url = posted.json()["url"]
    deadline = time.monotonic() + 120
    while (run := client.get(url).json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, run
        time.sleep(0.3)
    assert run["state"] == "done" and run["ok"] is True and run["trigger"] == "api", run
    assert [r["id"] for r in client.get(f"/api/fabrics/{fabric.pk}/validation/").json()][:2] == [
        run["id"],
        report["id"],
    ]
    csv = client.get(f"{url}csv/")
    assert csv["Content-Type"].startswith("text/csv")
    assert csv.content.decode().splitlines()[0] == "code,status,offender,fix"
    client.force_login(make_user("tenant", Role.TENANT_MEMBER, tenant_a))
    assert client.post(f"/api/fabrics/{fabric.pk}/validation/").status_code == 403
    assert client.get(url).status_code == 403

    # mlxlink's readings recorded on the SM host (by switch GUID and port), read by its agent
    leaf = lab.node_id(resolve_port(fabric, "su01-leaf-r2", 9)[0])
    phy_dir = Path(lab.workdir) / "phy"
    phy_dir.mkdir(exist_ok=True)
    shutil.copy(PHY / "healthy_ndr_optic.txt", phy_dir / f"0x{leaf[2:]}_7.txt")
    assert verdict(validate(fabric), "phy")["status"] == "pass"
    call_command(
        "lab", "phy", "set", "--fabric", fabric.name, "--node", "su01-leaf-r2", "--port", "9", "temperature=79"
    )
    report = failing(fabric)
    assert report["failed"] == ["phy"]
    (hot,) = verdict(report, "phy")["offenders"]
    assert "su01-leaf-r2" in hot and hot.endswith(f"({leaf}) port 9: module at 79 °C, above 75 °C"), hot
    shutil.rmtree(phy_dir)

    # error counters over the threshold on one leaf port
    set_counters(fabric, "su01-leaf-r2", 5, {"SymbolErrorCounter": 57, "LinkDownedCounter": 3}, actor=ACTOR)
    report = failing(fabric)
    assert report["failed"] == ["port-errors"]
    errors = verdict(report, "port-errors")
    assert errors["count"] == 1
    assert "su01-leaf-r2" in errors["offenders"][0]
    assert errors["offenders"][0].endswith(" port 5: SymbolErrorCounter 57 > 10")
    set_counters(fabric, "su01-leaf-r2", 5, {"SymbolErrorCounter": 0, "LinkDownedCounter": 0}, actor=ACTOR)

    # a cable pulled while OpenSM cannot re-route: the leaf still forwards out of the dead port
    pid = lab.opensm_pid
    assert pid
    os.kill(pid, signal.SIGSTOP)
    try:
        unplug(fabric, "su01-leaf-r1", 33, actor=ACTOR)
        report = failing(fabric)
    finally:
        passes = routing_passes(lab)
        os.kill(pid, signal.SIGCONT)
    routes = verdict(report, "routes")
    assert {"routes", "cabling"} <= set(report["failed"]), report["failed"]
    assert routes["count"] >= 1
    offenders = routes["offenders"]
    assert any("su01-leaf-r1" in o and "out port 33, which leads nowhere (a dead end)" in o for o in offenders)
    # LID-routed reads of a switch whose route crosses the dead port fail too, and say so
    for o in offenders:
        dead_end = "su01-leaf-r1" in o and "out port 33, which leads nowhere" in o
        assert dead_end or o.endswith("its forwarding table could not be read"), o
    assert verdict(report, "cabling")["offenders"] == ["missing: su01-leaf-r1[33] — spine-01[1]"]
    wait_for_new_routing_pass(lab, passes, timeout=30)  # OpenSM resumed: the trap re-routes
    replug(fabric, "su01-leaf-r1", 33, actor=ACTOR)
    # what the leaf sent out of the dead port was discarded: the suite says so until the
    # counters are cleared, as its fix says
    discards = verdict(_report(fabric), "port-errors")["offenders"]
    assert any("su01-leaf-r1" in o and " port 33: PortXmitDiscards " in o for o in discards), discards
    for switch, port in (("su01-leaf-r1", 33), ("spine-01", 1)):
        set_counters(fabric, switch, port, {"PortXmitDiscards": 0}, actor=ACTOR)
    deadline = time.monotonic() + 60
    while not (report := _report(fabric))["ok"]:
        assert time.monotonic() < deadline, [v for v in report["tests"] if v["status"] == "fail"]
        time.sleep(1)

    # a node given another's GUID (ibsim's console): ibnetdiscover keeps one of the two, and the
    # leaf port the other hangs off is up with nothing discovered behind it
    cas = sorted((n for n in lab.topology.nodes.values() if not n.is_switch), key=lambda n: n.node_id)
    twin, other = cas[0], cas[1]
    lab.console(f'Guid "{other.node_id}" 0x{twin.node_id[2:]}')
    try:
        report = failing(fabric)
    finally:
        lab.console(f'Guid "{other.node_id}" 0x{other.node_id[2:]}')
    assert "guids" in report["failed"]
    (dup,) = verdict(report, "guids")["offenders"]
    # (which of the two vanishes depends on the order ibnetdiscover meets them)
    hidden = {
        f"({leaf}) port {port} is Active but nothing was discovered behind it"
        for leaf, port in leaf_ports(lab, twin, other)
    }
    assert any(h in dup for h in hidden), dup
    assert "cabling" in report["failed"]  # the vanished node's link is not where the design puts it
    assert _report(fabric)["ok"]

    # a second subnet manager says MASTER too
    agent = FabricAgent.objects.get(fabric=fabric)
    FabricAgent.objects.create(
        fabric=fabric, name="rogue-sm", prefix="rogue0", connected=True, sm_state="MASTER", secret_hash="x"
    )
    report = failing(fabric)
    assert "subnet-managers" in report["failed"]
    offenders = verdict(report, "subnet-managers")["offenders"]
    assert len(offenders) == 1 and "rogue-sm" in offenders[0] and agent.name in offenders[0]

    FabricAgent.objects.filter(name="rogue-sm").delete()

    # OpenSM's file edited by hand on the SM host: the isolation audit (run as its schedule would)
    # sees the drift and opens config_drift, and sm-config names it
    conf = lab.artefacts.path("opensm.conf")
    lines = conf.read_text().splitlines()
    assert any(line.startswith("sm_key ") for line in lines)
    conf.write_text("\n".join("sm_key 0x0000000000000001" if ln.startswith("sm_key ") else ln for ln in lines) + "\n")
    assert run_audit(fabric, seed=3).drift
    apply_audit(fabric.pk)
    report = failing(fabric)
    assert "sm-config" in report["failed"]
    drift = verdict(report, "sm-config")["offenders"]
    assert any(o.startswith("files: ") and "opensm.conf" in o for o in drift), drift
    conf.write_text("\n".join(lines) + "\n")  # put back (OpenSM never re-read it)

    # a rogue subnet manager on a host rewrites that host's P_Key table (OpenSM's defaults: full
    # member of Default): the isolation audit (run as its schedule would) sees it, so does pkeys
    host = lab.node_id("su01-n03 HCA-1")
    with rogue_sm(lab, host, tmp_path / "rogue"):
        wait_for(lambda: run_audit(fabric, seed=3).default_membership != "limited", 60, "the rogue's tables read")
        report = failing(fabric)
    assert "pkeys" in report["failed"]
    found = verdict(report, "pkeys")["offenders"]
    assert any(o.startswith("isolation audit at ") and "0x7fff" in o for o in found), found
    report = failing(fabric)  # (the last run, for the page below)

    # the fabric page shows the latest run, its failed test and the offender; its button queues one
    client.force_login(make_user("op2", Role.OPERATOR))
    page = client.get(f"/fabrics/{fabric.pk}/?discover=false").content.decode()
    assert f"Validation {report['id']} (cli)" in page
    assert 'data-code="pkeys"' in page and "isolation audit at " in page
    queued = client.post(f"/fabrics/{fabric.pk}/validate/")
    assert queued.status_code == 302 and queued["Location"].endswith("#validation")
    page = client.get(f"/fabrics/{fabric.pk}/?discover=false").content.decode()
    assert f'data-follow-job="/api/fabrics/{fabric.pk}/validation/' in page
    last = ValidationRun.objects.filter(fabric=fabric).first()
    assert last is not None and last.trigger == "page"
    assert jobs.wait(last, 120).state == "done"  # (the worker is done before the lab stops)


def leaf_ports(lab, *cas) -> list[tuple[str, int]]:
    """The switch port each CA's port 1 is cabled to, in the lab's net file."""
    out = []
    for ca in cas:
        link = lab.topology.link_at(ca.node_id, 1)
        assert link is not None
        out.append((link.a_id, link.a_port) if link.b_id == ca.node_id else (link.b_id, link.b_port))
    return out


def _report(fabric) -> dict:
    out = io.StringIO()
    try:
        call_command("fabric", "validate", "--fabric", fabric.name, "--json", stdout=out)
    except CommandError:
        pass
    return json.loads(out.getvalue())
