"""Benchmark of scheduling through the Django layer.

1. The Kalos trace replayed on the **designed** 2,048-GPU rail-optimised fabric (plan options
   ``rail-optimized:gpus=2048``, turned into the engine's topology by ``services.topology`` exactly
   as ``manage.py schedule replay`` does), topology policy and first-fit side by side, one run.
2. Unless ``--no-service``: a 128-GPU request on a fragmented 16,384-GPU pool (2,048 DGX H100
   imported from a planned design into a throwaway test database; ~50 % of nodes booked at
   random) through the real service path: ``preview`` (snapshot of the pool from the database +
   quota + engine decision) and ``reserve`` (locks, decision, inserts, commit), each followed by a
   release so every request sees the same fragmentation. The engine decision alone is timed too.
   Preview and reserve lend the process's cached pool snapshot (``services.snapshots``), brought
   up to date by the bookings changed since (each reserve and release is one); ``--fresh``
   measures the old way (a full snapshot load per request) in the same process, for comparison.
   Each reserve is followed by the same request under the lock reserve took before the
   reservation lock (every node row of the pool, ``reserve_node_row_lock_*``), and by the same
   request with one statement per read and write (``reserve_row_by_row_*``: the snapshot
   refresh's reads, the fabric's P_Keys and SLs, the allocation rows and the touch each on their
   own, as before they were merged), and by the same request with none of its statements
   prepared (``reserve_unprepared_*``: psycopg's threshold off for it, as before
   ``raw.prepared_cursor``), interleaved so all see the same host load;
   ``reserve_cpu_ms_p50`` is the process's CPU time (the host's other load barely changes it) and
   ``reserve_round_trips`` the statements of one reserve (BEGIN and COMMIT included). The load
   average is recorded. The bulk-loaded tables are analysed before anything is timed (autovacuum
   would within a minute; without statistics the planner misjudges every pool read).
3. Unless ``--no-service``: queue passes through the service (``services.queue.queue_pass``:
   locks, snapshot, the pass, writes) over ``--queued`` (500) queued requests of 8 to 1,024 GPUs
   on that pool: the first (committed) places what fits now, a grant each, and is timed once;
   the second (committed, timed once) writes the estimates that moved once those are booked;
   then the steady pass (nothing more fits; every request's estimate and position refreshed),
   timed ``repeat`` times, each rolled back so every pass sees the same queue; with its CPU time
   and the pure pass inside it (``scheduling.placement.queue.queue_pass``) timed as the baseline.

Run: ``.venv/bin/python tests/benchmarks/bench_scheduling.py [--requests N] [--fresh] [--no-service]``
(uses ``DATABASE_URL`` when set, creating and dropping a ``test_…`` database).
Ends by printing ONE JSON line. Traces: Kalos from InternLM/AcmeTrace (Hu et al., NSDI 2024),
CC BY 4.0.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

django.setup()

from designer.plan import plan  # noqa: E402
from scheduling.replay import load_kalos, percentile, replay  # noqa: E402
from scheduling.services.topology import topology_from_graph  # noqa: E402
from tests.benchmarks.benchutil import imported_fabric  # noqa: E402

KALOS = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "kalos_jobs.csv"
KEYS = (
    "utilization",
    "avg_wait_s",
    "avg_leaves_per_job",
    "avg_spines_per_job",
    "rail_aligned_fraction",
    "fragmentation",
    "decision_ms_p50",
    "decision_ms_p99",
)


def kalos_side_by_side() -> dict:
    topology = topology_from_graph(plan({"topology": "rail-optimized", "gpus": 2048}).graph).topology
    jobs = load_kalos(KALOS)
    out = {"fabric_gpus": topology.total_gpus, "jobs": len(jobs)}
    for policy in ("topology", "first-fit"):
        result = replay(jobs, topology, policy)
        out[policy] = {k: round(result[k], 4) for k in KEYS}
    return out


def service_path(requests: int, seed: int, fresh: bool, queued: int) -> dict:
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases
    from django.utils import timezone

    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role, Tenant
    from scheduling.models import GPU, Reservation, ReservationAllocation
    from scheduling.services import inventory, lifecycle, quotas, reservations, snapshots
    from scheduling.services.reservations import ReservationRequest, decide, snapshot

    old = setup_databases(verbosity=0, interactive=False)
    try:
        actor, operator = Actor.system("bench"), Principal(None, Role.OPERATOR, None)
        t0 = time.perf_counter()
        fabric, nodes = imported_fabric("bench-16k", 16384)
        pool = inventory.create_pool(actor, operator, fabric=fabric, name="all", nodes=nodes)
        setup_s = time.perf_counter() - t0
        background = Tenant.objects.create(name="Background", slug="background")
        tenant = Tenant.objects.create(name="Bench", slug="bench")
        quotas.set_quota(actor, operator, tenant=tenant, pool=pool, guaranteed_gpus=1024)
        rng = random.Random(seed)
        now = timezone.now()
        gpus_of: dict[int, list[int]] = {}
        for pk, node_id in GPU.objects.filter(node__fabric=fabric).values_list("pk", "node_id"):
            gpus_of.setdefault(node_id, []).append(pk)
        rows = []
        for node in nodes:
            if rng.random() < 0.5:
                end = now + dt.timedelta(hours=rng.uniform(1, 48))
                res = Reservation.objects.create(
                    tenant=background,
                    pool=pool,
                    fabric=fabric,
                    status="ready",
                    start=now,
                    end=end,
                    gpus=8,
                )
                rows += [
                    ReservationAllocation(reservation=res, node=node, gpu_id=g, start=now, end=end)
                    for g in gpus_of[node.pk]
                ]
        ReservationAllocation.objects.bulk_create(rows, batch_size=5000)
        _analyze(connection)
        principal = Principal(None, Role.TENANT_ADMIN, tenant.pk)
        request = ReservationRequest(pool_id=pool.pk, gpus=128, duration=dt.timedelta(hours=2))
        previews, reserves, decisions, groups, node_locked, reserve_cpu = [], [], [], [], [], []
        row_by_row, row_by_row_cpu, unprepared = [], [], []
        pool_lock = reservations.pool_and_overlapping_lock
        reservations.preview(principal, request)  # warm the topology cache (and the snapshot's)
        if fresh:  # every lend a private full load: the path before the cache
            snapshots.lend = _fresh_lend(snapshots)
            reservations.lend = snapshots.lend
        snapshots.stats.clear()
        for _ in range(requests):
            t = time.perf_counter()
            body = reservations.preview(principal, request)
            previews.append((time.perf_counter() - t) * 1000)
            assert body["placeable"], body
            snap = snapshot(pool, timezone.now())
            t = time.perf_counter()
            snap.engine.preview(reservations.engine_request(request, snap.now, snap.now + dt.timedelta(hours=2)))
            decisions.append((time.perf_counter() - t) * 1000)
            t, c = time.perf_counter(), time.process_time()
            made = reservations.reserve(actor, principal, request)
            reserves.append((time.perf_counter() - t) * 1000)
            reserve_cpu.append((time.process_time() - c) * 1000)
            groups.append(len(made.placement["leaf_groups"]))
            lifecycle.release(actor, principal, made)
            # The same request under the old lock (every node row of the pool), interleaved so
            # both see the same host load: the baseline of the reservation lock.
            reservations.pool_and_overlapping_lock = _node_row_lock
            try:
                t = time.perf_counter()
                made = reservations.reserve(actor, principal, request)
                node_locked.append((time.perf_counter() - t) * 1000)
            finally:
                reservations.pool_and_overlapping_lock = pool_lock
            lifecycle.release(actor, principal, made)
            # The same request with one statement per read and write (the path before the
            # snapshot refresh, the fabric facts and the allocation rows were merged): the
            # baseline of the round-trip cuts.
            with _row_by_row():
                t, c = time.perf_counter(), time.process_time()
                made = reservations.reserve(actor, principal, request)
                row_by_row.append((time.perf_counter() - t) * 1000)
                row_by_row_cpu.append((time.process_time() - c) * 1000)
            lifecycle.release(actor, principal, made)
            with _unprepared(connection):  # the same statements, parsed and planned every time
                t = time.perf_counter()
                made = reservations.reserve(actor, principal, request)
                unprepared.append((time.perf_counter() - t) * 1000)
            lifecycle.release(actor, principal, made)
        trips = _round_trips(lambda: reservations.reserve(actor, principal, request), lifecycle, actor, principal)
        with _row_by_row():
            trips_before = _round_trips(
                lambda: reservations.reserve(actor, principal, request), lifecycle, actor, principal
            )
        assert decide  # imported for the docstring's claim: preview and reserve share it
        lends = dict(snapshots.stats)
        passes = queue_passes(pool, queued, seed, fresh)
        return {
            "pool_gpus": 16384,
            "busy_nodes": len(rows) // 8,
            "setup_s": round(setup_s, 2),
            "requests": requests,
            "database": connection.vendor,
            "engine_decision_ms_p50": round(percentile(decisions, 50), 3),
            "engine_decision_ms_p99": round(percentile(decisions, 99), 3),
            "preview_ms_p50": round(percentile(previews, 50), 2),
            "preview_ms_p99": round(percentile(previews, 99), 2),
            "reserve_ms_p50": round(percentile(reserves, 50), 2),
            "reserve_ms_p99": round(percentile(reserves, 99), 2),
            "reserve_cpu_ms_p50": round(percentile(reserve_cpu, 50), 2),
            "reserve_round_trips": trips,
            "reserve_row_by_row_ms_p50": round(percentile(row_by_row, 50), 2),
            "reserve_row_by_row_ms_p99": round(percentile(row_by_row, 99), 2),
            "reserve_row_by_row_cpu_ms_p50": round(percentile(row_by_row_cpu, 50), 2),
            "reserve_row_by_row_round_trips": trips_before,
            "reserve_p50_ratio_vs_row_by_row": round(percentile(reserves, 50) / percentile(row_by_row, 50), 3),
            "reserve_unprepared_ms_p50": round(percentile(unprepared, 50), 2),
            "reserve_unprepared_ms_p99": round(percentile(unprepared, 99), 2),
            "reserve_p50_ratio_vs_unprepared": round(percentile(reserves, 50) / percentile(unprepared, 50), 3),
            "reserve_node_row_lock_ms_p50": round(percentile(node_locked, 50), 2),
            "reserve_node_row_lock_ms_p99": round(percentile(node_locked, 99), 2),
            "reserve_p50_ratio_vs_node_row_lock": round(percentile(reserves, 50) / percentile(node_locked, 50), 3),
            "load_average": _load(),
            "leaf_groups_per_128_gpu_reservation": round(sum(groups) / len(groups), 3),
            "snapshot": "fresh" if fresh else "cached",
            "snapshot_lends": lends,
            **passes,
        }
    finally:
        teardown_databases(old, verbosity=0)


def _round_trips(reserve, lifecycle, actor, principal) -> int:
    """Statements one reserve sends (BEGIN and COMMIT included), counted on the connection."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        made = reserve()
    lifecycle.release(actor, principal, made)
    return len(captured.captured_queries)


