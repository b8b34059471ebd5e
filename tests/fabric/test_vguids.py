"""Virtual port GUIDs (pod VFs) and OpenSM's indx0 in the fabric's plain functions: each
reservation's vGUID range, the verifier leaving virtual members unchecked, indx0 rendered and read."""

from __future__ import annotations

import pytest

from console.fabric.opensm.partitions import Member, Partition, parse_partitions, render_partitions
from console.fabric.opensm.push_types import PushOptions
from console.fabric.opensm.verify import expected_checks, virtual_members
from console.fabric.opensm.vguids import DEFAULT_PREFIX, is_virtual, owner_of, parse_prefix, reservation_range

HOST = 0x0002C90300000101


def test_ranges_are_the_prefix_the_reservation_and_4096_vfs_and_never_overlap():
    r42 = reservation_range(DEFAULT_PREFIX, 42)
    assert r42 is not None and (r42.start, r42.end) == ("02:C0:FF:EE:00:02:A0:00", "02:C0:FF:EE:00:02:AF:FF")
    r43 = reservation_range(DEFAULT_PREFIX, 43)
    assert r43 is not None and r42.last + 1 == r43.first
    assert r42.first in r42 and r42.last in r42 and r43.first not in r42 and HOST not in r42
    assert owner_of(r42.first + 5, DEFAULT_PREFIX) == 42 and owner_of(HOST, DEFAULT_PREFIX) is None
    assert is_virtual(r42.first, DEFAULT_PREFIX) and not is_virtual(HOST, DEFAULT_PREFIX)
    assert reservation_range(DEFAULT_PREFIX, 0) is None and reservation_range(DEFAULT_PREFIX, 1 << 20) is None


@pytest.mark.parametrize("text", ["02:c0:ff:ee", "0x02C0FFEE", "02c0ffee", "02-C0-FF-EE"])
def test_prefix_spellings(text):
    assert parse_prefix(text) == DEFAULT_PREFIX


@pytest.mark.parametrize("bad", ["", "02:c0:ff", "02:c0:ff:ee:00", "zz:c0:ff:ee", "00:00:00:00"])
def test_bad_prefixes_are_refused(bad):
    with pytest.raises(ValueError):
        parse_prefix(bad)


def test_virtual_members_get_no_port_check_physical_ones_do():
    owned = reservation_range(DEFAULT_PREFIX, 7)
    assert owned is not None
    vf = owned.first
    part = Partition("res-7", 0x10, members=(Member(HOST), Member(vf)))
    options = PushOptions(virtual_prefix=DEFAULT_PREFIX, non_member_sample=0)
    checks = expected_checks([part], [], [HOST, HOST + 2], options)
    assert [(c.guid, c.membership) for c in checks] == [(HOST, "full")]
    assert virtual_members([part], options) == 1
    # without the prefix the VF is a port like any other (and would be reported missing)
    assert {c.guid for c in expected_checks([part], [], [HOST], PushOptions(non_member_sample=0))} == {HOST, vf}


def test_indx0_is_a_flag_of_the_partition_definition_and_reads_back():
    part = Partition("api_pkey_0xa2b", 0xA2B, ipoib=True, indx0=True, members=(Member(HOST),))
    text = render_partitions([part])
    assert "api_pkey_0xa2b=0x0a2b, indx0, ipoib : 0x0002c90300000101=full ;" in text
    (_, back) = parse_partitions(text)
    assert back.indx0 and back == part
    assert "indx0" not in render_partitions([Partition("p", 0x5, members=(Member(HOST),))])
