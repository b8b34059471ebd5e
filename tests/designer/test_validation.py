"""Validation of generated, bad-input and hand-edited fabrics."""

from __future__ import annotations

import pytest

from designer.errors import PlanError
from designer.plan import evaluate, plan
from designer.validation import IbsimLimits, validate


def test_generated_design_is_clean(one_su):
    report = validate(one_su)
    assert report.ok
    assert report.warnings == []


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"gpus": 0}, "gpus must be at least 1, got 0"),
        ({"gpus": -8}, "gpus must be at least 1, got -8"),
        ({"nodes": 0}, "nodes must be at least 1, got 0"),
        ({"gpus": 64, "switch": "QM9999"}, "unknown switch model 'QM9999'"),
        ({"gpus": 64, "node_type": "DGX-Z"}, "unknown node type 'DGX-Z'"),
        ({"gpus": 64, "oversubscription": "1:2"}, "more up than down links"),
        ({"gpus": 64, "oversubscription": "two"}, "not of the form D:U"),
        ({"gpus": 64, "oversubscription": "0:1"}, "needs positive numbers"),
        ({"gpus": 64, "levels": 5}, "levels 5 must be auto, 1, 2 or 3"),
        ({"gpus": 64, "topology": "ring"}, "unknown topology 'ring'"),
        ({"topology": "torus", "gpus": 64, "dims": "4x"}, "not of the form AxB"),
        ({}, "give the size: gpus or nodes"),
        ({"gpus": 8, "nodes": 1}, "give gpus or nodes, not both"),
        ({"gpus": 64, "node_type": "DGX-H100", "gpus_per_node": 4}, "DGX-H100 has 8 gpus per node"),
        ({"gpus": 64, "switch": "QM8700", "split": "NDR200x2"}, "QM8700 has no split mode"),
        ({"gpus": 64, "bogus": 1}, "unknown option(s) bogus"),
        ({"gpus": "many"}, "gpus must be a whole number"),
    ],
)
def test_bad_input_gives_precise_errors_not_tracebacks(options, expected):
    s = plan(options).summary()
    assert s["switches"]["total"] == 0
    assert any(expected in e for e in s["errors"]), s["errors"]


def test_port_exhaustion_message_names_leaf_and_fix():
    s = plan({"topology": "rail-optimized", "gpus": 2048, "switch": "QM8700", "su_nodes": 32}).summary()
    assert s["errors"] == [
        "su01-leaf-r1 needs 64 ports (32 down + 32 up at 1:1), QM8700 has 40: 8 left for "
        "uplinks, 32 needed: choose 4:1 oversubscription or a 64-port model or fewer node "
        "slots per leaf"
    ]


def test_qm8700_defaults_to_20_node_sus():
    s = plan({"topology": "rail-optimized", "gpus": 1280, "node_type": "DGX-A100", "switch": "QM8700"}).summary()
    assert s["errors"] == []
    assert s["switches"]["leaf"] == 8 * 8 and s["nodes"] == 160


def test_speed_mismatch_is_a_warning():
    s = plan({"topology": "fat-tree", "gpus": 64, "node_type": "DGX-A100"}).summary()
    assert s["errors"] == []
    assert any("links train at the slower speed" in w for w in s["warnings"])


def test_removed_spine_breaks_ftree_symmetry(one_su):
    # given a valid 1-SU fabric, when a spine is removed
    edited = one_su.copy()
    removed = edited.remove_switch("spine-04")
    assert len(removed) == 64
    report, metrics = evaluate(edited)
    # then validation still passes symmetry (every leaf lost the same spine)...
    assert report.ok
    assert metrics["switches"]["spine"] == 3
    # ...but a missing single uplink breaks it, named precisely
    edited.disconnect("su01-leaf-r3", 33)  # one of its 8 links to spine-01
    report = validate(edited)
    assert "ftree-symmetry" in report.codes()
    assert any(
        i.element == "su01-leaf-r3" and "but 7 to spine-01" in i.message and "falls back to minhop" in i.message
        for i in report.errors
    )


