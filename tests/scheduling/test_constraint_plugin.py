"""A new placement constraint is one class and its registration: no engine, service, serializer
or form change.

The test-only constraint admits only nodes whose name matches a regular expression. It is
registered for the tests that need it (and unregistered after them), then used through the
engine, the service's preview and reserve, the REST API, the reservation form and the replay.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from scheduling.models import Reservation
from scheduling.placement import (
    ConstraintType,
    NodeFilter,
    Param,
    Placement,
    PlacementEngine,
    PoolTopology,
    Rejection,
    RejectReason,
    Request,
    TopoNode,
    rail_optimized,
)
from scheduling.placement.registry import params, register, unregister
from scheduling.replay import TraceJob, simulate
from scheduling.services import reservations
from scheduling.services.topology import pool_topology
from tests.scheduling.conftest import SYSTEM, give_quota, request_for, tenant_principal


@dataclass(frozen=True, slots=True)
class NameMatches(NodeFilter):
    """Only nodes whose name matches ``pattern`` (the whole name)."""

    pattern: str

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return re.fullmatch(self.pattern, node.name) is not None

    def describe(self) -> str:
        return f"node_name~{self.pattern}"


NAME_MATCHES = ConstraintType(
    "node_name",
    (Param("node_name", str, "Node name", default="", max_length=100, help="a regular expression"),),
    lambda v: (NameMatches(v["node_name"]),) if v["node_name"] else (),
)


@pytest.fixture
def node_name_constraint():
    register(NAME_MATCHES)
    yield NAME_MATCHES
    unregister("node_name")
    assert "node_name" not in {p.name for p in params()}


def alternatives(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in names)


# ---------------------------------------------------------------- the engine, pure


def test_the_engine_applies_a_constraint_it_does_not_know():
    # Given a pool of 4 SUs of 4 nodes and a filter admitting only SU 2's nodes
    topology = rail_optimized(4, nodes_per_su=4)
    wanted = [n.name for n in topology.nodes if n.leaf_group == 2]
    engine = PlacementEngine(topology)
    only = NameMatches(alternatives(wanted))
    # When a gang of 3 nodes asks for them, and another for 5
    placed = engine.place(Request(nodes=3, constraints=(only,)), "a")
    too_many = engine.preview(Request(nodes=5, constraints=(only,)))
    # Then the first lands inside SU 2 and the second is explained, quoting the filter
    assert isinstance(placed, Placement)
    assert {topology.nodes[n].name for n in placed.node_ids} <= set(wanted)
    assert isinstance(too_many, Rejection) and too_many.reason == RejectReason.TOO_LARGE
    assert too_many.details["eligible_nodes"] == 4
    nothing = engine.preview(Request(nodes=1, constraints=(NameMatches("no-such-node"),)))
    assert isinstance(nothing, Rejection) and nothing.reason == RejectReason.NO_ELIGIBLE_NODES
    assert "node_name~no-such-node" in nothing.message


def test_replay_runs_jobs_under_the_constraint():
    # Given two 32-GPU jobs arriving together that may only use SU 0 (4 nodes of 8 GPUs)
    topology = rail_optimized(4, nodes_per_su=4)
    su0 = NameMatches(alternatives([n.name for n in topology.nodes if n.leaf_group == 0]))
    jobs = [TraceJob(f"j{i}", 0.0, 100.0, 32, constraints=(su0,)) for i in range(2)]
    # When they are replayed
    constrained = simulate(jobs, topology)
    free = simulate([TraceJob(f"j{i}", 0.0, 100.0, 32) for i in range(2)], topology)
    # Then the second waits for the first (unconstrained, both run at once)
    assert sorted(r.wait_s for r in constrained.records) == [0.0, 100.0]
    assert sorted(r.wait_s for r in free.records) == [0.0, 0.0]


# ---------------------------------------------------------------- the console


@pytest.fixture
def last_leaf(pool) -> list[str]:
    named = pool_topology(pool)
    last = len(named.topology.groups) - 1
    return [n.name for n in named.topology.nodes if n.leaf_group == last]


def test_preview_and_reserve_through_the_service(node_name_constraint, pool, tenant_a, last_leaf):
    # Given a quota and a pattern naming the last leaf's 4 nodes
    give_quota(tenant_a, pool, 128)
    pattern = alternatives(last_leaf)
    principal = tenant_principal(tenant_a)
    # When 2 nodes are previewed, then reserved, under the pattern
    body = reservations.preview(principal, request_for(pool, nodes=2, node_name=pattern))
    reservation = reservations.reserve(SYSTEM, principal, request_for(pool, nodes=2, node_name=pattern))
    # Then both land on those nodes; 5 nodes are refused with the eligible count
    assert body["placeable"] and set(body["placement"]["nodes"]) <= set(last_leaf)
    assert reservation.status != Reservation.Status.REJECTED
    assert set(reservation.placement["nodes"]) <= set(last_leaf)
    # and what was asked is kept on the row, read back from the database
    reservation.refresh_from_db()
    assert reservation.constraint_params == {"node_name": pattern}
    refused = reservations.reserve(SYSTEM, principal, request_for(pool, nodes=5, node_name=pattern))
    assert refused.status == Reservation.Status.REJECTED
    assert refused.explanation["reason"] == "too_large" and refused.explanation["details"]["eligible_nodes"] == 4


def test_reserve_through_the_rest_api(node_name_constraint, pool, tenant_a, admin_a, client_for, last_leaf):
    give_quota(tenant_a, pool, 128)
    api = client_for(admin_a)
    pattern = alternatives(last_leaf)
    payload = {"pool": pool.pk, "nodes": 3, "duration_minutes": 60, "node_name": pattern}
    preview = api.post("/api/reservations/preview/", payload, format="json")
    assert preview.status_code == 200 and set(preview.json()["placement"]["nodes"]) <= set(last_leaf)
    created = api.post("/api/reservations/", payload, format="json")
    assert created.status_code == 201, created.content
    assert set(created.json()["placement"]["nodes"]) <= set(last_leaf)
    nowhere = api.post("/api/reservations/preview/", {**payload, "node_name": "nope"}, format="json")
    rejection = nowhere.json()["rejection"]
    assert rejection["reason"] == "no_eligible_nodes" and "node_name~nope" in rejection["message"]
    too_long = api.post("/api/reservations/preview/", {**payload, "node_name": "x" * 101}, format="json")
    assert too_long.status_code == 400 and "node_name" in too_long.json()["fields"]


def test_the_reservation_form_shows_the_constraint(node_name_constraint, client, pool, admin_a):
    client.force_login(admin_a)
    page = client.get("/reservations/").content.decode()
    assert 'name="node_name"' in page and 'data-testid="res-node-name"' in page


def test_without_registration_the_parameter_is_not_part_of_the_api(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 128)
    api = client_for(admin_a)
    body = {"pool": pool.pk, "nodes": 4, "duration_minutes": 60, "node_name": "nope"}
    assert api.post("/api/reservations/preview/", body, format="json").json()["placeable"]


def test_a_node_filter_is_evaluated_once_per_topology_not_once_per_engine():
    # services build an engine per database snapshot over one cached topology: the filter's
    # verdicts are the topology's, so a second engine asks it nothing (it used to ask per node)
    calls = []

    @dataclass(frozen=True, slots=True)
    class Counting(NodeFilter):
        def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
            calls.append(node.id)
            return node.id % 2 == 0

        def describe(self) -> str:
            return "even nodes"

    topology = rail_optimized(4, sus_per_pod=4)
    request = Request(nodes=2, start=0.0, end=3600.0, constraints=(Counting(),))
    first = PlacementEngine(topology).preview(request)
    asked = len(calls)
    second = PlacementEngine(topology).preview(request)
    assert isinstance(first, Placement) and first == second
    assert all(n % 2 == 0 for n in first.node_ids)
    # once per node for each filter combination the search used (sizes, the rail preference) ...
    assert 0 < asked <= 3 * len(topology.nodes)
    # ... and never again for the same topology
    assert len(calls) == asked
