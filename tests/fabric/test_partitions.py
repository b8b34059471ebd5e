"""partitions.conf: renderer, the project's own parser, and the linter that guards OpenSM."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.fabric.opensm.lint import OPENSM_MAX_LINE, ArtefactRejected
from console.fabric.opensm.partitions import (
    DEFAULT_PARTITION,
    PORT_KEYWORDS,
    Member,
    Membership,
    Partition,
    lint_partitions,
    parse_partitions,
    render_partitions,
)

GUID_A = 0x0002C90300002001
GUID_B = 0x0002C90300002011


def codes(text: str, **kw) -> list[str]:
    return [p.code for p in lint_partitions(text, **kw)]


def test_render_always_has_the_default_rule_first():
    text = render_partitions([Partition("resv1", 0x0003, members=[Member(GUID_A)])])
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    # Isolation by default: hosts limited, the SM and the switches full.
    assert lines[0] == "Default=0x7fff, ipoib : ALL=limited, ALL_SWITCHES=full, SELF=full ;"
    assert lines[1] == "resv1=0x0003 : 0x0002c90300002001=full ;"


def test_render_without_default_when_told():
    text = render_partitions([Partition("a", 0x0010)], include_default=False)
    assert "Default" not in text
    assert codes(text) == ["missing-default"]
    assert codes(text, require_default=False) == []


def test_render_is_deterministic_regardless_of_input_order():
    a = Partition("a", 0x0010, members=[Member(GUID_B), Member("ALL_CAS", "limited"), Member(GUID_A)])
    b = Partition("b", 0x0002)
    one = render_partitions([a, b])
    two = render_partitions([b, Partition("a", 0x0010, members=list(reversed(a.members)))])
    assert one == two
    assert one.index("b=0x0002") < one.index("a=0x0010")
    assert one.index("ALL_CAS=limited") < one.index("0x0002c90300002001")


def test_large_partition_wraps_and_no_line_exceeds_opensm_limit():
    members = [Member(GUID_A + 2 * i, "full") for i in range(4000)]
    text = render_partitions([Partition("big", 0x0042, ipoib=True, members=members)])
    assert max(len(line) for line in text.splitlines()) < 400 < OPENSM_MAX_LINE
    assert lint_partitions(text) == []
    assert len(parse_partitions(text)[1].members) == 4000


def test_render_refuses_what_could_not_lint():
    with pytest.raises(ValueError, match="outside"):
        render_partitions([Partition("x", 0x8001)])
    with pytest.raises(ValueError, match="duplicate pkey"):
        render_partitions([Partition("x", 3), Partition("y", 3)])
    with pytest.raises(ValueError, match="reserved"):
        render_partitions([Partition("x", 0x7FFF)])
    with pytest.raises(ValueError, match="listed twice"):
        render_partitions([Partition("x", 3, members=[Member(GUID_A), Member(GUID_A, "limited")])])


@pytest.mark.parametrize(
    ("body", "code", "line"),
    [
        ("x=0x8001 : ALL ;", "pkey-range", 2),
        ("x=0x0000 : ALL ;", "pkey-range", 2),
        ("x=0xzz : ALL ;", "bad-pkey", 2),
        ("x=12 : ALL ;", "bad-pkey", 2),
        ("x : ALL ;", "missing-pkey", 2),
        ("x=0x7fff : ALL ;", "bad-pkey", 2),
        ("x=0x0003 : 0x0002c90300002001=ful ;", "bad-membership", 2),
        ("x=0x0003, defmember=ful : ALL ;", "bad-membership", 2),
        ("x=0x0003 : 0x0002c90300002001, AL=full ;", "bad-guid", 2),
        ("x=0x0003 : 0123 ;", "bad-guid", 2),
        ("x=0x0003 : 0x00000000000000000 ;", "bad-guid", 2),
        ("x=0x0003 : 0x0 ;", "bad-guid", 2),
        ("x=0x0003, ipob : ALL ;", "unknown-flag", 2),
        ("x=0x0003, mtu=9 : ALL ;", "bad-flag", 2),
        ("x=0x0003 : ALL", "unterminated", 2),
        ("x=0x0003 ALL ;", "syntax", 2),
        ("x=0x0003 : ALL, ALL ;", "duplicate-member", 2),
        ("x=0x0003 :\n mgid=ff12:401b::16 ;", "unsupported", 3),
        ("bad name=0x0003 : ALL ;", "bad-name", 2),
    ],
)
def test_lint_refuses_with_precise_line(body, code, line):
    text = "Default=0x7fff, ipoib : ALL=full ;\n" + body + "\n"
    problems = lint_partitions(text)
    assert (code, line) in [(p.code, p.line) for p in problems], problems


def test_lint_refuses_duplicate_keys_and_names_naming_the_first_line():
    text = "Default=0x7fff : ALL=full ;\na=0x0003 : ALL ;\nb=0x0003 : SELF ;\na=0x0004 : ALL ;\n"
    problems = {p.code: p for p in lint_partitions(text)}
    assert problems["duplicate-pkey"].line == 3
    assert "line 2" in problems["duplicate-pkey"].message
    assert "merge" in problems["duplicate-pkey"].message
    assert problems["duplicate-name"].line == 4


def test_lint_refuses_missing_default_and_long_lines():
    assert codes("a=0x0003 : ALL ;\n") == ["missing-default"]
    long = "Default=0x7fff : ALL=full ;\nx=0x0003 : " + "0x0002c90300002001, " * 300 + ";\n"
    assert "line-too-long" in codes(long)


def test_lint_refuses_unparseable_text():
    assert codes("this is not a partitions file\n") == ["missing-default", "syntax"]
    assert "control-char" in codes("Default=0x7fff : ALL=full ;\x00\n")


def test_lint_accepts_opensm_multiline_statements_and_comments():
    text = (
        "# comment\nDefault=0x7fff, ipoib : ALL=full ; # trailing\n"
        "t=0x0003, ipoib, mtu=5, rate=7, sl=1, defmember=limited :\n"
        "   0x0002c90300002001=full,\n   0x0002c90300002011,\n   SELF=both ;\n"
    )
    assert lint_partitions(text) == []
    t = parse_partitions(text)[1]
    assert (t.mtu, t.rate, t.sl, t.defmember) == (5, 7, 1, Membership.LIMITED)
    assert [t.effective_membership(m) for m in t.members] == [
        Membership.FULL,
        Membership.LIMITED,
        Membership.BOTH,
    ]


def test_parse_refuses_dirty_text():
    with pytest.raises(ArtefactRejected) as exc:
        parse_partitions("x=0x0003 : ALL ;\n")
    assert exc.value.problems[0].code == "missing-default"


guids = st.integers(min_value=1, max_value=(1 << 64) - 1)
members = st.lists(
    st.builds(
        Member,
        st.one_of(guids, st.sampled_from(PORT_KEYWORDS)),
        st.sampled_from([*Membership, None]),
    ),
    max_size=40,
    unique_by=lambda m: m.port,
)
partitions = st.builds(
    Partition,
    name=st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True).filter(lambda n: n != "Default"),
    pkey=st.integers(min_value=1, max_value=0x7FFE),
    ipoib=st.booleans(),
    mtu=st.none() | st.integers(1, 5),
    rate=st.none() | st.integers(2, 22),
    sl=st.none() | st.integers(0, 15),
    defmember=st.none() | st.sampled_from(list(Membership)),
    members=members,
)
partition_sets = st.lists(partitions, max_size=8, unique_by=lambda p: p.pkey).filter(
    lambda ps: len({p.name for p in ps}) == len(ps)
)


@settings(max_examples=200, deadline=None)
@given(partition_sets, st.integers(min_value=1, max_value=20))
def test_render_always_lints_clean_and_round_trips(ps, per_line):
    text = render_partitions(ps, members_per_line=per_line)
    assert lint_partitions(text) == []
    parsed = parse_partitions(text)
    expected = sorted([DEFAULT_PARTITION, *ps], key=lambda p: (p.pkey != 0x7FFF, p.pkey))
    assert [p.pkey for p in parsed] == [p.pkey for p in expected]
    for got, want in zip(parsed, expected, strict=True):
        assert got.name == want.name
        assert (got.ipoib, got.mtu, got.rate, got.sl, got.defmember) == (
            want.ipoib,
            want.mtu,
            want.rate,
            want.sl,
            want.defmember,
        )
        assert sorted(got.members, key=Member.sort_key) == sorted(want.members, key=Member.sort_key)