def _row_by_row():
    """Reserve with one statement per read and write, as before the merges: the snapshot
    refresh's reads (generation, changes, booked rows, node states and power, failed GPUs,
    guarantees, the tenant's holdings), the fabric's P_Keys and SLs, the allocation rows and
    the touch, the tenant and the pool, the pool under the lock and the pools of its nodes."""
    import contextlib

    from scheduling.services import grant, pool_reads, pool_rows, snapshots

    @contextlib.contextmanager
    def patched():
        saved = snapshots.read_pool, grant._fabric_facts, grant.write_allocations, pool_rows.pool_row
        snapshots.read_pool = pool_reads.read_row_by_row
        grant._fabric_facts = grant.fabric_facts_row_by_row
        grant.write_allocations = snapshots.write_row_by_row
        pool_rows.pool_row = pool_rows.pool_row_by_row
        try:
            yield
        finally:
            snapshots.read_pool, grant._fabric_facts, grant.write_allocations, pool_rows.pool_row = saved

    return patched()


def _unprepared(connection):
    """Reserve with no statement prepared: the connection's prepare threshold off meanwhile (the
    statements it prepared stay on the server, unused)."""
    import contextlib

    @contextlib.contextmanager
    def off():
        connection.ensure_connection()
        saved = connection.connection.prepare_threshold
        connection.connection.prepare_threshold = None
        try:
            yield
        finally:
            connection.connection.prepare_threshold = saved

    return off()


