"""Benchmark of search on the 2,048-GPU demo design, as the operator and as a tenant.

Seeds a throwaway test database the way ``console/demo.py`` does (its tenants and designs), then
binds a fabric to the ``superpod-2048`` design (256 DGX H100, 2,048 HCA ports), imports its
inventory, books 32 named 64-GPU reservations alternately for the two demo tenants through the
reservation service, and records a discovery run holding every switch's and HCA port's GUID and
LID (what a real ``ibnetdiscover`` of this fabric leaves). Then times ``search()`` (the service
the page and ``GET /api/search/`` call) over a mix of queries: a node name, a port GUID with
colons, ``lid:N``, a bare number, a P_Key with the membership bit, a cable ``leaf[12]``, a
reservation name, a design name and a tenant name — each ``--rounds`` times per principal.

Run: ``.venv/bin/python tests/benchmarks/bench_search.py [--rounds N]`` (uses ``DATABASE_URL``,
creating and dropping a ``test_…`` database). Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()


def seed() -> dict:
    from console.demo import seed_designs, seed_tenancy
    from console.fabric.models import DiscoveryRun, Fabric
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role, Tenant
    from designer.models import DesignRevision
    from designer.services import revision_graph
    from scheduling.models import HCA, Node, Reservation
    from scheduling.services import inventory, quotas, reservations

    actor, operator = Actor.system("bench"), Principal(None, Role.OPERATOR, None)
    seed_tenancy(actor)
    seed_designs(actor)
    revision = DesignRevision.objects.get(design__name="superpod-2048")
    fabric = Fabric.objects.create(name="superpod-2048", revision=revision)
    inventory.import_inventory(fabric)
    nodes = list(Node.objects.filter(fabric=fabric))
    pool = inventory.create_pool(actor, operator, fabric=fabric, name="all", nodes=nodes)
    tenants = list(Tenant.objects.order_by("pk")[:2])
    for t in tenants:
        quotas.set_quota(actor, operator, tenant=t, pool=pool, guaranteed_gpus=1024)
    booked = []
    for i in range(32):
        tenant = tenants[i % 2]
        request = reservations.ReservationRequest(
            pool_id=pool.pk,
            gpus=64,
            duration=dt.timedelta(hours=4),
            name=f"job-{i:02d}-{tenant.slug}",
            tenant_id=tenant.pk,
        )
        booked.append(reservations.reserve(actor, operator, request))
    graph = revision_graph(revision)
    rows, lid = [], 1
    for name in graph.switches:
        rows.append({"name": name, "kind": "switch", "guid": f"{0xE41D2D0300000000 + lid:#018x}", "lid": lid})
        lid += 1
    hcas = list(HCA.objects.select_related("node").order_by("node__name", "index"))
    by_node: dict[str, dict] = {}
    for hca in hcas:
        row = by_node.setdefault(
            hca.node.name, {"name": hca.node.name, "kind": "ca", "guid": hca.port_guid, "lids": {}}
        )
        row["lids"][str(hca.index + 1)] = lid
        lid += 1
    DiscoveryRun.objects.create(fabric=fabric, topology={"nodes": rows + list(by_node.values())})
    res = Reservation.objects.filter(pk=booked[5].pk).first()
    leaf = next(n for n in graph.switches if "leaf" in n)
    hca = hcas[len(hcas) // 2]
    queries = {
        "node name": hca.node.name,
        "port guid": ":".join(hca.port_guid[2:][i : i + 2] for i in range(0, 16, 2)),
        "lid": f"lid:{by_node[hca.node.name]['lids']['1']}",
        "bare number": str(res.pk),
        "pkey": f"{(res.pkey or 0) | 0x8000:#06x}",
        "cable": f"{leaf}[12]",
        "reservation name": res.name,
        "design name": "superpod",
        "tenant name": tenants[1].name[:4],
    }
    return {
        "fabric": fabric,
        "queries": queries,
        "principals": {
            "operator": operator,
            "tenant": Principal(None, Role.TENANT_MEMBER, tenants[1].pk),
        },
        "gpus": sum(n.gpus for n in nodes),
        "hca_ports": len(hcas),
        "switches": len(graph.switches),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    from django.test.utils import setup_databases, teardown_databases

    from console.telemetry.search import search

    old = setup_databases(verbosity=0, interactive=False)
    try:
        t0 = time.perf_counter()
        world = seed()
        seed_s = time.perf_counter() - t0
        per_kind: dict[str, list[float]] = {}
        found: dict[str, int] = {}
        for who, principal in world["principals"].items():
            for kind, q in world["queries"].items():
                search(principal, q)  # warm: the design graph is cached per revision
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    hits = search(principal, q)
                    per_kind.setdefault(f"{who}:{kind}", []).append((time.perf_counter() - t) * 1000)
                found[f"{who}:{kind}"] = len(hits)
        all_ms = [v for vs in per_kind.values() for v in vs]
        result = {
            "bench": "search",
            "fabric_gpus": world["gpus"],
            "hca_ports": world["hca_ports"],
            "switches": world["switches"],
            "seed_s": round(seed_s, 1),
            "rounds": args.rounds,
            "median_ms": round(statistics.median(all_ms), 2),
            "p95_ms": round(sorted(all_ms)[int(len(all_ms) * 0.95)], 2),
            "max_ms": round(max(all_ms), 2),
            "median_ms_by_query": {k: round(statistics.median(v), 2) for k, v in per_kind.items()},
            "hits_by_query": found,
        }
    finally:
        teardown_databases(old, verbosity=0)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
