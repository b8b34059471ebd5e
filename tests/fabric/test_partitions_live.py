"""Files the console did not write: partitions.conf as OpenSM reads it, the operator block, and
opensm.conf edited in place. Expectations come from OpenSM's own documentation and output
(tests/fabric/fixtures/realdata), read here independently of the code under test."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.fabric.opensm.conf import MANAGED_MARK, edit_opensm_conf, lint_opensm_conf, parse_opensm_conf
from console.fabric.opensm.isolation import leaks
from console.fabric.opensm.partitions import Member, Membership, Partition
from console.fabric.opensm.partitions_file import (
    BEGIN,
    END,
    OperatorPartition,
    hand_written,
    lint_file,
    live_differences,
    parse_file,
    render_file,
)
from console.fabric.opensm.partitions_live import as_partitions, read_live

REALDATA = Path(__file__).parent / "fixtures" / "realdata"
DOC = (REALDATA / "opensm_doc_partition-config.txt").read_text()
DEFAULT_CONF = (REALDATA / "opensm_3.3.23_default_generated.conf").read_text()
G1, G2 = 0x0002C90300002001, 0x0002C90300002011


def doc_examples() -> str:
    """The 'Examples' section of OpenSM's partition-config.txt."""
    start = DOC.index("Examples:")
    return DOC[DOC.index("\n", DOC.index("--------", start)) : DOC.index("Note:\n----")]


def test_the_documented_examples_read_as_the_documentation_says():
    live = read_live(doc_examples())
    assert live.problems == []
    by_name: dict[str, list] = {}
    for st in live.statements:
        by_name.setdefault(st.name, []).append(st)
    # "NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;": no P_Key given,
    # "limi" is read as limited, a bare GUID is limited (the default membership).
    (new,) = by_name["NewPartition"]
    assert new.pkey is None and new.ipoib
    assert dict(new.members) == {
        0x123456: Membership.FULL,
        0x3456789034: Membership.LIMITED,
        0x2134AF2306: Membership.LIMITED,
    }
    # ShareIO = 0x80 in five statements; the comments say which GUIDs end up limited.
    share = as_partitions(by_name["ShareIO"])
    assert len(share) == 1 and share[0].pkey == 0x80
    membership = {m.port: m.membership for m in share[0].members}
    assert membership[0x123453] == membership[0x123454] == Membership.LIMITED  # "will be limited"
    assert membership[0x123456] == membership[0x123457] == Membership.LIMITED
    assert membership[0x123451] == membership[0x12345B] == membership[0x12345D] == Membership.FULL
    assert membership[0x12345C] == Membership.LIMITED
    # The Default with multicast groups: mgid lines consumed, "ALL=full" on the last line kept.
    default_with_groups = by_name["Default"][-1]
    assert default_with_groups.has_mgid and ("ALL", Membership.FULL) in default_with_groups.members


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Default=0x7fff ALL=full ;\n", "syntax"),  # no ':' on the line
        ("a=0x12g : 0x1 ;\n", "bad-pkey"),
        ("a=0x12 : 0x12zz ;\n", "bad-guid"),
        ("a=0x12 : 0 ;\n", "bad-guid"),  # OpenSM refuses GUID 0
        ("# only a comment\n", "empty"),
        ("a=0x12 : " + "0x1, " * 1000 + ";\n", "line-too-long"),
    ],
)
def test_what_makes_opensm_drop_the_whole_file_is_found(text, code):
    assert code in {p.code for p in read_live(text).problems}


def test_opensm_readings_of_numbers_and_abbreviations():
    live = read_live("x=0x8042, i : 4660=f, 010=b, AL=l, N ;\n")
    (st,) = live.statements
    assert st.pkey == 0x42 and st.ipoib  # the membership bit dropped; "i" is ipoib
    assert st.members == ((4660, Membership.FULL), (8, Membership.BOTH), ("ALL", Membership.LIMITED))


def test_a_later_specifier_overrides_an_earlier_one_in_the_console_order_too():
    (p,) = as_partitions(read_live(f"s=0x10 : {G1:#x}=limited, ALL=full ;\n").statements)
    assert [(m.port, m.membership) for m in p.members] == [("ALL", Membership.FULL)]
    owners = {G1: "tenant:1", G2: "tenant:2"}
    assert leaks([p], owners, hosts=[G1, G2])  # ALL=full after: both tenants full


