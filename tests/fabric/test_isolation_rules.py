"""The isolation rule (console.fabric.opensm.isolation) against a brute-force reading of it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from console.fabric.opensm.isolation import leaks
from console.fabric.opensm.partitions import DEFAULT_PARTITION, Member, Membership, Partition

A1, A2, B1, B2, S1, FREE = (0x0002C90300000001 + i for i in range(6))
OWNERS = {A1: "tenant:1", A2: "tenant:1", B1: "tenant:2", B2: "tenant:2", S1: "service:storage"}
HOSTS = [A1, A2, B1, B2, S1, FREE]


def pairs(found) -> set[tuple[str, str]]:
    return {(leak.owner_a, leak.owner_b) for leak in found}


def test_separate_partitions_and_the_consoles_default_isolate():
    parts = [
        DEFAULT_PARTITION,
        Partition("a", 0x0101, members=[Member(A1), Member(A2)]),
        Partition("b", 0x0102, members=[Member(B1), Member(B2)]),
    ]
    assert leaks(parts, OWNERS, hosts=HOSTS, sm_guid=FREE) == []


def test_the_old_default_lets_every_tenant_reach_every_other():
    old = Partition("Default", 0x7FFF, ipoib=True, members=[Member("ALL", "full")])
    found = leaks([old], OWNERS, hosts=HOSTS)
    assert pairs(found) == {("tenant:1", "tenant:2")}
    assert "reaches tenant:2's" in found[0].describe()


def test_a_tenant_holding_the_sm_port_reaches_everyone_through_the_default():
    found = leaks([DEFAULT_PARTITION], OWNERS, hosts=HOSTS, sm_guid=A1)
    assert pairs(found) == {("tenant:1", "tenant:2")}
    assert found[0].a == A1


def test_a_service_partition_reaches_storage_not_the_other_tenant():
    storage = Partition("storage", 0x0103, members=[Member(S1), *(Member(g, "limited") for g in (A1, A2, B1, B2))])
    assert leaks([storage], OWNERS, hosts=HOSTS) == []
    wrong = Partition("storage", 0x0103, members=[Member(S1), Member(A1), Member(B1, "limited")])
    found = leaks([wrong], OWNERS, hosts=HOSTS)
    assert [(f.a, f.b) for f in found] == [(A1, B1)]
    assert found[0].as_json({A1: "su01-n01 HCA-1"})["a"]["name"] == "su01-n01 HCA-1"


def test_later_specifiers_override_earlier_ones_and_both_is_full():
    # Rendered order: keywords first, then GUIDs; A1's own entry wins over ALL=full.
    parts = Partition("x", 0x0104, members=[Member("ALL", "full"), Member(A1, "limited"), Member(A2, "limited")])
    assert pairs(leaks([parts], OWNERS, hosts=HOSTS)) == {("tenant:2", "tenant:1")}
    both = Partition("y", 0x0105, members=[Member(A1, "both"), Member(B1, "limited")])
    assert pairs(leaks([both], OWNERS, hosts=HOSTS)) == {("tenant:1", "tenant:2")}
    defmember = Partition("z", 0x0106, defmember="full", members=[Member(A1, None), Member(B1, "limited")])
    assert pairs(leaks([defmember], OWNERS, hosts=HOSTS)) == {("tenant:1", "tenant:2")}


ports = st.sampled_from([*HOSTS, "ALL", "ALL_CAS", "SELF"])
memberships = st.sampled_from([Membership.FULL, Membership.LIMITED, Membership.BOTH, None])


@st.composite
def partition(draw) -> Partition:
    chosen = draw(st.lists(ports, unique=True, max_size=6))
    return Partition(
        "p",
        draw(st.integers(1, 0x7FFE)),
        defmember=draw(st.sampled_from([None, Membership.FULL, Membership.LIMITED])),
        members=[Member(port, draw(memberships)) for port in chosen],
    )


@settings(max_examples=300, deadline=None)
@given(partition(), st.sampled_from([None, *HOSTS]))
def test_every_talking_pair_of_tenants_is_found(p, sm_guid):
    # The independent reading: walk the specifiers as written (keywords before GUIDs, each later
    # one overriding), then try every pair of owned ports.
    membership: dict[int, str] = {}
    keyword_order = ["ALL", "ALL_CAS", "SELF"]  # how the console renders them (partitions.conf)
    for m in sorted(
        p.members, key=lambda m: (1, m.port) if isinstance(m.port, int) else (0, keyword_order.index(m.port))
    ):
        kind = (m.membership or p.defmember or Membership.LIMITED).value
        kind = "full" if kind in ("full", "both") else "limited"
        if m.port in ("ALL", "ALL_CAS"):
            membership.update(dict.fromkeys(HOSTS, kind))
        elif m.port == "SELF":
            if sm_guid is not None:
                membership[sm_guid] = kind
        else:
            membership[m.port] = kind
    talking = set()
    for x, kx in membership.items():
        for y, ky in membership.items():
            ox, oy = OWNERS.get(x, ""), OWNERS.get(y, "")
            if ox.startswith("tenant:") and oy.startswith("tenant:") and ox != oy and "full" in (kx, ky):
                talking.add(frozenset((ox, oy)))
    found = {frozenset(pair) for pair in pairs(leaks([p], OWNERS, hosts=HOSTS, sm_guid=sm_guid))}
    assert found == talking


def test_verification_checks_the_default_partition_even_with_no_partition_to_push():
    from console.fabric.opensm.push_types import PushOptions
    from console.fabric.opensm.verify import expected_checks

    hosts = [A1, A2, B1, B2, S1, FREE]
    checks = expected_checks([DEFAULT_PARTITION], [], hosts, PushOptions(non_member_sample=2), sm_guid=FREE)
    assert {(c.guid, c.membership) for c in checks} == {(A1, "limited"), (A2, "limited"), (FREE, "full")}
    assert all(c.pkey == 0x7FFF for c in checks)
    old = Partition("Default", 0x7FFF, members=[Member("ALL", "full")])
    assert {
        c.membership for c in expected_checks([old], [], hosts, PushOptions(non_member_sample=2), sm_guid=FREE)
    } == {"full"}
    assert expected_checks([DEFAULT_PARTITION], [], hosts, PushOptions(non_member_sample=2)) == []  # no SM known
