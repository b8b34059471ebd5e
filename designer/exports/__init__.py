"""Export registry: every format is a pure function of a graph.

content, filename, content_type = export(graph, "ibnetdiscover")
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from designer.errors import UnknownItemError
from designer.exports import ibnetdiscover, kubernetes, opensm, scheduler, tables
from designer.graph import FabricGraph


@dataclass(frozen=True)
class ExportFormat:
    """How to render one file and what to call it."""

    name: str
    render: Callable[[FabricGraph], str]
    filename: str
    content_type: str
    description: str


FORMATS: dict[str, ExportFormat] = {}


def register(fmt: ExportFormat) -> ExportFormat:
    FORMATS[fmt.name] = fmt
    return fmt


for _fmt in (
    ExportFormat(
        "ibnetdiscover",
        ibnetdiscover.render_ibnetdiscover,
        "ibnetdiscover.topo",
        "text/plain",
        "ibnetdiscover topology with planned GUIDs (an ibsim net file)",
    ),
    ExportFormat(
        "opensm-root-guids",
        opensm.render_root_guids,
        "root_guids.txt",
        "text/plain",
        "OpenSM ftree root_guid_file: top-tier switch GUIDs",
    ),
    ExportFormat(
        "opensm-cn-guids",
        opensm.render_cn_guids,
        "cn_guids.txt",
        "text/plain",
        "OpenSM ftree cn_guid_file: compute-node port GUIDs",
    ),
    ExportFormat(
        "opensm-io-guids",
        opensm.render_io_guids,
        "io_guids.txt",
        "text/plain",
        "OpenSM ftree io_guid_file: non-compute (manager) port GUIDs",
    ),
    ExportFormat(
        "node-name-map",
        opensm.render_node_name_map,
        "node-name-map",
        "text/plain",
        "GUID to name map for OpenSM and infiniband-diags",
    ),
    ExportFormat(
        "torus-2qos",
        opensm.render_torus_2qos,
        "torus-2QoS.conf",
        "text/plain",
        "OpenSM torus-2QoS configuration (tori)",
    ),
    ExportFormat(
        "opensm-conf",
        opensm.render_opensm_conf,
        "opensm.conf",
        "text/plain",
        "opensm.conf fragment: routing engine and input files",
    ),
    ExportFormat(
        "slurm-topology",
        scheduler.render_slurm_tree,
        "topology.conf",
        "text/plain",
        "Slurm topology/tree topology.conf",
    ),
    ExportFormat(
        "slurm-block",
        scheduler.render_slurm_block,
        "topology-block.conf",
        "text/plain",
        "Slurm topology/block topology.conf",
    ),
    ExportFormat(
        "slurm-yaml",
        scheduler.render_slurm_yaml,
        "topology.yaml",
        "application/yaml",
        "Slurm topology.yaml (tree and block)",
    ),
    ExportFormat(
        "k8s-labels",
        kubernetes.render_k8s_labels,
        "node-labels.json",
        "application/json",
        "Kubernetes node topology labels",
    ),
    ExportFormat(
        "kueue-topology",
        kubernetes.render_kueue_topology,
        "kueue-topology.yaml",
        "application/yaml",
        "Kueue Topology with the label levels",
    ),
    ExportFormat(
        "volcano-hypernodes",
        kubernetes.render_volcano_hypernodes,
        "volcano-hypernodes.yaml",
        "application/yaml",
        "Volcano HyperNodes: blocks, pods and the fabric as tiers",
    ),
    ExportFormat("cabling-csv", tables.render_cabling_csv, "cabling.csv", "text/csv", "cabling plan, port to port"),
    ExportFormat("bom-csv", tables.render_bom_csv, "bom.csv", "text/csv", "bill of materials"),
    ExportFormat("json", tables.render_json, "design.json", "application/json", "full design, round-trippable"),
):
    register(_fmt)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "fabric"


def export(graph: FabricGraph, fmt: str) -> tuple[str, str, str]:
    """(content, filename, content_type) of a graph in a registered format."""
    try:
        spec = FORMATS[fmt]
    except KeyError:
        raise UnknownItemError("export format", fmt, sorted(FORMATS)) from None
    base = _slug(str(graph.meta.get("name") or graph.topology))
    return spec.render(graph), f"{base}-{spec.filename}", spec.content_type
