"""What lab a design calls for: the net file, the routing engine and its input files.

Pure (no database, no processes): :func:`lab_plan` reads a design's fabric graph and
:func:`design_spec` turns the plan into the :class:`~console.fabric.lab.spec.LabSpec` the lab
manager starts. ftree with root and compute-node GUID files for fat trees and rail-optimised
fabrics, torus-2QoS with the design's torus file for tori, up/down with the top tier as roots
otherwise (minhop without one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from console.fabric.lab.spec import LabError, LabSpec
from console.fabric.opensm.conf import OpenSmConfig
from console.fabric.opensm.qos import QosPolicy
from designer.exports import export
from designer.exports.opensm import root_switches
from designer.graph import FabricGraph


@dataclass(frozen=True)
class LabPlan:
    """How a design is brought up as a lab: net file, routing engine and its input files."""

    net_text: str
    routing_engine: str
    root_guids: tuple[int, ...] = ()
    cn_guids: tuple[int, ...] = ()
    torus_conf: str | None = None
    sm_host: str = ""  # ibsim node id of the CA OpenSM runs on
    sm_host_name: str = ""  # the same CA as the design names it
    standby_host: str = ""  # ibsim node id of the CA a standby OpenSM runs on (when asked for)


@dataclass(frozen=True)
class DesignLabSpec(LabSpec):
    """A :class:`LabSpec` with extra ``opensm.conf`` options (e.g. ``torus_config``)."""

    opensm_options: Mapping[str, str] = field(default_factory=dict)

    def opensm_config(self, *, standby: bool = False) -> OpenSmConfig:
        """The base lab options plus this design's own."""
        base = super().opensm_config(standby=standby)
        extra = dict(base.extra)
        extra.update(self.opensm_options)
        return OpenSmConfig(
            routing_engine=base.routing_engine,
            partition_config_file=base.partition_config_file,
            qos_policy_file=base.qos_policy_file,
            root_guid_file=base.root_guid_file,
            cn_guid_file=base.cn_guid_file,
            qos=base.qos,
            force_log_flush=base.force_log_flush,
            sweep_interval=base.sweep_interval,
            extra=extra,
        )


def _sm_candidates(graph: FabricGraph) -> list[tuple[str, str]]:
    """(ibsim node id, design name) of the CAs subnet managers run on, the master's first: the
    design's manager nodes (where the subnet manager lives in a SuperPOD), else the last compute
    nodes' first HCAs, far from the first leaf ports tests and demos unplug."""
    nodes = [n for n in graph.nodes.values() if n.port_guids]
    if not nodes:
        raise LabError("the design has no HCAs: OpenSM needs a CA port to run on")
    managers = [n for n in nodes if n.role == "manager"]
    ordered = managers + [n for n in reversed(nodes) if n.role != "manager"]
    return [(f"H-{n.ca_guids[0]:016x}", f"{n.name} {n.hca_name(1)}") for n in ordered[:2]]


def _sm_node(graph: FabricGraph) -> tuple[str, str]:
    return _sm_candidates(graph)[0]


def sm_nodes(graph: FabricGraph) -> list[str]:
    """The design's nodes whose HCAs the lab's subnet managers run on (the master's, then the
    standby's). Their ports are full members of the Default partition (an SM's own port always
    is), so a tenant given one would reach every host: they are management nodes, never in a
    pool (the demo keeps both out of them, whether or not the standby runs)."""
    return [name.split(" ")[0] for _, name in _sm_candidates(graph)]


def sm_node(graph: FabricGraph) -> str:
    """The node of the lab's (master) subnet manager: :func:`sm_nodes`' first."""
    return sm_nodes(graph)[0]


def lab_plan(graph: FabricGraph) -> LabPlan:
    """The lab a design calls for (pure: no database, no processes)."""
    net_text, _, _ = export(graph, "ibnetdiscover")
    candidates = _sm_candidates(graph)
    sm_host, sm_name = candidates[0]
    standby = candidates[1][0] if len(candidates) > 1 else ""
    routing = graph.meta.get("routing")
    if graph.meta.get("dims"):
        torus_conf, _, _ = export(graph, "torus-2qos")
        return LabPlan(
            net_text,
            "torus-2QoS,minhop",
            torus_conf=torus_conf,
            sm_host=sm_host,
            sm_host_name=sm_name,
            standby_host=standby,
        )
    roots = tuple(graph.switches[name].guid for name in root_switches(graph))
    if routing == "ftree":
        cns = tuple(g for n in graph.nodes.values() if n.role == "compute" for g in n.port_guids)
        return LabPlan(net_text, "ftree", roots, cns, sm_host=sm_host, sm_host_name=sm_name, standby_host=standby)
    if roots and routing != "minhop":
        return LabPlan(net_text, "updn", roots, sm_host=sm_host, sm_host_name=sm_name, standby_host=standby)
    return LabPlan(net_text, "minhop", sm_host=sm_host, sm_host_name=sm_name, standby_host=standby)


def design_spec(plan: LabPlan, workdir: Path, socket_name: str | None, *, standby: bool = False) -> LabSpec:
    """The lab spec of ``plan`` in ``workdir`` (writes a torus design's torus file there), with a
    standby OpenSM when ``standby``."""
    options: dict[str, str] = {}
    if plan.torus_conf:
        # A design input, not a managed artefact: written next to the net file, never swapped.
        path = workdir / "torus-2QoS.conf"
        path.write_text(plan.torus_conf)
        options["torus_config"] = str(path)
    return DesignLabSpec(
        net_text=plan.net_text,
        workdir=workdir,
        sm_host=plan.sm_host,
        routing_engine=plan.routing_engine,
        root_guids=plan.root_guids,
        cn_guids=plan.cn_guids,
        socket_name=socket_name,
        # torus-2QoS refuses to route without QoS ("ERR 4E44: ... Enable QoS") and OpenSM
        # then silently uses minhop: a default policy turns QoS on.
        qos_policy=QosPolicy() if plan.torus_conf else None,
        opensm_options=options,
        standby_host=plan.standby_host if standby else None,
    )
