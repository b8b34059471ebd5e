"""The lab's PHY readings are mlxlink's layout: what ``lab phy set`` and the demo write reads back
through the same parser as a real recording, and lays out as the recorded files do."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.fabric.lab.phy import HEALTHY, mlxlink_text, parse_assignments
from console.fabric.lab.spec import LabError
from designer.imports import phy

RECORDED = Path(__file__).resolve().parents[1] / "data" / "phy" / "healthy_ndr_optic.txt"


def test_what_the_lab_writes_reads_back_as_it_was_set():
    assert phy.parse(mlxlink_text(HEALTHY)) == HEALTHY
    hot = phy.PhyReading(**{**HEALTHY.__dict__, "temperature": 79.0, "effective_ber": 3e-11})
    text = mlxlink_text(hot)
    assert "Temperature [C]                    : 79 [-5..75]" in text
    assert "Effective Physical BER             : 30E-12" in text
    assert phy.parse(text) == hot
    assert phy.over(phy.parse(text)) == ["module at 79 °C, above 75 °C", "effective (post-FEC) BER 3.0E-11 > 1E-11"]


def test_its_lines_are_laid_out_as_a_recorded_file():
    recorded = {line.split(":", 1)[0] for line in RECORDED.read_text().splitlines() if ":" in line}
    written = [line for line in mlxlink_text(HEALTHY).splitlines() if ":" in line]
    for line in written:
        key = line.split(":", 1)[0]
        assert key in recorded, line  # the same key, padded to the same column


def test_values_are_checked():
    assert parse_assignments(["temperature=79", "raw_ber=2e-6"]) == {"temperature": 79.0, "raw_ber": 2e-6}
    with pytest.raises(LabError, match="not a PHY value: 'voltage=3'"):
        parse_assignments(["voltage=3"])
    with pytest.raises(LabError, match="temperature: 'hot' is not a number"):
        parse_assignments(["temperature=hot"])
