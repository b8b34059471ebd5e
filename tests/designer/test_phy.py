"""The PHY test of fabric validation on recorded mlxlink readings (tests/data/phy), judged against
NVIDIA's field BER thresholds: the limits each assertion expects are read here from NVIDIA's
table by its own columns, not through the code under test."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from designer.imports import phy

DATA = Path(__file__).resolve().parents[1] / "data" / "phy"
TABLE = Path(phy.__file__).with_name("data") / "field_ber_thresholds.csv"


def nvidia(asic: str, speed: str, fec_type: str, media: str) -> dict[str, float]:
    """One row of NVIDIA's table, by its own words, its Error columns."""
    with TABLE.open(newline="") as fh:
        (row,) = [
            r
            for r in csv.DictReader(fh)
            if (r["ASIC"], r["Protocol"], r["Speed"], r["FEC TYPE"], r["Media Type"])
            == (asic, "IB", speed, fec_type, media)
        ]
    return {
        "raw": float(row["Pre-FEC BER Error"]),
        "effective": float(row["Post-FEC BER Error"]),
        "symbol": float(row["Symbol BER Error"]),
    }


def read(name: str) -> phy.PhyReading:
    return phy.parse((DATA / name).read_text())


def test_a_reading_is_what_mlxlink_printed():
    r = read("healthy_ndr_optic.txt")
    assert (r.speed, r.media, r.firmware) == ("NDR", "Active", "31.2012.2256")
    assert r.fec == "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)"
    assert (r.temperature, r.temperature_range) == (47.0, (-5.0, 75.0))
    assert (r.raw_ber, r.effective_ber, r.symbol_ber) == (3e-9, 1.5e-254, 1.5e-254)
    dac = read("healthy_ndr_dac.txt")
    assert dac.media == "DACs"
    assert dac.temperature is None and dac.temperature_range is None  # 0 [0..0]: no sensor
    # the --json form carries the same fields (per-lane values as lists)
    j = read("symbol_ber_edr_cx5.json")
    assert (j.speed, j.fec, j.firmware, j.media) == ("EDR", "Standard LL RS-FEC - RS(271,257)", "16.35.2000", "Active")
    assert (j.temperature, j.temperature_range, j.symbol_ber, j.raw_ber) == (72.0, None, 5e-13, 9e-10)
    assert phy.PhyReading.from_json(j.as_json()) == j


def test_healthy_ports_pass():
    readings = {name: read(name) for name in ("healthy_ndr_optic.txt", "healthy_ndr_dac.txt")}
    verdict = phy.phy(readings)
    assert verdict.status == "pass" and verdict.offenders == []


def test_each_port_past_its_limits_is_named_with_what_and_by_how_much():
    ndr_dac = nvidia("7nm", "NDR", "Ethernet_Consortium_LL_50G_RS_FEC_PLR (14)", "DACs")
    hdr_dac = nvidia("16nm", "HDR", "KP4_Standard_RS_FEC_PLR (12)", "DACs")
    edr_optic = nvidia("16nm", "EDR", "STD_LL_RS (3)", "Active")
    assert (ndr_dac["effective"], ndr_dac["symbol"], ndr_dac["raw"]) == (1e-11, 1e-14, 1e-6)
    names = [p.name for p in sorted(DATA.iterdir()) if p.suffix in (".txt", ".json")]
    verdict = phy.phy({name: read(name) for name in names})
    assert verdict.status == "fail"
    got = dict(o.split(": ", 1) for o in verdict.offenders)
    assert got == {
        # 3E-11 past the 1E-11 of NDR, FEC mode 14, copper; its symbol BER too; raw 8E-7 is under 1E-6
        "effective_ber_ndr_dac.txt": f"effective (post-FEC) BER 3.0E-11 > {ndr_dac['effective']:.0E}; "
        f"symbol BER 2.0E-13 > {ndr_dac['symbol']:.0E}",
        # the module's own alarm range is [-5..75]
        "hot_ndr_optic.txt": "module at 79 °C, above 75 °C",
        # a ConnectX-6 (firmware 20: 16 nm) at HDR, RS-FEC (544,514) + PLR = mode 12
        "raw_ber_hdr_cx6.txt": f"raw (pre-FEC) BER 4.0E-05 > {hdr_dac['raw']:.0E}",
        # no alarm range in the module: UFM's PDR default of 70 °C; a ConnectX-5 (16 nm) EDR optic
        "symbol_ber_edr_cx5.json": f"module at 72 °C, above 70 °C; raw (pre-FEC) BER 9.0E-10 > {edr_optic['raw']:.0E}; "
        f"effective (post-FEC) BER 5.0E-13 > {edr_optic['effective']:.0E}; symbol BER 5.0E-13 > {edr_optic['symbol']:.0E}",
        # an FEC the table does not know: the loosest NDR copper row (1E-6), and 2E-6 is past it
        "unknown_fec_ndr_dac.txt": "raw (pre-FEC) BER 2.0E-06 > 1E-06",
    }
    assert verdict.count == 5