def console_file(*operator: OperatorPartition) -> str:
    parts = [Partition("res-1", 0x0101, members=[Member(G1)])]
    return render_file(parts, operator=list(operator))


STORAGE = OperatorPartition(0x0042, "storage", "# lustre\nstorage=0x0042, ipoib : 0x0002c90300002011=full ;\n")


def test_the_operator_block_is_linted_as_opensm_reads_it_and_kept_verbatim():
    text = console_file(STORAGE)
    assert f"{BEGIN}\n# lustre\nstorage=0x0042, ipoib : 0x0002c90300002011=full ;\n{END}\n" in text
    assert lint_file(text) == []
    assert [p.pkey for p in parse_file(text)] == [0x7FFF, 0x0101]  # the console's only
    groups = OperatorPartition(0x0043, "mc", "mc=0x43, ipoib :\n  mgid=ff12:401b::0707,sl=1\n  12345=full ;\n")
    assert lint_file(console_file(groups)) == []  # multicast groups, a decimal GUID: OpenSM's syntax
    clash = OperatorPartition(0x0101, "other", "other=0x0101 : ALL=full ;\n")
    assert "duplicate-pkey" in {p.code for p in lint_file(console_file(clash))}
    broken = OperatorPartition(0x0044, "b", "b=0x0044 : 0x2cg ;\n")
    assert "bad-guid" in {p.code for p in lint_file(console_file(broken))}


def test_hand_written_partitions_are_those_the_console_never_wrote():
    last = console_file()
    hand = "# storage, added on the SM host\nstorage=0x0042 : 0x0002c90300002011=full ;\n"
    live = last + hand
    (found,) = hand_written(live, last, rendered={0x0102})
    assert (found.pkey, found.name, found.raw) == (0x0042, "storage", hand)
    # res-1 (0x0101) was the console's: once no longer rendered it is not kept.
    assert [p.pkey for p in hand_written(live, last, rendered=set())] == [0x0042]
    # An operator block the console copied stays the operator's on the next push.
    copied = console_file(STORAGE)
    assert [p.pkey for p in hand_written(copied, copied, rendered={0x0101})] == [0x0042]
    assert hand_written(copied, copied, rendered={0x0101, 0x0042}) == []  # known to the console
    assert hand_written("broken : ;\nx", last, rendered=set()) == []  # OpenSM would drop it anyway


def test_live_differences_see_members_not_formatting():
    wanted = parse_file(console_file())
    same = "Default=0x7fff,ipoib: ALL=limited, ALL_SWITCHES=full,SELF=full;\nres-1=0x101:0x0002c90300002001=full;\n"
    assert live_differences(same, wanted) == []
    assert live_differences(same.replace("2001=full;", "2001=limited;"), wanted) == [
        "live partitions.conf has other members in res-1 (0x0101)"
    ]
    assert live_differences(same.split("\n")[0], wanted) == ["live partitions.conf lacks res-1 (0x0101)"]


def test_an_opensm_written_conf_lints_and_keeps_every_line_when_edited():
    assert "(null)" in DEFAULT_CONF and lint_opensm_conf(DEFAULT_CONF) == []
    wanted = {"sm_key": "0x0000000000001234", "qos": "TRUE", "sminfo_polling_timeout": "1000", "x_new": "1"}
    edited = edit_opensm_conf(DEFAULT_CONF, wanted)
    before, after = DEFAULT_CONF.splitlines(), edited.splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    assert sorted(changed) == [
        ("qos FALSE", "qos TRUE"),
        ("sm_key 0x0000000000000001", "sm_key 0x0000000000001234"),
        ("sminfo_polling_timeout 10000", "sminfo_polling_timeout 1000"),
    ]
    assert before[-1] == "" and after[len(before) :] == [MANAGED_MARK, "x_new 1"]  # after the file's last line
    assert [line for line in after if line.startswith("#")] == [
        *(line for line in before if line.startswith("#")),
        MANAGED_MARK,
    ]
    assert parse_opensm_conf(edited)["sm_key"] == "0x0000000000001234"
    assert edit_opensm_conf(edited, wanted) == edited  # idempotent
