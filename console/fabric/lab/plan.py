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


@dataclass(frozen=True)
class DesignLabSpec(LabSpec):
    """A :class:`LabSpec` with extra ``opensm.conf`` options (e.g. ``torus_config``)."""

    opensm_options: Mapping[str, str] = field(default_factory=dict)

    def opensm_config(self) -> OpenSmConfig:
        """The base lab options plus this design's own."""
        base = super().opensm_config()
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


def _sm_node(graph: FabricGraph) -> tuple[str, str]:
    """(ibsim node id, design name) of the CA OpenSM runs on: a manager node if the design has
    one (where the subnet manager lives in a SuperPOD), else the last compute node's first HCA,
    far from the first leaf ports tests and demos unplug."""
    nodes = [n for n in graph.nodes.values() if n.port_guids]
    if not nodes:
        raise LabError("the design has no HCAs: OpenSM needs a CA port to run on")
    managers = [n for n in nodes if n.role == "manager"]
    node = managers[0] if managers else nodes[-1]
    return f"H-{node.ca_guids[0]:016x}", f"{node.name} {node.hca_name(1)}"


def sm_node(graph: FabricGraph) -> str:
    """The design's node whose HCA the lab's OpenSM runs on. Its port is a full member of the
    Default partition (OpenSM's own port always is), so a tenant given this node would reach
    every host: it is a management node, not for pools (the demo keeps it out of them)."""
    return _sm_node(graph)[1].split(" ")[0]


def lab_plan(graph: FabricGraph) -> LabPlan:
    """The lab a design calls for (pure: no database, no processes)."""
    net_text, _, _ = export(graph, "ibnetdiscover")
    sm_host, sm_name = _sm_node(graph)
    routing = graph.meta.get("routing")
    if graph.meta.get("dims"):
        torus_conf, _, _ = export(graph, "torus-2qos")
        return LabPlan(net_text, "torus-2QoS,minhop", torus_conf=torus_conf, sm_host=sm_host, sm_host_name=sm_name)
    roots = tuple(graph.switches[name].guid for name in root_switches(graph))
    if routing == "ftree":
        cns = tuple(g for n in graph.nodes.values() if n.role == "compute" for g in n.port_guids)
        return LabPlan(net_text, "ftree", roots, cns, sm_host=sm_host, sm_host_name=sm_name)
    if roots and routing != "minhop":
        return LabPlan(net_text, "updn", roots, sm_host=sm_host, sm_host_name=sm_name)
    return LabPlan(net_text, "minhop", sm_host=sm_host, sm_host_name=sm_name)


def design_spec(plan: LabPlan, workdir: Path, socket_name: str | None) -> LabSpec:
    """The lab spec of ``plan`` in ``workdir`` (writes a torus design's torus file there)."""
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
    )
