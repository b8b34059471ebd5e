"""Designs the scheduler-export tests share (Slurm topology and Kubernetes labels/HyperNodes)."""

from __future__ import annotations

from tests.datafiles import REALDATA

#: a discovered fabric: PSMN's Voltaire QDR cluster, switches named by their node descriptions
DISCOVERED = REALDATA / "ibnetdiscover" / "psmn_x5_voltaire_qdr_89ca_11sw.ibnetdiscover"
#: a two-level fat tree: 2 leaves of QM9700 under one spine
TWO_LEVEL = {"topology": "fat-tree", "nodes": 64, "gpus_per_node": 8, "hcas_per_node": 1, "levels": 2}
#: a three-level fat tree with two pods of 20 QM8700 leaves each
THREE_LEVEL = {
    "topology": "fat-tree",
    "nodes": 800,
    "gpus_per_node": 8,
    "hcas_per_node": 1,
    "levels": 3,
    "switch": "QM8700",
}
