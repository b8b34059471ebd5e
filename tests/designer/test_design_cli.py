"""The designer's automation contract: `manage.py design plan|export|import|can-i`."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from designer.models import Design
from tests.datafiles import IBNETDISCOVER
from tests.designer.reference_rows import B300_XDR_ROWS

pytestmark = pytest.mark.django_db

#: Every key `design plan --json` prints (the automation contract; new keys need a decision).
PLAN_KEYS = {
    "bisection_bandwidth_gbps",
    "cables",
    "cables_by_type",
    "compute_cost",
    "compute_power_w",
    "cost",
    "diameter_switch_hops",
    "endpoints",
    "errors",
    "gpus",
    "issues",
    "levels",
    "max_latency_ns",
    "nodes",
    "oversubscription",
    "port_utilisation",
    "power_w",
    "racks",
    "steps",
    "switches",
    "topology",
    "transceivers",
    "transceivers_by_type",
    "warnings",
}


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("design", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


@pytest.mark.parametrize(
    ("gpus", "leaves", "spines", "cables"),
    [(256, 8, 4, 256), (512, 16, 8, 512), (1024, 32, 16, 1024), (2048, 64, 32, 2048)],
)
def test_reference_rows_through_the_cli(gpus, leaves, spines, cables):
    code, out = run(
        "plan",
        "--topology",
        "rail-optimized",
        "--gpus",
        str(gpus),
        "--node-type",
        "DGX-H100",
        "--switch",
        "QM9700",
        "--json",
    )
    assert code == 0
    body = json.loads(out)
    required = {
        "topology",
        "nodes",
        "gpus",
        "endpoints",
        "switches",
        "cables",
        "transceivers",
        "oversubscription",
        "bisection_bandwidth_gbps",
        "diameter_switch_hops",
        "power_w",
        "cost",
        "warnings",
        "errors",
    }
    assert required <= set(body)
    assert body["switches"] == {"leaf": leaves, "spine": spines, "core": 0, "total": leaves + spines}
    assert body["cables"]["node_leaf"] == cables and body["cables"]["leaf_spine"] == cables
    assert body["cables"]["total"] == 2 * cables


@pytest.mark.parametrize(("sus", "nodes", "gpus", "leaves", "spines", "node_leaf", "leaf_spine"), B300_XDR_ROWS)
def test_b300_xdr_rows_through_the_cli(sus, nodes, gpus, leaves, spines, node_leaf, leaf_spine):
    """NVIDIA's DGX B300 XDR SuperPOD table (published and derived numbers: tests/designer/reference_rows.py)."""
    code, out = run(
        "plan",
        "--topology",
        "rail-optimized",
        "--gpus",
        str(gpus),
        "--node-type",
        "DGX-B300",
        "--switch",
        "Q3400",
        "--json",
    )
    body = json.loads(out)
    assert code == 0 and body["errors"] == []
    assert set(body) == PLAN_KEYS
    assert (body["nodes"], body["gpus"]) == (nodes, gpus)
    assert body["switches"] == {"leaf": leaves, "spine": spines, "core": 0, "total": leaves + spines}
    assert (body["cables"]["node_leaf"], body["cables"]["leaf_spine"]) == (node_leaf, leaf_spine)


def test_contract_keys_are_unchanged():
    code, out = run("plan", "--topology", "rail-optimized", "--gpus", "2048", "--json")
    assert code == 0 and set(json.loads(out)) == PLAN_KEYS


def test_lower_case_models_plan_the_same_design():
    base = ["plan", "--topology", "rail-optimized", "--gpus", "576", "--json"]
    code_upper, upper = run(*base, "--node-type", "DGX-B300", "--switch", "Q3400")
    code_lower, lower = run(*base, "--node-type", "dgx-b300", "--switch", "q3400")
    assert code_upper == code_lower == 0
    assert json.loads(lower) == json.loads(upper)
    assert json.loads(lower)["switches"] == {"leaf": 8, "spine": 4, "core": 0, "total": 12}


def test_per_node_flags_without_node_type_plan_generic_nodes():
    # given --gpus-per-node/--hcas-per-node and no --node-type (documented in docs/api.md)
    code, out = run("plan", "--nodes", "64", "--gpus-per-node", "4", "--hcas-per-node", "2", "--json")
    body = json.loads(out)
    # then 64 generic nodes of 4 GPUs and 2 HCAs are planned, the contract keys unchanged
    assert code == 0 and body["errors"] == []
    assert (body["nodes"], body["gpus"], body["endpoints"]) == (64, 256, 128)
    assert set(body) == PLAN_KEYS
    assert any("node_type generic" in w for w in body["warnings"])