def _node_row_lock(
    pool_id: int,
    *,
    also: Iterable[int] = (),
    restart: bool = False,
    fabric_wide: bool = False,
    reread: Callable[[], Iterable[int]] | None = None,
) -> list[int]:
    """The lock reserve took before the reservation lock: every node row of the pool (the pools
    it answers for: reserve checks a preemption's pools against them; the benchmark has none).
    ``restart`` and ``fabric_wide`` (SHARP requests; the benchmark has none) are the reservation
    lock's, accepted and ignored; ``reread`` (reserve's read of its pool row) is called."""
    from scheduling.models import Node

    in_pool = Node.objects.filter(pools=pool_id).values("pk")
    list(
        Node.objects.filter(pk__in=in_pool).order_by("pk").select_for_update(of=("self",)).values_list("pk", flat=True)
    )
    if reread is not None:  # reserve reads its pool row with it
        reread()
    return [pool_id, *also]


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def _fresh_lend(snapshots):
    import contextlib

    @contextlib.contextmanager
    def lend(pool, now):
        snapshots.stats["private"] += 1
        yield snapshots.snapshot(pool, now)

    return lend


def _analyze(connection) -> None:
    """The planner's statistics of the bulk-loaded tables, as autovacuum gathers them within a
    minute of such a load on a running database. Without them the planner takes a pool of 2,048
    members for 11 and a pool read scans them once per node (6 ms instead of 2)."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def queue_passes(pool, queued: int, seed: int, fresh: bool, repeat: int = 7) -> dict:
    """``repeat`` service queue passes over ``queued`` queued requests, each rolled back."""
    from django.db import connection, transaction
    from django.utils import timezone

    from console.tenancy.context import Actor
    from console.tenancy.models import Principal, Role, Tenant
    from scheduling.models import Reservation
    from scheduling.services import queue, quotas, snapshots

    if fresh:
        queue.lend = _fresh_lend(snapshots)
    actor, operator = Actor.system("bench"), Principal(None, Role.OPERATOR, None)
    rng = random.Random(seed)
    sizes = (8, 8, 8, 8, 16, 16, 32, 64, 128, 256, 512, 1024)
    tenants = []
    for i in range(8):
        tenant = Tenant.objects.create(name=f"Queue {i}", slug=f"queue-{i}")
        quotas.set_quota(actor, operator, tenant=tenant, pool=pool, guaranteed_gpus=0, borrow_limit_gpus=16384)
        tenants.append(tenant)
    now = timezone.now()
    rows = []
    for i in range(queued):
        gpus = rng.choice(sizes)
        start = now + dt.timedelta(seconds=i)
        rows.append(
            Reservation(
                tenant=tenants[i % 8],
                pool=pool,
                fabric_id=pool.fabric_id,
                status=Reservation.Status.QUEUED,
                requested_gpus=gpus,
                gpus=gpus,
                start=start,
                end=start + dt.timedelta(hours=rng.uniform(1, 8)),
                queued_at=start,
            )
        )
    Reservation.objects.bulk_create(rows)
    _analyze(connection)
    pure: list[float] = []
    run_pass = queue.run_pass

    def timed_pass(*args, **kwargs):  # the pure pass inside the service pass: the baseline
        t = time.perf_counter()
        try:
            return run_pass(*args, **kwargs)
        finally:
            pure.append((time.perf_counter() - t) * 1000)

    queue.run_pass = timed_pass
    t = time.perf_counter()
    first = queue.queue_pass(pool.pk)  # committed: places what fits now (a grant each)
    placing_ms = (time.perf_counter() - t) * 1000
    # Committed too: the estimates with the placed requests booked for real move (about 90 of
    # them here), written once; rolled back, every steady pass would write them again.
    t = time.perf_counter()
    queue.queue_pass(pool.pk)
    settling_ms = (time.perf_counter() - t) * 1000
    times, cpu, counts = [], [], {}
    for _ in range(repeat + 1):
        with transaction.atomic():
            t, c = time.perf_counter(), time.process_time()
            counts = queue.queue_pass(pool.pk)
            times.append((time.perf_counter() - t) * 1000)
            cpu.append((time.process_time() - c) * 1000)
            transaction.set_rollback(True)
    times, cpu = times[1:], cpu[1:]  # the first warms the caches
    pure = pure[3:]  # the placing and settling passes and the warm-up
    queue.run_pass = run_pass
    return {
        "queue_pass_queued": queued,
        "queue_pass_placing_ms": round(placing_ms, 1),
        "queue_pass_placed": first["placed"],
        "queue_pass_settling_ms": round(settling_ms, 1),
        "queue_pass_waiting": counts.get("queued", 0),
        "queue_pass_ms_median": round(percentile(times, 50), 1),
        "queue_pass_ms_max": round(max(times), 1),
        "queue_pass_load_average": _load(),
        "queue_pass_cpu_ms_median": round(percentile(cpu, 50), 1),
        "queue_pass_pure_ms_median": round(percentile(pure, 50), 1),
        "queue_pass_ratio_vs_pure": round(percentile(times, 50) / percentile(pure, 50), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-service", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="a full snapshot load per request (before the cache)")
    parser.add_argument("--queued", type=int, default=500)
    parser.add_argument("--no-kalos", action="store_true")
    args = parser.parse_args()
    result: dict = {"bench": "scheduling"}
    if not args.no_kalos:
        result["kalos_2048"] = kalos_side_by_side()
    if not args.no_service:
        result["service_16k"] = service_path(args.requests, args.seed, args.fresh, args.queued)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