def test_what_the_reading_does_not_say_leaves_every_row_possible():
    """The limit is the loosest of the rows a reading may be: unknown firmware widens to both ASIC
    generations (HDR DAC mode 12: 1E-7 at 7 nm, 1E-5 at 16 nm)."""
    hdr = read("raw_ber_hdr_cx6.txt")
    loose = nvidia("16nm", "HDR", "KP4_Standard_RS_FEC_PLR (12)", "DACs")["raw"]
    strict = nvidia("7nm", "HDR", "KP4_Standard_RS_FEC_PLR (12)", "DACs")["raw"]
    assert strict < loose
    cx7 = phy.PhyReading(**{**hdr.__dict__, "firmware": "28.39.1002", "raw_ber": strict * 3})
    assert phy.over(cx7) == [f"raw (pre-FEC) BER {strict * 3:.1E} > {strict:.0E}"]
    unknown = phy.PhyReading(**{**cx7.__dict__, "firmware": ""})
    assert phy.over(unknown) == []  # it may be a 16 nm ASIC, whose limit it is under
    ethernet = phy.PhyReading(speed="", raw_ber=1e-3)
    assert phy.limits_for(ethernet) is None and phy.over(ethernet) == []


def test_a_directory_of_readings_by_device_and_port(tmp_path):
    shutil.copy(DATA / "hot_ndr_optic.txt", tmp_path / "lid-12_3.txt")
    shutil.copy(DATA / "healthy_ndr_dac.txt", tmp_path / "0x98039B0300867BBA_1.txt")
    shutil.copy(DATA / "symbol_ber_edr_cx5.json", tmp_path / "mlx5_0_1.json")
    (tmp_path / "notes.txt").write_text("who knows")
    readings, unread = phy.read_dir(tmp_path)
    assert set(readings) == {("lid-12", 3), ("0x98039b0300867bba", 1), ("mlx5_0", 1)}
    assert readings[("lid-12", 3)].temperature == 79.0
    assert unread == ["notes.txt: not named <device>_<port> (lid-12_3.txt, 0x<guid>_1.txt)"]
    assert phy.read_dir(tmp_path / "missing") == ({}, [])


def test_no_readings_is_a_skip_that_says_why():
    verdict = phy.phy({}, ["x.txt: not named <device>_<port> (lid-12_3.txt, 0x<guid>_1.txt)"])
    assert verdict.status == "skip"
    assert verdict.as_dict()["why"].startswith("this fabric reports no transceiver temperature or BER")
    assert "unreadable: x.txt" in verdict.as_dict()["why"]


@pytest.mark.parametrize("value", ["N/A", "", "garbage"])
def test_unreported_values_are_none(value):
    text = (DATA / "healthy_ndr_optic.txt").read_text().replace("47 [-5..75]", value)
    assert phy.parse(text).temperature is None
