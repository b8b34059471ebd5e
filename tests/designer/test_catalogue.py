"""The catalogue: model names in any case."""

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
    ("typed", "name"), [("dgx-h100", "DGX-H100"), ("GENERIC", "generic"), ("ufm-APPLIANCE", "UFM-appliance")]
)
def test_node_types_are_found_in_any_case(catalogue, typed, name):
    assert catalogue.node_type(typed).name == name


def test_unknown_model_still_names_what_exists(catalogue):
    with pytest.raises(UnknownItemError) as err:
        catalogue.switch("qm9999")
    assert "QM9700" in str(err.value) and "Q3400" in str(err.value)


def test_lower_case_plan_is_the_same_design_with_the_catalogues_spelling(catalogue):
    # given the same request typed in two cases
    upper = plan({"topology": "rail-optimized", "gpus": 512, "node_type": "DGX-H100", "switch": "QM9700"}, catalogue)
    lower = plan({"topology": "rail-optimized", "gpus": 512, "node_type": "dgx-h100", "switch": "qm9700"}, catalogue)
    # then both plan, to the same graph, whose switches and nodes name the catalogue's models
    assert lower.ok and upper.ok
    assert lower.summary() == upper.summary()
    assert graph_identity(lower.graph) == graph_identity(upper.graph)
    assert {sw.model for sw in lower.graph.switches.values()} == {"QM9700"}
    assert {n.node_type for n in lower.graph.nodes.values()} == {"DGX-H100"}
    assert lower.graph.meta["options"]["switch"] == "QM9700"
    assert lower.graph.meta["options"]["node_type"] == "DGX-H100"


def test_override_in_another_case_replaces_the_builtin(catalogue):
    cheaper = catalogue.with_prices({"q3400": 1.0})
    assert cheaper.switch("Q3400").list_price == 1.0 and "q3400" not in cheaper.switches
    custom = catalogue.with_items(NodeType("dgx-h100", 8, 8, "H100", price=2.0))
    assert custom.node_type("DGX-H100").price == 2.0
    assert [n for n in custom.nodes if n.casefold() == "dgx-h100"] == ["DGX-H100"]


def test_can_i_takes_lower_case_models(catalogue):
    answer = can_i(gpus=2048, switches=96, switch_model="qm9700", node_type="dgx-h100", catalogue=catalogue)
    assert answer.feasible, answer.steps
