"""``manage.py schedule``: replay traces, import inventory, pools, quotas and reservations.

    schedule replay --trace FILE [--format kalos|alibaba|generic] --design DESIGN
                    --policy topology|first-fit [--max-wait MIN] [--json] [--max-jobs N]
                    [--power-policy idle=T,buffer=N|P%[,margin=M][,rate=N]] [--node-type NAME]
                    [--sites N|FILE [--site-latency-us US] [--site-bandwidth-gbps G]] [--span-sites]
    schedule trace-gen --out FILE [--load RHO | --rate JOBS_PER_H] [--jobs N] [--seed S]
                       [--capacity GPUS] [--median-min M] [--sigma S] [--max-hours H]
                       [--mix GPUS:WEIGHT,…] [--locality SITE:WEIGHT,…]
    schedule import-inventory --fabric FABRIC
    schedule sharp-am --fabric FABRIC      (the SHARP AM input of the fabric's allocated trees)
    schedule pool-create --fabric FABRIC --name NAME [--kind manual|by_model|by_su]
                         [--gpu-model M] [--su N …] [--node NAME|FABRIC/NODE …]
    schedule quota --tenant SLUG --pool POOL --guaranteed N [--borrow N]
    schedule reserve --tenant SLUG --pool POOL (--gpus N | --nodes N) [--start ISO]
                     (--end ISO | --hours H) [--same-leaf] [--max-hops N] [--rail-aligned]
                     [--priority training|inference|best-effort] [--near SITE|dataset:NAME]
                     [--span-sites] [--preview] [--json]
    schedule list [--tenant SLUG] [--status S] [--json]
    schedule release --id N
    schedule tick

DESIGN is a saved design (id or name; its latest revision) or plan options
``TOPOLOGY:key=value,…`` as in ``manage.py design plan``, e.g. ``rail-optimized:gpus=2048`` or
``fat-tree:nodes=64,node_type=DGX-H100,oversubscription=2:1``.
FABRIC and POOL are ids or names. Refusals exit non-zero with the reason.
``--max-wait`` is the replay's patience (minutes a multi-node job waits for a packed placement).
``--power-policy`` powers idle nodes off in the replay (``scheduling.replay.power``) with the
catalogue figures of ``--node-type`` (default DGX-H100); the output gains the energy used, the
always-on energy, the fraction saved and the change in wait against the same replay without it.
``--sharp-share F`` makes that fraction of the multi-node jobs ask for SHARP (a generic trace's
``sharp`` column marks jobs too), the trees per switch being the design's catalogue figures; the
output gains ``sharp``: SHARP requests placed, waited and refused.
``--sites N`` splits the design's leaf groups (SUs) into N sites ``site-1`` … ``site-N`` joined
by links of ``--site-latency-us`` and ``--site-bandwidth-gbps``; ``--sites FILE`` reads them from
JSON (``scheduling.replay.sites``). Each job then runs near its trace's ``site`` (or
``data_site``) column by the console's site choice, with ``--max-wait`` as its patience
(``--span-sites``: jobs may span sites), and the output gains ``locality``: jobs run at their
data's site, spanning, waits by where they ran, and the wait locality cost against the same trace
without data sites. ``trace-gen --locality`` draws each job's data site from a weighted mix
(``-`` for none).
``trace-gen`` writes a synthetic trace in the generic format (``scheduling.replay.generator``):
Poisson arrivals offering ``--load`` of ``--capacity`` GPUs, sizes from ``--mix``, lognormal
durations; the same options and seed always write the same file.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any, TypeVar

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils.dateparse import parse_datetime

from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal, Role, Tenant
from designer.catalogue import find_item
from designer.graph import FabricGraph
from designer.models import Design, DesignRevision
from designer.plan import plan
from designer.services import load_catalogue, revision_graph
from scheduling.models import Pool, Reservation
from scheduling.placement import PoolTopology
from scheduling.placement.registry import params as constraint_params
from scheduling.replay import (
    POWER_KEYS,
    RESULT_KEYS,
    WAIT_DELTA_KEYS,
    ReplayOptions,
    TraceFormatError,
    load_trace,
    parse_power_policy,
)
from scheduling.replay import replay as run_replay
from scheduling.replay.comm import comm_model_of
from scheduling.replay.generator import (
    DEFAULT_SIZE_MIX,
    TraceSpec,
    generate,
    offered_load,
    parse_locality,
    write_csv,
)
from scheduling.replay.sites import DEFAULT_BANDWIDTH_GBPS, DEFAULT_LATENCY_US, ReplaySites, replay_sites
from scheduling.services import inventory, lifecycle, quotas, reservations
from scheduling.services.sharp import sharp_am_files
from scheduling.services.topology import topology_from_graph

OPERATOR = Principal(None, Role.OPERATOR, None)
_Named = TypeVar("_Named", Fabric, Pool)  # the rows the CLI finds by id or name


def design_graph(spec: str) -> FabricGraph:
    """A designer graph from a saved design (id or name) or ``topology:key=value,…`` options."""
    if ":" in spec or spec in {"fat-tree", "rail-optimized", "torus", "dragonfly-plus"}:
        topology, _, rest = spec.partition(":")
        options: dict[str, Any] = {"topology": topology}
        for item in filter(None, rest.split(",")):
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"design option {item!r} is not key=value")
            options[key.strip()] = int(value) if value.strip().isdigit() else value.strip()
        result = plan(options, load_catalogue())
        if result.graph is None or not result.ok:  # ok implies a graph; the first test tells mypy
            raise CommandError(f"impossible design: {result.summary()['errors']}")
        return result.graph
    design = Design.objects.filter(pk=int(spec)).first() if spec.isdigit() else None
    design = design or Design.objects.filter(name=spec).first()
    if design is None:
        raise CommandError(f"no design {spec!r} (give an id, a name or TOPOLOGY:key=value,…)")
    revision = DesignRevision.objects.get(design=design, number=design.latest_revision)
    return revision_graph(revision)


def _by_id_or_name(model: type[_Named], value: str, label: str) -> _Named:
    found = model.objects.filter(pk=int(value)).first() if value.isdigit() else None
    found = found or model.objects.filter(name=value).first()
    if found is None:
        raise CommandError(f"no {label} {value!r}")
    return found


def _time(value: str | None, name: str) -> dt.datetime | None:
    if value is None:
        return None
    parsed = parse_datetime(value)
    if parsed is None:
        raise CommandError(f"--{name} {value!r} is not an ISO 8601 time (e.g. 2026-12-01T14:00Z)")
    return parsed


class Command(BaseCommand):
    help = __doc__

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        from argparse import RawDescriptionHelpFormatter

        kwargs.setdefault("formatter_class", RawDescriptionHelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        p = sub.add_parser("replay", help="replay a job trace through the placement engine")
        p.add_argument("--trace", required=True, metavar="FILE")
        p.add_argument("--format", choices=["kalos", "alibaba", "generic"], default="generic")
        p.add_argument(
            "--design",
            required=True,
            help="saved design id/name, or TOPOLOGY:key=value,… (e.g. rail-optimized:gpus=2048)",
        )
        p.add_argument("--policy", choices=["topology", "first-fit"], default="topology")
        p.add_argument("--max-jobs", type=int)
        p.add_argument("--max-wait", type=float, default=0.0, metavar="MIN", help="patience in minutes (0: none)")
        p.add_argument(
            "--power-policy",
            metavar="POLICY",
            help="power idle nodes off: idle=T,buffer=N|P%%[,margin=M][,rate=N] (e.g. idle=30m,buffer=2)",
        )
        p.add_argument("--node-type", default="DGX-H100", help="catalogue node type for power figures")
        p.add_argument(
            "--sharp-share",
            type=float,
            default=0.0,
            metavar="F",
            help="fraction of multi-node jobs asking for SHARP (trees per switch from the design's catalogue)",
        )
        p.add_argument("--sites", metavar="N|FILE", help="split the design into N sites, or read a sites file (JSON)")
        p.add_argument("--site-latency-us", type=float, default=DEFAULT_LATENCY_US, metavar="US")
        p.add_argument("--site-bandwidth-gbps", type=float, default=DEFAULT_BANDWIDTH_GBPS, metavar="G")
        p.add_argument("--span-sites", action="store_true", help="jobs may span sites (with --sites)")
        p.add_argument(
            "--comm-model",
            action="store_true",
            help="jobs run longer the higher the tier their traffic crosses (scheduling.replay.comm: "
            "Fluidstack's 256-GPU figures, the design's oversubscription); goodput then counts useful work only",
        )
        p.add_argument("--json", action="store_true")
        p = sub.add_parser("trace-gen", help="write a synthetic job trace (generic format)")
        p.add_argument("--out", required=True, metavar="FILE")
        rate = p.add_mutually_exclusive_group()
        rate.add_argument("--load", type=float, default=0.5, help="offered load relative to --capacity")
        rate.add_argument("--rate", type=float, metavar="JOBS_PER_H", help="Poisson arrival rate instead of --load")
        p.add_argument("--jobs", type=int, default=2000)
        p.add_argument("--seed", type=int, default=1)
        p.add_argument("--capacity", type=int, default=2048, metavar="GPUS")
        p.add_argument("--gpus-per-node", type=int, default=8)
        p.add_argument("--median-min", type=float, default=60.0, help="median duration in minutes")
        p.add_argument("--sigma", type=float, default=1.2, help="lognormal sigma of the durations")
        p.add_argument("--min-min", type=float, default=1.0, help="shortest duration in minutes")
        p.add_argument("--max-hours", type=float, default=24.0, help="longest duration in hours")
        p.add_argument("--mix", help="job-size mix GPUS:WEIGHT,… (default: 1 to 1,024 GPUs in powers of two)")
        p.add_argument("--locality", metavar="SITE:WEIGHT,…", help="data-site mix (site names, - for none)")
        p = sub.add_parser("import-inventory", help="nodes, GPUs and HCAs from the fabric design")
        p.add_argument("--fabric", required=True)
        p = sub.add_parser("sharp-am", help="SHARP AM input (OpenSM port groups, device configuration)")
        p.add_argument("--fabric", required=True)
        p = sub.add_parser("pool-create", help="create a pool")
        p.add_argument("--fabric", required=True)
        p.add_argument("--name", required=True)
        p.add_argument("--kind", choices=Pool.Kind.values, default=Pool.Kind.MANUAL)
        p.add_argument("--gpu-model", default="")
        p.add_argument("--su", type=int, action="append", default=[])
        p.add_argument("--node", action="append", default=[])
        p = sub.add_parser("quota", help="set a tenant's quota in a pool")
        p.add_argument("--tenant", required=True, help="tenant slug")
        p.add_argument("--pool", required=True)
        p.add_argument("--guaranteed", type=int, required=True)
        p.add_argument("--borrow", type=int, default=0)
        p.add_argument(
            "--classes",
            help="priority classes the tenant may book, comma-separated (default for a new quota: "
            "training,best-effort; inference is granted)",
        )
        p.add_argument("--high-priority-gpus", type=int, help="most GPUs held at once in inference")
        p = sub.add_parser("reserve", help="reserve GPUs for a tenant (or --preview)")
        p.add_argument("--tenant", required=True, help="tenant slug")
        p.add_argument("--pool", required=True)
        size = p.add_mutually_exclusive_group(required=True)
        size.add_argument("--gpus", type=int)
        size.add_argument("--nodes", type=int)
        p.add_argument("--start")
        p.add_argument("--end")
        p.add_argument("--hours", type=float)
        # One flag per registered constraint parameter; pool-valued ones (GPU model) come last,
        # as the command always listed them.
        for param in sorted(constraint_params(), key=lambda c: c.widget == "select"):
            metavar = param.flag.removeprefix("--").replace("-", "_").upper()
            if param.kind is bool:
                p.add_argument(param.flag, dest=param.name, action="store_true")
            else:
                p.add_argument(param.flag, dest=param.name, type=param.kind, default=param.default, metavar=metavar)
        p.add_argument("--priority", default="training", choices=["training", "inference", "best-effort"])
        p.add_argument("--name", default="")
        p.add_argument("--near", default="", help="a site (slug or name) or dataset:NAME of the tenant")
        p.add_argument("--span-sites", action="store_true", help="the gang may span sites")
        p.add_argument("--preview", action="store_true")
        p.add_argument("--json", action="store_true")
        p = sub.add_parser("list", help="list reservations")
        p.add_argument("--tenant")
        p.add_argument("--status", choices=Reservation.Status.values)
        p.add_argument("--json", action="store_true")
        p = sub.add_parser("release", help="release a reservation early")
        p.add_argument("--id", type=int, required=True)
        sub.add_parser("tick", help="start due windows, expire ended ones (the periodic task)")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"].replace("-", "_")
        try:
            getattr(self, f"do_{action}")(options)
        except ConsoleError as exc:
            raise CommandError(exc.detail) from None

    # ---------------------------------------------------------------- subcommands

    def do_replay(self, o: dict) -> None:
        try:
            jobs = load_trace(o["trace"], o["format"])
        except (OSError, TraceFormatError) as exc:
            raise CommandError(str(exc)) from None
        if not 0.0 <= o["sharp_share"] <= 1.0:
            raise CommandError("--sharp-share must be between 0 and 1")
        graph = design_graph(o["design"])
        named = topology_from_graph(graph)
        topology = named.topology
        power = None
        if o["power_policy"]:
            node_type = find_item(load_catalogue().nodes, o["node_type"])
            if node_type is None:
                raise CommandError(f"unknown node type {o['node_type']!r}")
            try:
                power = parse_power_policy(o["power_policy"], node_type)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
        options = ReplayOptions(
            max_jobs=o["max_jobs"],
            max_wait_s=o["max_wait"] * 60,
            power=power,
            sharp_share=o["sharp_share"],
            sharp_trees=named.sharp_trees,
            sites=_sites(o, topology),
            span_sites=o["span_sites"],
            comm=comm_model_of(graph) if o["comm_model"] else None,
        )
        try:
            result = run_replay(jobs, topology, o["policy"], options)
        except ValueError as exc:  # a trace naming a site the replay does not have
            raise CommandError(str(exc)) from None
        keys = (*RESULT_KEYS, *POWER_KEYS, *WAIT_DELTA_KEYS) if power is not None else RESULT_KEYS
        keys = (*keys, *(k for k in ("sharp", "locality") if k in result))
        if o["json"]:
            self.stdout.write(json.dumps({k: result[k] for k in keys}))
            return
        self.stdout.write(f"{o['policy']} on {topology.total_gpus} GPUs ({o['design']}):")
        for key in keys:
            value = result[key]
            if key == "locality":
                for name, item in value.items():
                    shown = f"{item:.4g}" if isinstance(item, float) else _rounded(item)
                    self.stdout.write(f"  {'locality.' + name:24} {shown}")
                continue
            shown = f"{value:.4g}" if isinstance(value, float) else value
            self.stdout.write(f"  {key:24} {shown}")

    def do_trace_gen(self, o: dict) -> None:
        try:
            mix = _mix(o["mix"]) if o["mix"] else DEFAULT_SIZE_MIX
            spec = TraceSpec(
                jobs=o["jobs"],
                load=o["load"],
                rate=o["rate"] / 3600 if o["rate"] else None,
                capacity_gpus=o["capacity"],
                size_mix=mix,
                gpus_per_node=o["gpus_per_node"],
                median_duration_s=o["median_min"] * 60,
                sigma=o["sigma"],
                min_duration_s=o["min_min"] * 60,
                max_duration_s=o["max_hours"] * 3600,
                seed=o["seed"],
                locality=parse_locality(o["locality"]) if o["locality"] else (),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        jobs = generate(spec)
        rows = write_csv(jobs, o["out"])
        self.stdout.write(
            f"{rows} jobs to {o['out']}: {spec.arrival_rate() * 3600:.4g} arrivals/h, offered load "
            f"{offered_load(jobs, spec.capacity_gpus):.3f} of {spec.capacity_gpus} GPUs (asked {spec.load:g}), "
            f"mean {spec.mean_gpus():.4g} GPUs x {spec.mean_duration_s() / 60:.4g} min"
        )

    def do_import_inventory(self, o: dict) -> None:
        fabric = _by_id_or_name(Fabric, o["fabric"], "fabric")
        result = inventory.import_inventory(fabric, actor=Actor.cli())
        self.stdout.write(json.dumps(result.as_dict()))

    def do_sharp_am(self, o: dict) -> None:
        files = sharp_am_files(_by_id_or_name(Fabric, o["fabric"], "fabric"))
        for name, text in files.items():
            self.stdout.write(f"# ---- {name}\n{text}")

    def do_pool_create(self, o: dict) -> None:
        fabric = _by_id_or_name(Fabric, o["fabric"], "fabric")
        nodes = inventory.select_nodes(fabric, o["kind"], gpu_model=o["gpu_model"], sus=o["su"], names=o["node"])
        pool = inventory.create_pool(Actor.cli(), OPERATOR, fabric=fabric, name=o["name"], kind=o["kind"], nodes=nodes)
        self.stdout.write(f"pool {pool.pk} {pool.name}: {len(nodes)} nodes")

    def do_quota(self, o: dict) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {o['tenant']!r}")
        pool = _by_id_or_name(Pool, o["pool"], "pool")
        quota = quotas.set_quota(
            Actor.cli(),
            OPERATOR,
            tenant=tenant,
            pool=pool,
            guaranteed_gpus=o["guaranteed"],
            borrow_limit_gpus=o["borrow"],
            classes=[c.strip() for c in o["classes"].split(",") if c.strip()] if o.get("classes") else None,
            **({"high_priority_gpus": o["high_priority_gpus"]} if o.get("high_priority_gpus") is not None else {}),
        )
        usage = quotas.quota_usage(quota)
        self.stdout.write(
            json.dumps({**usage, "classes": quota.classes, "high_priority_gpus": quota.high_priority_gpus})
        )

    def do_reserve(self, o: dict) -> None:
        tenant = Tenant.objects.filter(slug=o["tenant"]).first()
        if tenant is None:
            raise CommandError(f"no tenant {o['tenant']!r}")
        pool = _by_id_or_name(Pool, o["pool"], "pool")
        request = reservations.ReservationRequest(
            pool_id=pool.pk,
            gpus=o["gpus"],
            nodes=o["nodes"],
            start=_time(o["start"], "start"),
            end=_time(o["end"], "end"),
            duration=dt.timedelta(hours=o["hours"]) if o["hours"] else None,
            priority_class=o["priority"],
            constraints={param.name: o[param.name] for param in constraint_params()},
            name=o["name"],
            tenant_id=tenant.pk,
            near=o["near"],
            span_sites=o["span_sites"],
        )
        if o["preview"]:
            self.stdout.write(json.dumps(reservations.preview(OPERATOR, request), default=str))
            return
        reservation = reservations.reserve(Actor.cli(), OPERATOR, request)
        if o["json"]:
            self.stdout.write(json.dumps(_row(reservation), default=str))
        else:
            self.stdout.write(_line(reservation))
        if reservation.status == Reservation.Status.REJECTED:
            sys.exit(2)

    def do_list(self, o: dict) -> None:
        queryset = Reservation.objects.select_related("tenant", "pool").order_by("pk")
        if o["tenant"]:
            queryset = queryset.filter(tenant__slug=o["tenant"])
        if o["status"]:
            queryset = queryset.filter(status=o["status"])
        if o["json"]:
            self.stdout.write(json.dumps([_row(r) for r in queryset], default=str))
            return
        for reservation in queryset:
            self.stdout.write(_line(reservation))

    def do_release(self, o: dict) -> None:
        reservation = Reservation.objects.filter(pk=o["id"]).first()
        if reservation is None:
            raise CommandError(f"no reservation {o['id']}")
        self.stdout.write(_line(lifecycle.release(Actor.cli(), OPERATOR, reservation)))

    def do_tick(self, o: dict) -> None:
        self.stdout.write(json.dumps(lifecycle.tick()))


def _mix(text: str) -> tuple[tuple[int, float], ...]:
    """``8:0.5,64:0.5`` as ((8, 0.5), (64, 0.5))."""
    mix = []
    for item in text.split(","):
        gpus, sep, weight = item.partition(":")
        try:
            mix.append((int(gpus), float(weight)))
        except ValueError:
            raise ValueError(f"--mix item {item!r} is not GPUS:WEIGHT") from None
        if not sep:
            raise ValueError(f"--mix item {item!r} is not GPUS:WEIGHT")
    return tuple(mix)


def _sites(o: dict, topology: PoolTopology) -> ReplaySites | None:
    """The replay's sites from ``--sites N|FILE`` (``None`` without it)."""
    if not o["sites"]:
        return None
    try:
        return replay_sites(
            o["sites"], topology, latency_us=o["site_latency_us"], bandwidth_gbps=o["site_bandwidth_gbps"]
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _rounded(value: Any) -> Any:
    """Floats in nested report dicts to 4 significant digits, for the text output."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return float(f"{value:.4g}") if isinstance(value, float) else value


def _row(r: Reservation) -> dict[str, Any]:
    return {
        "id": r.pk,
        "tenant": r.tenant.slug,
        "pool": r.pool.name,
        "status": r.status,
        "gpus": r.gpus,
        "start": r.start,
        "end": r.end,
        "pkey": f"0x{r.pkey:04x}" if r.pkey else None,
        "nodes": r.placement.get("nodes", []),
        "sites": r.placement.get("sites", []),
        "reason": r.reason,
    }


def _line(r: Reservation) -> str:
    pkey = f"0x{r.pkey:04x}" if r.pkey else "-"
    text = (
        f"{r.pk:>5} {r.tenant.slug:<12} {r.pool.name:<12} {r.status:<12} {r.gpus:>5} GPUs "
        f"{r.start:%Y-%m-%d %H:%M}–{r.end:%H:%M} P_Key {pkey}"
    )
    return f"{text}  {r.reason}" if r.reason else text
