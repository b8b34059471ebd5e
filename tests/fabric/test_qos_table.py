"""The QoS table (class → SL/VL/weight): defaults, validation, what it renders (no lab needed)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.fabric.opensm.conf import OpenSmConfig, lint_opensm_conf, render_opensm_conf
from console.fabric.opensm.qos_table import CLASSES, DEFAULT_TABLE, QosTable


def table_json(training: tuple, inference: tuple, best_effort: tuple, *, high_limit: int) -> dict:
    """A QoS table as the API takes it; each class is (SL, VL, table, weight)."""
    rows = {"training": training, "inference": inference, "best-effort": best_effort}
    return {
        "max_vls": 8,
        "high_limit": high_limit,
        "classes": {name: dict(zip(("sl", "vl", "table", "weight"), row, strict=True)) for name, row in rows.items()},
    }


def table(**changes: dict) -> QosTable:
    """The default table with some rows changed: ``table(training={"vl": 9})``."""
    rows = []
    for row in DEFAULT_TABLE.classes:
        rows.append(replace(row, **changes.get(row.name.replace("-", "_"), {})))
    return replace(DEFAULT_TABLE, classes=tuple(rows))


def test_default_table_renders_inference_high_training_and_best_effort_low():
    options = DEFAULT_TABLE.options()
    sl = {c.name: c.sl for c in DEFAULT_TABLE.classes}
    vl = {c.name: c.vl for c in DEFAULT_TABLE.classes}
    # every class's SL lands on its VL; every other SL on best-effort's VL
    expected_sl2vl = [vl["best-effort"]] * 16
    for name in CLASSES:
        expected_sl2vl[sl[name]] = vl[name]
    assert list(options.sl2vl) == expected_sl2vl
    assert list(options.vlarb_high) == [(vl["inference"], 64)]
    assert sorted(options.vlarb_low) == sorted([(vl["training"], 192), (vl["best-effort"], 64)])
    assert 0 < options.high_limit < 255  # bounded: low-priority VLs are never starved
    text = render_opensm_conf(OpenSmConfig(qos=options))
    assert lint_opensm_conf(text) == []
    assert "qos_vlarb_high 2:64\n" in text and "qos_sl2vl 0,1,2,0,0,0,0,0,0,0,0,0,0,0,0,0\n" in text


def test_json_round_trip():
    assert QosTable.from_json(DEFAULT_TABLE.to_json()) == replace(
        DEFAULT_TABLE, classes=tuple(sorted(DEFAULT_TABLE.classes, key=lambda c: CLASSES.index(c.name)))
    )


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (table(training={"vl": 8}), "training: VL 8 not below max_vls=8"),
        (table(inference={"weight": 256}), "inference: weight 256 outside 0-255"),
        (table(best_effort={"sl": 16}), "best-effort: SL 16 outside 0-15"),
        (table(inference={"sl": 1}), "inference: SL 1 already used by training"),
        (table(inference={"vl": 1}), "inference: VL 1 already used by training"),
        (table(training={"table": "middle"}), "training: table 'middle' must be 'high' or 'low'"),
        (replace(DEFAULT_TABLE, high_limit=300), "high_limit=300"),
        (replace(DEFAULT_TABLE, max_vls=3), "max_vls=3"),
        (replace(DEFAULT_TABLE, classes=DEFAULT_TABLE.classes[:2]), "classes must be exactly"),
        (table(training={"weight": 0}, best_effort={"weight": 0}), "low-priority table needs at least one"),
    ],
)
def test_invalid_tables_never_render(broken: QosTable, message: str):
    assert any(message in e for e in broken.validate()), broken.validate()
    with pytest.raises(ValueError, match="max_vls|VL|weight|SL|table|high_limit|classes"):
        broken.options()


def test_smaller_max_vls_moves_the_check():
    four = replace(table(training={"vl": 3}), max_vls=4)
    assert four.validate() == []
    assert replace(table(training={"vl": 4}), max_vls=4).validate() != []
