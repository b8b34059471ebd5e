"""NVIDIA's published DGX SuperPOD compute-fabric rows, shared by the plan, CLI and API tests.

DGX B300 with Quantum-X800 (XDR) InfiniBand: Table 3, "Example Compute Fabric Components for DGX
SuperPOD Counts", on the "DGX SuperPOD Architecture" page of NVIDIA's DGX SuperPOD reference
architecture for DGX B300 systems with Quantum-X800 InfiniBand switching and AC power,
https://docs.nvidia.com/dgx-superpod/reference-architecture/
scalable-infrastructure-b300-xdr/latest/dgx-superpod-architecture.html. An SU is 72 DGX B300 (8
GPUs, 8 ConnectX-8 at 800 Gb/s); each of its 8 rail leaves is a 144-port Q3400 taking 72 nodes.

Every number below is the published one, with one exception that is derived: the published
18-SU row reads 1,296 nodes, **9,216** GPUs, 144 leaves, 72 spines, 10,368 node-leaf and 10,368
leaf-spine cables. 9,216 GPUs is 16 SUs' worth and contradicts the row's own 1,296 nodes × 8 GPUs
and 10,368 node-leaf cables (one per GPU), so the GPU count used here is 1,296 × 8 = 10,368.
The 4- and 8-SU spine counts (18 and 36, not ⌈uplinks ÷ 144⌉ = 16 and 32) are the published ones
and are also what the spine rule of REFERENCE_DESIGNS.md gives: the fewest spines that divide a
leaf's 72 uplinks and offer enough ports.
"""

from __future__ import annotations

#: (SUs, nodes, GPUs, leaves, spines, node-leaf cables, leaf-spine cables)
B300_XDR_ROWS: list[tuple[int, int, int, int, int, int, int]] = [
    (1, 72, 576, 8, 4, 576, 576),
    (2, 144, 1_152, 16, 8, 1_152, 1_152),
    (4, 288, 2_304, 32, 18, 2_304, 2_304),
    (8, 576, 4_608, 64, 36, 4_608, 4_608),
    (18, 1_296, 10_368, 144, 72, 10_368, 10_368),  # published GPU column: 9,216 (see above)
]
B300_XDR = {"topology": "rail-optimized", "node_type": "DGX-B300", "switch": "Q3400"}
