"""Fabric validation's tests on what the wire reports (designer.imports.health), on a real
582-HCA DGX H100 NDR dump (tests/data, topograph): it passes as recorded, and each test catches
its fault injected into the text (a cloned port GUID, a port with no LID, a LID given twice, a
link trained at 1x, two masters). Expected offenders are read from the text here, not from the
code under test."""

from __future__ import annotations

import re

import pytest

from designer.imports.health import as_csv, guids, lids, link_rates, subnet_managers, validate
from designer.imports.reader import read_topology
from tests.datafiles import IBNETDISCOVER

DUMP = IBNETDISCOVER / "topograph_dgx_h100_ndr_582ca_40sw.ibnetdiscover"


@pytest.fixture(scope="module")
def text() -> str:
    return DUMP.read_text()


def ca_port_lines(text: str) -> list[str]:
    """The CA port lines: ``[1](guid) "S-…"[n] # lid L lmc 0 "switch" lid S 4xNDR``."""
    return re.findall(r"^\[1\]\(([0-9a-f]+)\)\s+\"S-[0-9a-f]+\"\[\d+\]\s+# lid (\d+) .*$", text, re.M)


def test_the_recorded_fabric_passes_every_test(text):
    verdicts = validate(read_topology(text), {"ufm-1": "MASTER", "ufm-2": "STANDBY"})
    assert [(v.code, v.ok) for v in verdicts] == [
        ("guids", True),
        ("lids", True),
        ("link-rates", True),
        ("subnet-managers", True),
    ]
    # an independent reading: 582 CA records, each port GUID and LID once
    ports = ca_port_lines(text)
    assert len(re.findall(r"^Ca\t", text, re.M)) == 582
    assert len({g for g, _ in ports}) == len(ports) and len({lid for _, lid in ports}) == len(ports)


def clone_port_guid(text: str) -> tuple[str, str]:
    """The second CA's port GUID made the first's, on the CA's own port line (the switches' lines
    name the peer's GUID the same way, after its node id)."""
    (first, _), (second, _) = ca_port_lines(text)[:2]
    return re.sub(rf"^\[1\]\({second}\)", f"[1]({first})", text, count=1, flags=re.M), first


def test_a_cloned_port_guid_is_caught(text):
    broken, first = clone_port_guid(text)
    verdict = guids(read_topology(broken))
    assert not verdict.ok and verdict.count == 1
    assert f"port GUID 0x{int(first, 16):016x}" in verdict.offenders[0]


def test_a_port_without_a_lid_and_a_lid_given_twice_are_caught(text):
    (_, lid_a), (_, lid_b), (_, lid_c) = ca_port_lines(text)[:3]
    broken = re.sub(rf"# lid {lid_a} lmc 0", "# lid 0 lmc 0", text, count=1)
    broken = re.sub(rf"# lid {lid_c} lmc 0", f"# lid {lid_b} lmc 0", broken, count=1)
    verdict = lids(read_topology(broken))
    assert verdict.count == 2
    assert any(o.endswith("has no LID") for o in verdict.offenders)
    assert any(o.startswith(f"LID {lid_b}: ") and o.count(" port ") == 2 for o in verdict.offenders)


def test_a_link_trained_at_1x_is_caught(text):
    line = re.search(r"^\[1\]\([0-9a-f]+\)\s+\"S-[0-9a-f]+\"\[\d+\].*4xNDR$", text, re.M).group(0)
    broken = text.replace(line, line.replace("4xNDR", "1xNDR"), 1)
    # the switch's side of the same cable says so too
    guid = re.match(r"\[1\]\(([0-9a-f]+)\)", line).group(1)
    switch_side = re.search(rf'^\[\d+\]\s+"H-{guid}"\[1\].*4xNDR$', broken, re.M).group(0)
    broken = broken.replace(switch_side, switch_side.replace("4xNDR", "1xNDR"), 1)
    verdict = link_rates(read_topology(broken))
    assert verdict.count == 1 and "runs at 1xNDR" in verdict.offenders[0]


def test_one_master_no_more_no_less():
    assert subnet_managers({"sm1": "MASTER", "sm2": "STANDBY"}).ok
    two = subnet_managers({"sm1": "MASTER", "sm2": "MASTER"})
    assert not two.ok and two.offenders == ["several masters: sm1, sm2"]
    none = subnet_managers({"sm1": "DISCOVERING"})
    assert not none.ok and "sm1: DISCOVERING" in none.offenders[0]


def test_the_report_as_csv_names_every_offender_and_its_fix(text):
    broken, _ = clone_port_guid(text)
    rows = as_csv([v.as_dict() for v in validate(read_topology(broken), None)]).splitlines()
    assert rows[0] == "code,status,offender,fix"
    failed = [r for r in rows[1:] if r.startswith("guids,fail,")]
    assert len(failed) == 1 and "Reprogram" in failed[0]
    assert sum(r.startswith(("lids,pass,", "link-rates,pass,")) for r in rows) == 2
