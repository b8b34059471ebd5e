"""The collector's lab traffic model: the jobs running on a fabric and the load they put on it.

Every ready reservation (or an explicit job list, in tests and benchmarks) is a job. The model
knows which links each job owns (its hosts' links and, where the forwarding tables are known, the
links its traffic is routed over) and which tenant's live group shows them; on the lab it also
writes the job's routed load into ibsim's counters before each read (see
:mod:`console.telemetry.traffic` for the model itself).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from console.fabric.changes.desired import qos_table_of
from console.fabric.models import Fabric
from console.fabric.opensm.qos import QosOptions
from console.telemetry import services
from console.telemetry.arbitration import Arbitration
from console.telemetry.labwriter import console_batch, counter_commands
from console.telemetry.linkmap import LinkMap
from console.telemetry.readers import CounterReader, read_lfts
from console.telemetry.traffic import Job, PortLoad, route_load, words


def arbitration_of(options: QosOptions) -> Arbitration:
    """The model's arbitration from the ``qos_*`` options OpenSM programs into every port."""
    return Arbitration(tuple(options.vlarb_high), tuple(options.vlarb_low), options.high_limit)


def port_link(lm: LinkMap, switch: str, port: int) -> str | None:
    """The link plugged into ``switch[port]`` (measured at either end)."""
    if f"{switch}/{port}" in lm.ends:
        return f"{switch}/{port}"
    peer = lm.ports.get(switch, {}).get(port)
    if peer and f"{peer[0]}/{peer[1]}" in lm.ends:
        return f"{peer[0]}/{peer[1]}"
    return None


class Workload:
    """The jobs of one fabric, the links they own, and their routed load."""

    def __init__(self, fabric_id: int, jobs: tuple[Job, ...] | None = None) -> None:
        self.fabric_id = fabric_id
        self.explicit = jobs  # None: the fabric's ready reservations
        self.jobs: list[tuple[services.ReservationNodes | None, Job]] = []
        self.link_owners: dict[str, list[tuple[int, int]]] = {}  # link → [(reservation, tenant)]
        self.tenant_links: dict[int, set[str]] = {}
        self.lfts: dict[str, list[int]] = {}
        self.load = PortLoad()
        # The fabric's QoS table: each job's SL → VL, and how congested ports share between VLs.
        fabric = Fabric.objects.filter(pk=fabric_id).first()
        self.qos = qos_table_of(fabric).options() if fabric is not None else None
        self.arbitration = arbitration_of(self.qos) if self.qos is not None else None

    def vl_of(self, sl: int) -> int:
        """The VL the fabric maps ``sl`` to (0 without a QoS table)."""
        return self.qos.sl2vl[sl] if self.qos is not None and 0 <= sl < 16 else 0

    def refresh_routes(self, lm: LinkMap, reader: CounterReader) -> None:
        """Read every switch's forwarding table again and reroute the jobs' load over them."""
        top = max(lm.device_of_lid, default=0)
        self.lfts = {}
        switches = list(lm.switch_lids.items())
        tables = read_lfts(reader, [lid for _, lid in switches], top)
        for (sw, _), table in zip(switches, tables, strict=False):
            if table is not None:
                self.lfts[sw] = table
        self.recompute_load(lm)

    def refresh_jobs(self, lm: LinkMap) -> None:
        """The jobs now running (reservations come and go) and the links each of them owns."""
        if self.explicit is not None:
            jobs: list[tuple[Any, Job]] = [(None, j) for j in self.explicit]
        else:
            jobs = [
                (r, Job(f"res-{r.id}", r.nodes, vl=self.vl_of(r.sl)))
                for r in services.ready_reservations(self.fabric_id)
            ]
        if [j for _, j in jobs] != [j for _, j in self.jobs]:
            self.jobs = jobs
            self.recompute_load(lm)
        owners: dict[str, list[tuple[int, int]]] = defaultdict(list)
        tenant_links: dict[int, set[str]] = defaultdict(set)
        for res, job in self.jobs:
            if res is None:
                continue
            host = lm.links_of_nodes(set(job.nodes))
            tenant_links[res.tenant_id] |= host
            routed = route_load([job], lm, self.lfts).ports() if self.lfts else set()
            for lid in host | {port_link(lm, s, p) for s, p in routed} - {None}:
                owners[lid].append((res.id, res.tenant_id))  # type: ignore[index]
        self.link_owners, self.tenant_links = dict(owners), dict(tenant_links)

    def recompute_load(self, lm: LinkMap) -> None:
        """Route the current jobs' flows over the known forwarding tables."""
        self.load = route_load([j for _, j in self.jobs], lm, self.lfts, self.arbitration)

    def write_counters(self, lab: Any, node_ids: dict[str, str], prev: dict, seconds: float) -> int:
        """Advance the lab's data counters by ``seconds`` of the jobs' load (the number of ports
        written); ``prev``: the last readings, which the new values continue from."""
        values = {}
        for key in self.load.ports():
            before = prev.get(key)
            if before is None:
                continue
            values[key] = (
                before.xmit_words + words(self.load.xmit.get(key, 0.0), seconds),
                before.rcv_words + words(self.load.rcv.get(key, 0.0), seconds),
            )
        if values:
            console_batch(lab, counter_commands(node_ids, values))
        return len(values)