def test_per_node_flags_with_another_node_type_fail_naming_generic():
    code, out = run("plan", "--nodes", "64", "--node-type", "DGX-H100", "--gpus-per-node", "4", "--json")
    assert code != 0
    assert json.loads(out)["errors"] == ["DGX-H100 has 8 gpus per node; 4 needs node_type generic"]


def test_three_level_16k():
    code, out = run("plan", "--gpus", "16384", "--levels", "3", "--json")
    body = json.loads(out)
    assert code == 0
    assert body["switches"] == {"leaf": 512, "spine": 512, "core": 256, "total": 1280}
    assert body["cables"]["total"] == 3 * 16384


@pytest.mark.parametrize(
    "args",
    [
        ["--gpus", "0"],
        ["--gpus", "256", "--switch", "nope"],
        ["--gpus", "256", "--oversubscription", "1:0"],
    ],
)
def test_impossible_input_exits_non_zero_with_errors_in_json(args):
    code, out = run("plan", *args, "--json")
    assert code != 0
    assert json.loads(out)["errors"]


def test_save_then_export(tmp_path):
    code, out = run("plan", "--topology", "rail-optimized", "--gpus", "256", "--json", "--save", "cli-su1")
    body = json.loads(out)
    assert code == 0 and body["revision"] == 1
    assert Design.objects.get(pk=body["design_id"]).name == "cli-su1"
    target = tmp_path / "su1.topo"
    code, _ = run("export", "--design", f"{body['design_id']}/1", "--format", "ibnetdiscover", "--output", str(target))
    assert code == 0 and target.read_text().count("\nswitchguid=") == 12
    code, out = run("import", "--file", str(target), "--name", "cli-import", "--json")
    assert code == 0 and json.loads(out)["switches"]["total"] == 12
    code, out = run("export", "--design", "cli-su1", "--format", "slurm-topology")
    assert code == 0 and "SwitchName=" in out


def test_can_i_explains_the_seed_claim():
    code, out = run("can-i", "--gpus", "2048", "--switches", "10", "--switch", "QM9700", "--json")
    body = json.loads(out)
    assert code == 1 and body["feasible"] is False
    assert any("640" in s for s in body["steps"])


@pytest.mark.parametrize(
    "args",
    [
        ["--gpus", "2000000000"],
        ["--topology", "torus", "--gpus", "8000", "--dims", "1000x1000x100"],
        ["--topology", "rail-optimized", "--gpus", "90000000"],
    ],
)
def test_absurd_sizes_are_refused_quickly(args):
    # Refused by arithmetic before any graph is built (these once took ~60 s and 3.7 GB).
    code, out = run("plan", *args, "--json")
    errors = json.loads(out)["errors"]
    assert code != 0 and any("at most" in e for e in errors), errors


REALDATA = str(IBNETDISCOVER)


def test_import_real_dump_with_node_name_map_summarises_warnings(tmp_path):
    dump = f"{REALDATA}/psmn_x5_voltaire_qdr_89ca_11sw.ibnetdiscover"
    names = f"{REALDATA}/psmn_x5.node-name-map"
    code, out = run("import", "--file", dump, "--node-name-map", names, "--name", "psmn", "--json")
    body = json.loads(out)
    assert code == 0, body
    text = open(dump).read()
    assert body["import"]["switches"] == text.count("\nSwitch\t") and body["import"]["hosts"] == text.count("\nCa\t")
    codes = [w.split(" ", 1)[0] for w in body["warnings"]]
    assert len(codes) == len(set(codes))  # one line per kind
    assert sum(1 for f in body["warnings_full"] if f["code"] == "imbalance") >= 1
    # the full list is uncapped: one no-cable finding per imported link, one summary line for them
    no_cable = sum(1 for f in body["warnings_full"] if f["code"] == "no-cable")
    assert no_cable == body["import"]["links"] == text.count("\n[") // 2  # every link printed from both ends
    assert f"no-cable ({no_cable:,}):" in " ".join(body["warnings"])
    assert all(len(w.split(" — e.g. ")[-1].split(", ")) <= 5 for w in body["warnings"] if " — e.g. " in w)
    code, human = run("import", "--file", dump, "--node-name-map", names, "--name", "psmn-human")
    assert code == 0 and "11 switches (leaf 6," in human and "warning: imbalance (" in human
    bad_map = tmp_path / "bad.map"
    bad_map.write_text("0x12 ok\nzz-not-a-guid name\n")
    code, out = run("import", "--file", dump, "--node-name-map", str(bad_map), "--name", "psmn-bad", "--json")
    assert code == 2 and "line 2" in str(json.loads(out)["errors"][0])
