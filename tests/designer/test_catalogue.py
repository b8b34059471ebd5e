"""The catalogue: model names in any case, the XDR node types, and the node type a plan implies."""

from __future__ import annotations

import pytest

from designer.catalogue import NodeType
from designer.errors import UnknownItemError
from designer.feasibility import can_i
from designer.plan import plan
from tests.designer.conftest import graph_identity


@pytest.mark.parametrize(
    ("typed", "name"), [("qm9700", "QM9700"), ("Qm9700", "QM9700"), ("q3400", "Q3400"), ("dir-ndr-800", "DIR-NDR-800")]
)
def test_switch_models_are_found_in_any_case(catalogue, typed, name):
    assert catalogue.switch(typed).name == name


@pytest.mark.parametrize(
    ("typed", "name"), [("dgx-b300", "DGX-B300"), ("GENERIC", "generic"), ("gb300-TRAY", "GB300-tray")]
)
def test_node_types_are_found_in_any_case(catalogue, typed, name):
    assert catalogue.node_type(typed).name == name


def test_unknown_model_still_names_what_exists(catalogue):
    with pytest.raises(UnknownItemError) as err:
        catalogue.switch("qm9999")
    assert "QM9700" in str(err.value) and "Q3400" in str(err.value)


def test_xdr_node_types_carry_connectx8_at_800g(catalogue):
    b300 = catalogue.node_type("DGX-B300")
    assert (b300.gpus, b300.hcas, b300.hca_speed, b300.hca_gbps, b300.hca_device_id) == (8, 8, "XDR", 800, 0x1023)
    tray = catalogue.node_type("GB300-tray")
    assert (tray.gpus, tray.hcas, tray.hca_speed, tray.hca_gbps, tray.hca_device_id) == (4, 4, "XDR", 800, 0x1023)


def test_lower_case_plan_is_the_same_design_with_the_catalogues_spelling(catalogue):
    # given the same request typed in two cases
    upper = plan({"topology": "rail-optimized", "gpus": 576, "node_type": "DGX-B300", "switch": "Q3400"}, catalogue)
    lower = plan({"topology": "rail-optimized", "gpus": 576, "node_type": "dgx-b300", "switch": "q3400"}, catalogue)
    # then both plan, to the same graph, whose switches and nodes name the catalogue's models
    assert lower.ok and upper.ok
    assert lower.summary() == upper.summary()
    assert graph_identity(lower.graph) == graph_identity(upper.graph)
    assert {sw.model for sw in lower.graph.switches.values()} == {"Q3400"}
    assert {n.node_type for n in lower.graph.nodes.values()} == {"DGX-B300"}
    assert lower.graph.meta["options"]["switch"] == "Q3400"
    assert lower.graph.meta["options"]["node_type"] == "DGX-B300"


def test_override_in_another_case_replaces_the_builtin(catalogue):
    cheaper = catalogue.with_prices({"q3400": 1.0})
    assert cheaper.switch("Q3400").list_price == 1.0 and "q3400" not in cheaper.switches
    custom = catalogue.with_items(NodeType("dgx-b300", 8, 8, "B300", hca_speed="XDR", hca_gbps=800, price=2.0))
    assert custom.node_type("DGX-B300").price == 2.0
    assert [n for n in custom.nodes if n.casefold() == "dgx-b300"] == ["DGX-B300"]


def test_can_i_takes_lower_case_models(catalogue):
    answer = can_i(gpus=2048, switches=96, switch_model="qm9700", node_type="dgx-h100", catalogue=catalogue)
    assert answer.feasible, answer.steps


@pytest.mark.parametrize(
    ("given", "gpus", "hcas"),
    [({"gpus_per_node": 4, "hcas_per_node": 4}, 4, 4), ({"gpus_per_node": 4}, 4, 4), ({"hcas_per_node": 2}, 8, 2)],
)
def test_per_node_counts_without_node_type_imply_the_generic_node(catalogue, given, gpus, hcas):
    # given per-node counts and no node type
    result = plan({"topology": "fat-tree", "nodes": 16, **given}, catalogue)
    # then the design is of generic nodes with those counts, and the plan says so
    assert result.ok, result.errors
    assert {(n.node_type, n.gpus, n.hcas) for n in result.graph.nodes.values()} == {("generic", gpus, hcas)}
    assert result.graph.meta["options"]["node_type"] == "generic"
    assert any(w.code == "implied-node-type" for w in result.warnings)


def test_per_node_counts_with_a_fixed_node_type_still_fail_naming_generic(catalogue):
    s = plan({"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100", "gpus_per_node": 4}, catalogue).summary()
    assert s["errors"] == ["DGX-H100 has 8 gpus per node; 4 needs node_type generic"]


def test_no_node_type_and_no_counts_is_still_the_dgx_h100(catalogue):
    result = plan({"topology": "fat-tree", "gpus": 64}, catalogue)
    assert {n.node_type for n in result.graph.nodes.values()} == {"DGX-H100"}
    assert not any(w.code == "implied-node-type" for w in result.warnings)
