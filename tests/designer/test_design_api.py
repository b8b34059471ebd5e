"""The designer through the REST API: preview, save, revisions, diff, exports, bad input."""

from __future__ import annotations

import pytest

from console.tenancy.models import AuditEntry
from designer.models import DesignRevision, ImmutableRevision
from tests.designer.reference_rows import B300_XDR, B300_XDR_ROWS

pytestmark = pytest.mark.django_db

REFERENCE = [  # NVIDIA DGX SuperPOD rows: SUs → GPUs, leaves, spines, node-leaf, leaf-spine
    (1, 256, 8, 4, 256, 256),
    (2, 512, 16, 8, 512, 512),
    (4, 1024, 32, 16, 1024, 1024),
    (8, 2048, 64, 32, 2048, 2048),
]
SU1 = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}


@pytest.fixture
def api(operator, client_for):
    return client_for(operator)


@pytest.mark.parametrize(("sus", "gpus", "leaves", "spines", "node_leaf", "leaf_spine"), REFERENCE)
def test_reference_rows_through_the_api(api, sus, gpus, leaves, spines, node_leaf, leaf_spine):
    response = api.post("/api/designs/plan/", dict(SU1, gpus=gpus), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["gpus"] == gpus and body["nodes"] == sus * 32
    assert (body["switches"]["leaf"], body["switches"]["spine"]) == (leaves, spines)
    assert body["cables"]["node_leaf"] == node_leaf
    assert body["cables"]["leaf_spine"] == leaf_spine
    assert body["switches"]["total"] == leaves + spines


@pytest.mark.parametrize(("sus", "nodes", "gpus", "leaves", "spines", "node_leaf", "leaf_spine"), B300_XDR_ROWS)
def test_b300_xdr_rows_through_the_api(api, sus, nodes, gpus, leaves, spines, node_leaf, leaf_spine):
    """NVIDIA's DGX B300 XDR SuperPOD table (published and derived numbers: tests/designer/reference_rows.py)."""
    response = api.post("/api/designs/plan/", dict(B300_XDR, gpus=gpus), format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["nodes"], body["gpus"]) == (nodes, gpus)
    assert body["switches"] == {"leaf": leaves, "spine": spines, "core": 0, "total": leaves + spines}
    assert (body["cables"]["node_leaf"], body["cables"]["leaf_spine"]) == (node_leaf, leaf_spine)


def test_lower_case_models_through_the_api(api):
    # given a design saved with model names typed in lower case
    lower = {"topology": "rail-optimized", "gpus": 576, "node_type": "dgx-b300", "switch": "q3400"}
    preview = api.post("/api/designs/plan/", lower, format="json")
    assert preview.status_code == 200, preview.content
    assert preview.json() == api.post("/api/designs/plan/", B300_XDR | {"gpus": 576}, format="json").json()
    created = api.post("/api/designs/", {"name": "lower", "options": lower}, format="json")
    assert created.status_code == 201, created.content
    # then its graph names the catalogue's models
    graph = api.get(f"/api/designs/{created.json()['id']}/revisions/1/graph/").json()
    assert {sw["model"] for sw in graph["switches"]} == {"Q3400"}
    assert {n["node_type"] for n in graph["nodes"]} == {"DGX-B300"}
    # and "can I" reads lower-case models too
    answer = api.post("/api/designs/can-i/", {"gpus": 576, "switches": 12, "switch_model": "q3400"}, format="json")
    assert answer.status_code == 200 and answer.json()["feasible"] is True, answer.json()


def test_per_node_counts_without_node_type_through_the_api(api):
    response = api.post(
        "/api/designs/plan/",
        {"topology": "fat-tree", "nodes": 64, "gpus_per_node": 4, "hcas_per_node": 2},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["nodes"], body["gpus"], body["endpoints"]) == (64, 256, 128)
    assert any("node_type generic" in w for w in body["warnings"])


@pytest.mark.parametrize(
    "payload",
    [
        {"gpus": 0},
        {"gpus": -8},
        {"gpus": 256, "switch": "NoSuchSwitch"},
        {"gpus": 256, "node_type": "toaster"},
        {"gpus": 256, "oversubscription": "3:0"},
        {"gpus": 256, "oversubscription": "banana"},
        {"topology": "torus", "gpus": 256, "dims": "0x4"},
        {"gpus": "many"},
        {"gpus": 256, "colour": "blue"},
    ],
)
def test_impossible_input_is_a_precise_400(api, payload):
    response = api.post("/api/designs/plan/", payload, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and body["detail"] and body["fields"]


@pytest.mark.smoke
def test_save_revise_diff_export(api):
    created = api.post("/api/designs/", {"name": "su1", "options": SU1}, format="json")
    assert created.status_code == 201, created.content
    design = created.json()
    assert design["latest_revision"] == 1 and design["summary"]["switches"]["leaf"] == 8
    base = f"/api/designs/{design['id']}/revisions"

    graph = api.get(f"{base}/1/graph/").json()
    # Edit: drop one leaf-spine cable, as an operator would in the browser.
    dropped = next(link for link in graph["links"] if link[4] == "leaf_spine")
    graph["links"].remove(dropped)
    checked = api.post("/api/designs/validate/", {"graph": graph}, format="json").json()
    assert checked["summary"]["cables"]["leaf_spine"] == 255
    assert any(i["code"] == "ftree-symmetry" for i in checked["issues"]), checked["issues"]

    saved = api.post(
        f"/api/designs/{design['id']}/revisions/", {"graph": graph, "message": "drop a cable"}, format="json"
    )
    assert saved.status_code == 201 and saved.json()["number"] == 2
    diff = api.get(f"{base}/1/diff/2/").json()
    assert len(diff["cables"]["removed"]) == 1 and not diff["cables"]["added"]
    assert diff["cables"]["removed"][0]["a"] == dropped[0]

    topo = api.get(f"{base}/2/export/ibnetdiscover/")
    assert topo.status_code == 200
    text = topo.content.decode()
    assert text.count("\nswitchguid=") == 12 and "\ncaguid=" in text
    assert "attachment" in topo["Content-Disposition"]
    assert api.get(f"{base}/2/export/no-such-format/").status_code == 400
    assert api.get(f"{base}/9/graph/").status_code == 404

    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"design.create", "design.revision.create"} <= actions


def test_revisions_are_immutable(api):
    design_id = api.post("/api/designs/", {"name": "im", "options": SU1}, format="json").json()["id"]
    revision = DesignRevision.objects.get(design_id=design_id, number=1)
    revision.message = "rewritten history"
    with pytest.raises(ImmutableRevision):
        revision.save()


def test_malformed_graph_is_400(api):
    for graph in ({}, {"format": "ib-fabric-designer"}, "nonsense", {"format": "x", "links": 3}):
        response = api.post("/api/designs/validate/", {"graph": graph}, format="json")
        assert response.status_code == 400, (graph, response.content)


def test_duplicate_name_is_409(api):
    assert api.post("/api/designs/", {"name": "dup", "options": SU1}, format="json").status_code == 201
    again = api.post("/api/designs/", {"name": "dup", "options": SU1}, format="json")
    assert again.status_code in (400, 409)


def test_tenants_cannot_see_designs_auditors_can_read_only(api, member_a, auditor, client_for):
    api.post("/api/designs/", {"name": "private", "options": SU1}, format="json")
    assert client_for(member_a).get("/api/designs/").status_code == 403
    reader = client_for(auditor)
    assert reader.get("/api/designs/").json()["count"] == 1
    assert reader.post("/api/designs/plan/", SU1, format="json").status_code == 200
    refused = reader.post("/api/designs/", {"name": "x", "options": SU1}, format="json")
    assert refused.status_code == 403


def test_compare_and_can_i(api):
    rows = api.post(
        "/api/designs/compare/",
        {"options": [SU1, dict(SU1, oversubscription="2:1"), dict(SU1, gpus=2048)]},
        format="json",
    ).json()["rows"]
    assert [r["gpus"] for r in rows] == [256, 256, 2048]
    assert rows[1]["switches"]["spine"] < rows[0]["switches"]["spine"]
    answer = api.post(
        "/api/designs/can-i/",
        {"gpus": 2048, "switches": 10, "switch_model": "QM9700"},
        format="json",
    ).json()
    assert answer["feasible"] is False
    assert any("640" in step for step in answer["steps"])
    assert any("96" in step for step in answer["steps"])


@pytest.mark.smoke
def test_import_roundtrip_through_the_api(api):
    design_id = api.post("/api/designs/", {"name": "src", "options": SU1}, format="json").json()["id"]
    text = api.get(f"/api/designs/{design_id}/revisions/1/export/ibnetdiscover/").content.decode()
    imported = api.post("/api/designs/import/", {"name": "brownfield", "text": text}, format="json")
    assert imported.status_code == 201, imported.content
    summary = imported.json()["summary"]
    assert summary["switches"]["total"] == 12 and summary["cables"]["total"] == 512
    bad = api.post("/api/designs/import/", {"name": "bad", "text": "Switch 64 garbage"}, format="json")
    assert bad.status_code == 400 and "line" in bad.json()["detail"]


def test_import_with_node_name_map_and_warnings_summary(api):
    design_id = api.post("/api/designs/", {"name": "src2", "options": SU1}, format="json").json()["id"]
    text = api.get(f"/api/designs/{design_id}/revisions/1/export/ibnetdiscover/").content.decode()
    # One HCA of a 32-node SU renamed onto a host of its own: 33 hosts.
    guid = next(line for line in text.splitlines() if line.startswith("caguid=")).split("=", 1)[1]
    body = {"name": "mapped", "text": text, "node_name_map": f'{guid} "renamed-host mlx5_0"\n'}
    imported = api.post("/api/designs/import/", body, format="json")
    assert imported.status_code == 201, imported.content
    summary = imported.json()["summary"]
    assert summary["import"]["hosts"] == 33 and summary["import"]["tiers"] == {"leaf": 8, "spine": 4}
    assert isinstance(summary["warnings"], list) and isinstance(summary["warnings_full"], list)
    bad = api.post("/api/designs/import/", {**body, "name": "bad-map", "node_name_map": "nonsense here"}, format="json")
    assert bad.status_code == 400 and "node_name_map" in str(bad.json())


def test_catalogue_override_changes_the_price(api):
    before = api.post("/api/designs/plan/", SU1, format="json").json()["cost"]
    effective = api.get("/api/catalogue/effective/").json()
    qm = next(s for s in effective["switches"] if s["name"] == "QM9700")
    data = {k: v for k, v in qm.items() if k != "name"} | {"list_price": qm["list_price"] + 1000}
    assert (
        api.post("/api/catalogue/", {"kind": "switch", "name": "QM9700", "data": data}, format="json").status_code
        == 201
    )
    after = api.post("/api/designs/plan/", SU1, format="json").json()["cost"]
    assert after == before + 12 * 1000
    broken = api.post("/api/catalogue/", {"kind": "switch", "name": "X", "data": {"ports": 1}}, format="json")
    assert broken.status_code == 400


def test_catalogue_override_in_lower_case_overrides_the_builtin(api):
    # given an override of the Q3400 typed in lower case
    effective = api.get("/api/catalogue/effective/").json()
    q3400 = next(s for s in effective["switches"] if s["name"] == "Q3400")
    data = {k: v for k, v in q3400.items() if k != "name"} | {"list_price": 1.0}
    created = api.post("/api/catalogue/", {"kind": "switch", "name": "q3400", "data": data}, format="json")
    assert created.status_code == 201, created.content
    # then it is saved under the catalogue's spelling, replaces the built-in and prices designs
    assert created.json()["name"] == "Q3400"
    names = [s["name"] for s in api.get("/api/catalogue/effective/").json()["switches"]]
    assert names.count("Q3400") == 1 and "q3400" not in names
    body = api.post("/api/designs/plan/", B300_XDR | {"gpus": 576, "switch": "q3400"}, format="json").json()
    assert body["errors"] == [] and body["switches"]["total"] == 12
    # and typing it again in another case updates that entry instead of adding a second one
    again = api.post(
        "/api/catalogue/", {"kind": "switch", "name": "q3400", "data": data | {"list_price": 2.0}}, format="json"
    )
    assert again.status_code == 201 and again.json()["id"] == created.json()["id"]
    rows = api.get("/api/catalogue/", {"kind": "switch"}).json()["results"]
    assert [(r["name"], r["data"]["list_price"]) for r in rows] == [("Q3400", 2.0)]


def test_a_dump_larger_than_the_api_body_limit_still_imports(api, settings):
    # a real fabric's dump is megabytes: the import has its own limit above the API's 2.5 MiB
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    design_id = api.post("/api/designs/", {"name": "big-src", "options": SU1}, format="json").json()["id"]
    text = api.get(f"/api/designs/{design_id}/revisions/1/export/ibnetdiscover/").content.decode()
    assert len(text) > 100_000
    imported = api.post("/api/designs/import/", {"name": "big", "text": text}, format="json")
    assert imported.status_code == 201, imported.content[:300]
    # every other endpoint keeps the API's limit
    refused = api.post("/api/designs/plan/", {**SU1, "padding": "x" * 100_000}, format="json")
    assert refused.status_code == 413 and refused.json()["code"] == "too_large"
    settings.CONSOLE_MAX_IMPORT_BYTES = 50_000
    too_big = api.post("/api/designs/import/", {"name": "bigger", "text": text}, format="json")
    assert too_big.status_code == 413


def test_sharp_trees_are_catalogue_values_an_operator_edits(api):
    # given the built-in figures (NVIDIA's SHARP release notes: one streaming-aggregation tree per
    # Quantum switch, one per port on Quantum-2, none stated for Quantum-X800)
    effective = {s["name"]: s for s in api.get("/api/catalogue/effective/").json()["switches"]}
    assert effective["QM9700"]["sharp_trees"] == effective["QM9700"]["ports"] == 64
    assert effective["QM8700"]["sharp_trees"] == 1
    assert effective["SB7800"]["sharp_trees"] == 0 and effective["Q3400"]["sharp_trees"] == 0
    # when an operator sets the Q3400's figure
    data = {k: v for k, v in effective["Q3400"].items() if k != "name"} | {"sharp_trees": 144}
    assert (
        api.post("/api/catalogue/", {"kind": "switch", "name": "Q3400", "data": data}, format="json").status_code == 201
    )
    # then the effective catalogue (what designs and placement read) carries it
    after = {s["name"]: s for s in api.get("/api/catalogue/effective/").json()["switches"]}
    assert after["Q3400"]["sharp_trees"] == 144 and after["QM9700"]["sharp_trees"] == 64
