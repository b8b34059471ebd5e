"""A design rebased for a second site: other names and GUIDs, the same fabric."""

from __future__ import annotations

import pytest

from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.errors import PlanError
from designer.plan import plan
from designer.rebase import GUID_STEP, rebase
from designer.serialize import graph_from_dict, graph_to_dict
from designer.validation import validate


def guids(data: dict) -> set[int]:
    out = {int(s["guid"], 16) for s in data["switches"]}
    for node in data["nodes"]:
        out |= {int(g, 16) for g in node["ca_guids"] + node["port_guids"]}
    return out


def test_rebased_design_shares_no_guid_or_name_and_keeps_its_cabling():
    result = plan({"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100", "levels": 2}, DEFAULT_CATALOGUE)
    assert result.graph is not None
    original = graph_to_dict(result.graph)

    moved = rebase(original, step=1, prefix="b-")

    assert not guids(original) & guids(moved)
    assert {g + GUID_STEP for g in guids(original)} == guids(moved)
    names = {s["name"] for s in moved["switches"]} | {n["name"] for n in moved["nodes"]}
    assert "b-node-001" in names and "b-leaf-02" in names and not any(n.startswith("node-") for n in names)
    # every link still joins the same ports, now under the new names
    assert [[a.removeprefix("b-"), ap, b.removeprefix("b-"), bp, *r] for a, ap, b, bp, *r in moved["links"]] == (
        original["links"]
    )
    # and it is a valid design, switches and CAs in GUID ranges of their own
    graph = graph_from_dict(moved, DEFAULT_CATALOGUE)
    assert not validate(graph).errors
    assert guids(original) == guids(graph_to_dict(result.graph))  # the input is not changed


@pytest.mark.parametrize("step, prefix", [(0, "b-"), (16, "b-"), (1, "")])
def test_rebase_refuses_a_no_op_or_out_of_range_step(step, prefix):
    with pytest.raises(PlanError):
        rebase({"switches": [], "nodes": [], "links": []}, step=step, prefix=prefix)
