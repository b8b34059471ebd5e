"""Reading a search query: GUIDs in every spelling, LIDs, P_Keys, cables (pure, no database)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from console.telemetry.searchquery import format_guid, parse, parse_guid

GUID = 0x0002C90300A1B2C3


def spellings(value: int) -> list[str]:
    digits = f"{value:016x}"
    pairs = [digits[i : i + 2] for i in range(0, 16, 2)]
    quads = [digits[i : i + 4] for i in range(0, 16, 4)]
    return [
        f"0x{digits}",
        digits,
        digits.upper(),
        f"0X{digits.upper()}",
        ":".join(pairs),
        ":".join(pairs).upper(),
        ":".join(quads),
        f"{value:#x}",  # leading zeros dropped, as ibstat prints them
    ]


def test_every_common_guid_spelling_reads_as_the_same_guid():
    for text in spellings(GUID):
        assert parse(text).guid == GUID, text
    assert format_guid(GUID) == "0x0002c90300a1b2c3"


@given(st.integers(min_value=0x10000, max_value=2**64 - 1))
def test_any_guid_round_trips_through_any_spelling(value):
    for text in spellings(value):
        if text == f"{value:#x}" and len(text) <= 6:
            continue  # 0x + 4 digits or fewer is a P_Key
        assert parse(f"  {text} ").guid == value, text


def test_lids():
    assert parse("lid:123").lid == 123 and parse("lid:123").explicit_lid
    assert parse("LID 0x7b").lid == 123
    assert parse("lid=7").lid == 7
    bare = parse("42")
    assert bare.lid == 42 and bare.number == 42 and not bare.explicit_lid
    assert parse("lid:0").lid is None  # LID 0 is reserved
    assert parse("lid:49152").lid is None  # multicast range


def test_pkeys_ignore_the_full_membership_bit():
    assert parse("0x8a11").pkey == 0x0A11
    assert parse("0x0a11").pkey == 0x0A11
    assert parse("0xA11").pkey == 0x0A11
    assert parse("0x7fff").pkey == 0x7FFF
    assert parse("0x8a11").guid is None


@given(st.integers(min_value=1, max_value=0x7FFE), st.booleans())
def test_any_pkey_with_or_without_membership(pkey, full):
    assert parse(f"{pkey | (0x8000 if full else 0):#06x}").pkey == pkey


def test_cables_name_a_switch_port():
    assert parse("leaf-su1-1[12]").cable == ("leaf-su1-1", 12)
    assert parse("spine/1 [ 3 ]").cable == ("spine/1", 3)
    assert parse("leaf[]").cable is None


def test_names_are_only_names():
    q = parse("  dgx   h100 ")
    assert q.text == "dgx h100"
    assert (q.guid, q.lid, q.pkey, q.cable, q.number) == (None, None, None, None, None)
    assert parse("dead").guid is None  # four hex digits is a word, not a GUID
    assert parse("").empty and parse("   ").empty
    assert parse_guid("00:02:zz") is None
    assert parse_guid("0x" + "f" * 17) is None


@given(st.text(max_size=300))
@example("²")  # a Unicode digit int() refuses (found by this test in CI)
@example("lid:٣")
@example("leaf01[٣]")
def test_any_text_parses_without_error(text):
    q = parse(text)
    assert len(q.text) <= 200
    if q.pkey is not None:
        assert 0 <= q.pkey <= 0x7FFF
