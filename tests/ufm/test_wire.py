"""UFM's wire vocabulary: GUID and P_Key spellings, request bodies (plain functions, no database)."""

from __future__ import annotations

import pytest

from console.ufm.wire import UfmError, parse_guid, parse_guids, parse_guids_request, parse_pkey, ufm_guid

GUID = 0x0002C90300000101


@pytest.mark.parametrize(
    "spelling",
    [
        "0002c90300000101",  # UFM's and ib-kubernetes's
        "0002C90300000101",
        "0x0002c90300000101",  # the console's
        "0X0002C90300000101",
        "00:02:c9:03:00:00:01:01",  # as ib-kubernetes and ip link print them
        "00-02-C9-03-00-00-01-01",
        "00000002c90300000101",  # UFM accepts up to 20 hex characters
        " 0002c90300000101 ",
    ],
)
def test_every_guid_spelling_is_the_same_port(spelling):
    assert parse_guid(spelling) == GUID
    assert ufm_guid(parse_guid(spelling)) == "0002c90300000101"


@pytest.mark.parametrize(
    "bad",
    ["", "2c90300000101", "0002c9030000010g", "00:02:c9:03:00:00:01", "0:2:c9:3:0:0:1:1", "0" * 16, "f" * 20, 5, None],
)
def test_what_is_no_guid_is_refused_with_400(bad):
    with pytest.raises(UfmError) as err:
        parse_guid(bad)
    assert err.value.status == 400 and "GUID" in err.value.message


def test_guid_lists_drop_repeats_in_any_spelling_and_split_url_commas():
    assert parse_guids(["0002c90300000101", "0x0002c90300000101", "0002c90300000102"]) == [GUID, GUID + 1]
    assert parse_guids("0002c90300000101,0002c90300000102") == [GUID, GUID + 1]
    for empty in ([], "", None, {}):
        with pytest.raises(UfmError):
            parse_guids(empty)


@pytest.mark.parametrize(
    ("text", "value"), [("0x0A2B", 0x0A2B), ("0x5", 5), ("a2b", 0x0A2B), (0x12, 0x12), ("0x7ffe", 0x7FFE)]
)
def test_pkey_spellings(text, value):
    assert parse_pkey(text) == value


@pytest.mark.parametrize("bad", ["0x0", "0x7fff", "0x8001", "0x12345", "zz", "", None, True, -1, 0x7FFF])
def test_pkeys_outside_0_7fff_exclusive_are_refused(bad):
    with pytest.raises(UfmError) as err:
        parse_pkey(bad)
    assert err.value.status == 400


def test_add_body_as_ib_kubernetes_and_ufmclient_send_it():
    req = parse_guids_request(
        {"pkey": "0x0A2B", "index0": True, "ip_over_ib": True, "membership": "full", "guids": ["0002c90300000101"]}
    )
    assert (req.pkey, req.members, req.ip_over_ib, req.index0) == (0x0A2B, {GUID: "full"}, True, True)
    req = parse_guids_request(
        {"pkey": "0x5", "guids": ["0002c90300000101", "0002c90300000102"], "memberships": ["full", "limited"]}
    )
    assert req.members == {GUID: "full", GUID + 1: "limited"} and req.ip_over_ib is True and req.index0 is False


@pytest.mark.parametrize(
    "body",
    [
        {"pkey": "0x5", "guids": ["0002c90300000101"], "membership": "both"},
        {"pkey": "0x5", "guids": ["0002c90300000101"], "membership": "full", "memberships": ["full"]},
        {"pkey": "0x5", "guids": ["0002c90300000101"], "memberships": ["full", "full"]},
        {"pkey": "0x5", "guids": ["0002c90300000101"], "ip_over_ib": "yes"},
        {"pkey": "0x5"},
        {"guids": ["0002c90300000101"]},
        ["0x5"],
    ],
)
def test_bad_bodies_are_400(body):
    with pytest.raises(UfmError) as err:
        parse_guids_request(body)
    assert err.value.status == 400
