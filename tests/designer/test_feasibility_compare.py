"""'Can I do X with Y?' arithmetic, comparisons and revision diffs."""

from __future__ import annotations

from designer.compare import compare, comparison_table, diff_graphs
from designer.feasibility import can_i


def test_2048_gpus_with_10_ndr_switches_is_explained():
    answer = can_i(gpus=2048, switches=10, switch_model="QM9700")
    assert answer.feasible is False
    assert "10 × QM9700 = 10 × 64 = 640 ports" in answer.steps
    assert "640 ports < 2,048 endpoints: not even the host ports fit" in answer.steps
    assert "non-blocking needs 96 switches (64 leaf + 32 spine)" in answer.steps
    assert answer.needed["switches"] == 96
    alternatives = "\n".join(answer.alternatives)
    assert "director-class DIR-NDR-800 (800 ports)" in alternatives
    assert "one HCA per 8-GPU node (256 endpoints) at 2:1 with QM9700: 10 switches (8 leaf + 2 spine) ✓" in alternatives


def test_feasible_question_and_bad_question():
    yes = can_i(gpus=256, switches=12)
    assert yes.feasible and yes.needed["switches"] == 12
    bad = can_i(gpus=256, switches=0)
    assert not bad.feasible and "switches must be at least 1" in bad.steps[0]


def test_compare_rows():
    rows = compare(
        [
            {"topology": "rail-optimized", "gpus": 2048},
            {"topology": "fat-tree", "gpus": 2048, "oversubscription": "2:1"},
        ],
        labels=["superpod", "cheap"],
    )
    assert [r["label"] for r in rows] == ["superpod", "cheap"]
    assert rows[0]["switches"] == 96 and rows[1]["switches"] < 96
    assert rows[1]["cost"] < rows[0]["cost"]
    assert rows[1]["bisection_bandwidth_gbps"] < rows[0]["bisection_bandwidth_gbps"]
    assert "superpod" in comparison_table(rows)


def test_diff_lists_added_removed_changed(one_su):
    edited = one_su.copy()
    edited.remove_switch("spine-04")
    edited.add_switch("spine-05", "QM9700", "spine")
    edited.connect("su01-leaf-r1", 57, "spine-05", 1, cable="NDR-MMF", length_m=10)
    edited.set_cable("su01-n01", 1, "NDR-SMF")
    edited.switches["spine-01"].rack = "n9999"
    d = diff_graphs(one_su, edited)
    assert d.added_switches == ["spine-05"] and d.removed_switches == ["spine-04"]
    assert len(d.removed_links) == 64 and len(d.added_links) == 1
    assert d.changed_switches == [
        {
            "name": "spine-01",
            "field": "rack",
            "old": one_su.switches["spine-01"].rack,
            "new": "n9999",
        }
    ]
    assert d.changed_links[0]["field"] == "cable" and d.changed_links[0]["new"] == "NDR-SMF"
    assert new_guid_is_unique(edited)
    assert diff_graphs(one_su, one_su.copy()).empty


def new_guid_is_unique(graph) -> bool:
    guids = [s.guid for s in graph.switches.values()]
    return len(guids) == len(set(guids))
