"""Negative fixtures of the validation tests that read one discovery, on real labs (ibsim and
OpenSM, the hand-written 2-spine, 4-leaf, 24-HCA fat tree): each fault is injected with ibsim
— a link cabled at 1x in the net file, a LID given twice through ibsim's console — and ibnetdiscover's report of the running lab fails its test, naming the offender; the
same lab before the fault passes (the positive fixture). Expected offenders come from the net
file and the injected values, not from the code under test.

(A duplicate GUID, and the tests that need the console — routes, error counters, P_Keys, the
SMs, cabling — run on a lab fabric through its agent: tests/fabric/test_validation_lab.py.)"""

from __future__ import annotations

import re

from designer.imports.health import guids, lids, link_rates
from designer.imports.ibnetdiscover import parse_ibnetdiscover
from tests.fabric.conftest import requires_lab

pytestmark = requires_lab

LEAF1_SPINE1 = re.compile(r'^(\[7\]\s+"S-0002c90300001100"\[1\].*)$', re.M)
SPINE1_LEAF1 = re.compile(r'^(\[1\]\s+"S-0002c90300001000"\[7\].*)$', re.M)


def discovered(lab):
    return parse_ibnetdiscover(lab.diags(timeout=30).run("ibnetdiscover").stdout)


def test_a_link_cabled_at_1x_fails_link_rates(start_lab, net_text):
    # ibsim reads a link's width from its lines' "lid N 4xNDR" (both ends must agree)
    narrow = LEAF1_SPINE1.sub(lambda m: m.group(1).replace("4xNDR", "1xNDR"), net_text)
    narrow = SPINE1_LEAF1.sub(lambda m: m.group(1).replace("4xNDR", "1xNDR"), narrow)
    assert narrow.count("1xNDR") == 2
    lab = start_lab("narrow", net_text=narrow)
    verdict = link_rates(discovered(lab))
    assert verdict.count == 1, verdict.offenders
    (offender,) = verdict.offenders
    assert "leaf1" in offender and "spine1" in offender and " runs at 1x" in offender
    assert "[7]" in offender and "[1]" in offender


def test_a_lid_given_twice_fails_lids(start_lab):
    lab = start_lab("clones")
    disc = discovered(lab)
    assert guids(disc).ok and lids(disc).ok and link_rates(disc).ok  # the healthy lab passes
    hca = {n.desc: n for n in disc.cas}
    first, third = hca["hca01"], hca["hca03"]
    taken = first.ports[0].lid
    assert taken
    lab.console(f'Baselid "{third.node_id}"[1] {taken}')
    by_lid = lids(discovered(lab))
    assert by_lid.count == 1
    assert by_lid.offenders[0].startswith(f"LID {taken}: ")
    assert "hca01" in by_lid.offenders[0] and "hca03" in by_lid.offenders[0]