def test_link_added_between_free_ports_is_checked(one_su):
    edited = one_su.copy()
    edited.remove_switch("spine-01")
    # leaf-r1 now has free uplinks 33..40; cable one to spine-02's free port? none are free
    with pytest.raises(PlanError, match=r"spine-02\[1\] is already cabled to su01-leaf-r1"):
        edited.connect("su01-leaf-r1", 33, "spine-02", 1)
    edited.disconnect("spine-02", 64)  # frees leaf-r8's last uplink too
    edited.connect("su01-leaf-r1", 33, "spine-02", 64, cable="NDR-MMF", length_m=10)
    report = validate(edited)
    assert any(i.element == "su01-leaf-r1" and "but 9 to spine-02" in i.message for i in report.errors)
    # the other leaves are fine, and nothing else is reported as an error
    assert {i.element for i in report.errors} <= {"su01-leaf-r1", "su01-leaf-r8"}


def test_ports_beyond_model_and_reused_ports_on_edited_graph(one_su):
    from designer.graph import Link

    edited = one_su.copy()
    edited.links.append(Link("su01-n01", 1, "su01-leaf-r1", 70, "node_leaf", "NDR-MMF", 5))
    edited.links.append(Link("spine-01", 1, "spine-02", 2, "spine_spine", "NDR-MMF", 5))
    report = validate(edited)
    messages = [i.message for i in report.errors]
    assert any("su01-leaf-r1 has no port 70: it has 64 ports" in m for m in messages)
    assert any("spine-01[1] is cabled twice" in m for m in messages)
    assert any("su01-n01[1] is cabled twice" in m for m in messages)


def test_cable_reach_against_length(one_su):
    edited = one_su.copy()
    link = edited.links[0]
    link.cable, link.length_m = "NDR-DAC", 7.0
    report = validate(edited)
    reach = [i for i in report.errors if i.code == "cable-reach"]
    assert len(reach) == 1
    assert "is 7 m but NDR-DAC reaches 2 m: use NDR-MMF (to 50 m)" in reach[0].message


def test_splitter_on_unsplit_ports_and_speed_of_cable(one_su):
    edited = one_su.copy()
    edited.links[0].cable = "NDR-SPLIT"
    edited.links[1].cable = "EDR-DAC"
    codes = [i.code for i in validate(edited).errors]
    assert "split-mismatch" in codes and "cable-speed" in codes


def test_unconnected_hca_and_partitioned_fabric(one_su):
    edited = one_su.copy()
    edited.disconnect("su01-n05", 3)
    for port in range(33, 65):
        edited.disconnect("su01-leaf-r2", port)
    report = validate(edited)
    assert any(i.code == "unconnected-port" and i.element == "su01-n05[3]" for i in report.warnings)
    assert any(i.code == "partitioned" for i in report.errors)
    assert any("su01-leaf-r2 has no link to any spine" in i.message for i in report.errors)


def test_duplicate_guid_detected(one_su):
    edited = one_su.copy()
    edited.switches["spine-02"].guid = edited.switches["spine-01"].guid
    assert any(i.code == "duplicate-guid" for i in validate(edited).errors)


def test_ibsim_limits_warn_with_flags():
    result = plan({"topology": "rail-optimized", "gpus": 2048})
    report = validate(result.graph)
    assert report.ok
    msg = next(i.message for i in report.warnings if i.code == "ibsim-limit")
    assert "start it with -N 2144" in msg
    big = validate(result.graph, IbsimLimits(lab_endpoints=1024))
    assert any(i.code == "lab-size" for i in big.warnings)


def test_findings_are_capped_and_summarised(one_su):
    edited = one_su.copy()
    for lk in edited.links:
        lk.cable, lk.length_m = "NDR-DAC", 30.0
    errors = [i for i in validate(edited).errors if i.code == "cable-reach"]
    assert len(errors) == 21
    assert errors[-1].message == "… and 492 more cable-reach findings"
