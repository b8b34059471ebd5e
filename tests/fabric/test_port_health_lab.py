"""Unhealthy ports isolated with reasons, on the lab (a real OpenSM over ibsim, the collector
reading through the fabric's agent): a reservation's host link driven over the policy's
threshold with ``manage.py lab counters set``. In dry run the decision is recorded — the readings
that caused it, the reservation whose traffic crosses the port — and nothing changes on the
wire; with the policy live the same port is disabled through the change pipeline (read back on
the wire), its administered state carrying the reason."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from jsonschema import Draft202012Validator

from console.fabric.changes.pipeline import apply_change
from console.fabric.models import ChangeRequest, PortAdminState
from console.notify.models import Event as NotifyEvent
from console.notify.schemas import schema_for
from console.telemetry.collector import CollectorOptions, FabricCollector
from console.telemetry.models import PortDecision
from console.telemetry.port_health import set_policy
from console.tenancy.models import AuditEntry, Principal, Role
from scheduling.models import Reservation
from scheduling.services import quotas
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, book, converge, whole_lab_pool

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.django_db(transaction=True)]
OPERATOR = Principal(None, Role.OPERATOR, None)
RULES = [{"counter": "SymbolErrorCounter", "threshold": 10, "window_s": 3600}]
PHY = Path(__file__).resolve().parents[1] / "data" / "phy"


def set_symbol_errors(fabric, node: str, port: int, value: int) -> None:
    out = io.StringIO()
    argv = ["counters", "set", "--fabric", fabric.name, "--node", node, "--port", str(port)]
    call_command("lab", *argv, f"SymbolErrorCounter={value}", stdout=out)


def test_a_port_over_the_threshold_is_recorded_in_dry_run_then_disabled_with_its_reason(
    lab_fabric, tenant_a, client, make_user
):
    fabric, lab = lab_fabric("health")
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    reservation = book(pool, tenant_a, 16, "health-16")
    converge(fabric)
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.READY
    sm_node = fabric.config["sm_host_name"].split(" ")[0]  # (disabling its port would cut the SM off)
    nodes = reservation.allocations.order_by("node__name").values_list("node__name", flat=True)
    node = next(n for n in nodes if n != sm_node)

    collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False, interval=0.2))
    collector.setup()
    try:
        leaf, port = collector.lm.node_uplinks[node][1]  # the node's first HCA's leaf port
        lid = collector.lm.switch_lids[leaf]
        set_policy(ACTOR, OPERATOR, fabric, {"rules": RULES, "dry_run": True})
        collector.sweep()  # the first (slow) sweep: the reservations' links, the policy read
        set_symbol_errors(fabric, leaf, port, 57)
        # read through the agent: a sweep's error sums end the sweep before, so the second sweep
        # at the latest reads the port's errors (docs/architecture.md, "Telemetry")
        for _ in range(2):
            collector.sweep()
            if PortDecision.objects.filter(fabric=fabric).exists():
                break

        # dry run: decided and recorded, with the readings and the reservation; nothing changes
        decision = PortDecision.objects.get(fabric=fabric)
        assert (decision.kind, decision.switch, decision.port, decision.dry_run) == ("isolate", leaf, port, True)
        assert decision.reasons[0].startswith("SymbolErrorCounter +57 in ") and decision.reasons[0].endswith(
            " > 10 per 3600 s"
        )
        assert [s["SymbolErrorCounter"] for s in decision.samples][-2:] == [0, 57]
        assert {"id": reservation.pk, "tenant": tenant_a.pk} in decision.reservations
        assert node in decision.link
        assert decision.change is None and not PortAdminState.objects.filter(fabric=fabric).exists()
        assert lab.diags().port_state(lid, port).phys_state != "Disabled"
        assert AuditEntry.objects.filter(action="fabric.port_health").count() == 1

        # live: the same port is disabled through the change pipeline, with its reason
        set_policy(ACTOR, OPERATOR, fabric, {"rules": RULES, "dry_run": False})
        collector.health.refresh()
        collector.sweep()
        decision = PortDecision.objects.filter(fabric=fabric, dry_run=False).get()
        assert decision.kind == "isolate" and decision.change is not None, decision.error
        change = apply_change(decision.change.pk, worker_id="test")  # what the fabric's worker does
        assert change.status == ChangeRequest.Status.APPLIED, [
            (s.name, s.status, s.log) for s in change.steps.all() if s.status != "ok"
        ]
        assert lab.diags().port_state(lid, port).phys_state == "Disabled"
        # the tenant hears of it: the port, the cause and what the console did (nothing of other hosts)
        faults = NotifyEvent.objects.filter(tenant=tenant_a, type="reservation.fabric_fault")
        (notice,) = [n for n in faults if n.payload["data"]["fault"]["kind"] == "port_isolated"]
        fault = notice.payload["data"]["fault"]
        assert fault["port"] == f"{leaf}/{port}" and notice.reservation_id == reservation.pk
        assert fault["message"].startswith(
            f"port {leaf}/{port} crossed the fabric's health policy: SymbolErrorCounter +57"
        )
        assert fault["action"].startswith("the console disabled the port")
        for each in faults:  # (and whatever else the tenant heard meanwhile) in the documented shape
            Draft202012Validator(schema_for(each.type)).validate(each.payload)
        admin = PortAdminState.objects.get(fabric=fabric, switch=leaf, port=port)
        assert not admin.enabled and admin.reason.startswith("ibconsole health: SymbolErrorCounter +57")

        # the API: the policy, a bad one refused with the field, the decisions; tenants get 403
        client.force_login(make_user("op", Role.OPERATOR))
        got = client.get(f"/api/fabrics/{fabric.pk}/health-policy/").json()
        assert got["default"] is False and got["policy"]["rules"] == [
            {**RULES[0], "threshold": 10.0, "window_s": 3600.0}
        ]
        bad = client.put(
            f"/api/fabrics/{fabric.pk}/health-policy/",
            {"rules": [{"counter": "Nope", "threshold": 1}]},
            "application/json",
        )
        assert bad.status_code == 400 and "rules[0].counter 'Nope'" in bad.content.decode()
        listed = client.get(f"/api/fabrics/{fabric.pk}/port-decisions/").json()
        assert [(d["kind"], d["dry_run"], d["change"]) for d in listed] == [
            ("isolate", False, decision.change_id),
            ("isolate", True, None),
        ]
        page = client.get(f"/fabrics/{fabric.pk}/?discover=false").content.decode()
        assert f"{leaf} port {port} — ibconsole health: SymbolErrorCounter +57" in page  # isolated now
        assert f'href="/reservations/{reservation.pk}/"' in page and "dry run</span>" in page
        home = client.get("/").content.decode()
        assert "1 port isolated" in home
        client.force_login(make_user("member", Role.TENANT_MEMBER, tenant_a))
        assert client.get(f"/api/fabrics/{fabric.pk}/port-decisions/").status_code == 403

        # a temperature rule: a hot module recorded on the SM host (by LID and port) is decided on
        other = next(n for n in nodes if n not in (node, sm_node))
        hot_leaf, hot_port = collector.lm.node_uplinks[other][1]
        phy_dir = Path(lab.workdir) / "phy"
        phy_dir.mkdir(exist_ok=True)
        shutil.copy(PHY / "hot_ndr_optic.txt", phy_dir / f"lid-{collector.lm.switch_lids[hot_leaf]}_{hot_port}.txt")
        rule = {"counter": "Temperature", "threshold": 75, "window_s": 600}
        set_policy(ACTOR, OPERATOR, fabric, {"rules": [rule], "dry_run": True})
        collector.health.refresh()
        collector.sweep()
        hot = PortDecision.objects.get(fabric=fabric, switch=hot_leaf, port=hot_port)
        assert (hot.kind, hot.dry_run, hot.reasons) == ("isolate", True, ["Temperature 79 > 75"])
        assert {"id": reservation.pk, "tenant": tenant_a.pk} in hot.reservations
    finally:
        collector.close()
