"""The built-in catalogue: the switch models, node types, cables and optics a fresh install offers.

Port counts, speeds and HCA counts are the vendors' published figures (sources beside each
entry); prices and power are list-price estimates for comparing designs, not quotes, and
operators override them (`designer.services.load_catalogue`).

``sharp_trees`` is how many SHARP streaming-aggregation trees a switch serves at once, from
NVIDIA's SHARP release notes, "Capabilities and Limitations" (SHARP Rev 3.13.0, General
Information, docs.nvidia.com/networking/display/sharpv3130/general-information): on NVIDIA
Quantum (HDR) "limited to one active tree per switch"; on Quantum-2 (NDR) "one active tree per
port", so 64 on a 64-port QM9700/QM9790. Switch-IB 2 (EDR, SHARPv1) has no streaming
aggregation: 0. The notes give no figure for Quantum-X800 (Q3400) nor for directors (whose
ASICs are several switches): 0 until an operator sets it from NVIDIA's figure for the firmware.
"""

from __future__ import annotations

import math

from designer.catalogue import GENERATIONS, CableType, Catalogue, NodeType, SwitchModel, TransceiverType


def director_model(
    ports: int = 800,
    speed: str = "NDR",
    *,
    name: str | None = None,
    price_per_port: float = 1_500.0,
    watts_per_port: float = 25.0,
    hop_latency_ns: float = 600.0,
) -> SwitchModel:
    """A modular director of any port count (internally a 2-level non-blocking tree)."""
    gbps = GENERATIONS[speed]
    cages = ports // 2 if speed in ("NDR", "XDR") else ports
    half = {"NDR": "NDR200x2", "HDR": "HDR100x2", "XDR": "XDR400x2"}.get(speed)
    splits = {half: (ports * 2, gbps // 2)} if half else {}
    return SwitchModel(
        name=name or f"DIR-{speed}-{ports}",
        ports=ports,
        cages=cages,
        speed=speed,
        port_gbps=gbps,
        split_modes=splits,
        power_w=ports * watts_per_port,
        list_price=ports * price_per_port,
        hop_latency_ns=hop_latency_ns,
        device_id={"NDR": 0xD2F2, "HDR": 0xD2F0, "XDR": 0xD2F4}.get(speed, 0xCF08),
        rack_units=max(4, math.ceil(ports / 40)),
        modular=True,
        description=f"modular director, {ports} x {speed}",
    )


_SWITCHES = (
    SwitchModel(
        "QM9700",
        64,
        32,
        "NDR",
        400,
        {"NDR200x2": (128, 200)},
        1_100,
        32_000,
        230,
        0x02C9,
        0xD2F2,
        1,
        description="Quantum-2, managed, 32 OSFP cages",
        sharp_trees=64,
    ),
    SwitchModel(
        "QM9790",
        64,
        32,
        "NDR",
        400,
        {"NDR200x2": (128, 200)},
        1_050,
        29_000,
        230,
        0x02C9,
        0xD2F2,
        1,
        description="Quantum-2, unmanaged, 32 OSFP cages",
        sharp_trees=64,
    ),
    SwitchModel(
        "QM8700",
        40,
        40,
        "HDR",
        200,
        {"HDR100x2": (80, 100)},
        500,
        19_000,
        130,
        0x02C9,
        0xD2F0,
        1,
        description="Quantum, managed, 40 QSFP56 cages",
        sharp_trees=1,
    ),
    SwitchModel(
        "QM8790",
        40,
        40,
        "HDR",
        200,
        {"HDR100x2": (80, 100)},
        480,
        17_000,
        130,
        0x02C9,
        0xD2F0,
        1,
        description="Quantum, unmanaged, 40 QSFP56 cages",
        sharp_trees=1,
    ),
    # Quantum-X800 Q3400: 144 XDR 800 Gb/s ports in 72 twin-port OSFP cages (NVIDIA's Q3400
    # datasheet; the brief's REFERENCE_DESIGNS.md), the leaf and spine of the DGX B300 XDR SuperPOD.
    SwitchModel(
        "Q3400",
        144,
        72,
        "XDR",
        800,
        {"XDR400x2": (288, 400)},
        6_500,
        120_000,
        300,
        0x02C9,
        0xD2F4,
        4,
        description="Quantum-X800, 72 OSFP cages",
    ),
    SwitchModel(
        "SB7800", 36, 36, "EDR", 100, {}, 250, 12_000, 90, 0x02C9, 0xCF08, 1, description="Switch-IB 2, 36 QSFP28 cages"
    ),
    SwitchModel(
        "CS8500",
        800,
        800,
        "HDR",
        200,
        {"HDR100x2": (1600, 100)},
        20_000,
        900_000,
        400,
        0x02C9,
        0xD2F0,
        29,
        True,
        "Quantum director, 800 HDR ports",
    ),
    director_model(800, "NDR"),
)

# Idle, off (BMC standby) draw and boot time are estimates for power-management planning: an
# idle 8-GPU server still draws well over a kilowatt (fans, CPUs, NVSwitches, idle GPUs at
# 60-100 W each); DGX-class servers take 5-8 minutes from power-on to HCA ports active.
_NODES = (
    NodeType(
        "DGX-A100",
        8,
        8,
        "A100",
        6_500,
        200_000,
        "HDR",
        200,
        0x101B,
        6,
        4,
        idle_power_w=1_300,
        off_power_w=40,
        boot_s=360,
    ),
    NodeType(
        "DGX-H100",
        8,
        8,
        "H100",
        10_200,
        400_000,
        "NDR",
        400,
        0x1021,
        8,
        4,
        idle_power_w=1_800,
        off_power_w=45,
        boot_s=420,
    ),
    NodeType(
        "DGX-B200",
        8,
        8,
        "B200",
        14_300,
        500_000,
        "NDR",
        400,
        0x1021,
        10,
        4,
        idle_power_w=2_300,
        off_power_w=50,
        boot_s=480,
    ),
    # DGX B300, XDR SuperPOD RA (docs.nvidia.com/dgx-superpod/reference-architecture/
    # scalable-infrastructure-b300-xdr, "DGX SuperPOD Architecture"): 8 Blackwell Ultra GPUs, each
    # with its own single-port ConnectX-8 at XDR 800 Gb/s; four DGX B300 per rack at ~56 kW, so
    # ~14 kW each; 10U. ConnectX-8 is PCI device 0x1023 (Linux mlx5_core's device table).
    NodeType(
        "DGX-B300",
        8,
        8,
        "B300",
        14_000,
        600_000,
        "XDR",
        800,
        0x1023,
        10,
        4,
        idle_power_w=2_300,
        off_power_w=50,
        boot_s=480,
    ),
    # GB300 NVL72 compute tray, NVL72 AI Factory enterprise RA (docs.nvidia.com/
    # enterprise-reference-architectures/nvl72-ai-factory, "System Hardware & Components"):
    # 2 Grace CPUs, 4 Blackwell Ultra GPUs and 4 ConnectX-8 HCAs per 1U tray; 18 trays in a rack of
    # up to 142 kW, so ~7.9 kW per tray with its share of the NVLink switch trays.
    NodeType(
        "GB300-tray",
        4,
        4,
        "GB300",
        7_900,
        250_000,
        "XDR",
        800,
        0x1023,
        1,
        18,
        idle_power_w=1_200,
        off_power_w=30,
        boot_s=360,
    ),
    NodeType(
        "generic", 8, 8, "", 3_000, 150_000, "NDR", 400, 0x1021, 4, 8, idle_power_w=600, off_power_w=20, boot_s=240
    ),
    NodeType(
        "UFM-appliance",
        0,
        2,
        "",
        600,
        30_000,
        "NDR",
        400,
        0x1021,
        1,
        16,
        "manager",
        idle_power_w=300,
        off_power_w=10,
        boot_s=180,
    ),
)

# (kind, reach_min, reach_max, price, transceiver?, power) per generation; NDR reaches are the
# published ones from the brief, other generations are close estimates.
_CABLE_TABLE: dict[str, tuple[tuple[str, str, float, float, float, bool, float], ...]] = {
    "EDR": (
        ("DAC", "passive_copper", 0.5, 5, 120, False, 0),
        ("AOC", "aoc", 3, 100, 600, False, 4),
        ("MMF", "mm_fibre", 3, 100, 60, True, 0),
        ("SMF", "sm_fibre", 3, 500, 90, True, 0),
    ),
    "HDR": (
        ("DAC", "passive_copper", 0.5, 2, 180, False, 0),
        ("ACC", "active_copper", 3, 4, 500, False, 3),
        ("AOC", "aoc", 3, 100, 900, False, 5),
        ("MMF", "mm_fibre", 3, 100, 80, True, 0),
        ("SMF", "sm_fibre", 3, 2000, 120, True, 0),
        ("SPLIT", "splitter", 0.5, 2, 300, False, 0),
    ),
    "NDR": (
        ("DAC", "passive_copper", 0.5, 2, 250, False, 0),
        ("ACC", "active_copper", 4, 5, 900, False, 3),
        ("MMF", "mm_fibre", 3, 50, 100, True, 0),
        ("SMF", "sm_fibre", 3, 100, 150, True, 0),
        ("LR", "sm_fibre", 10, 2000, 300, True, 0),
        ("SPLIT", "splitter", 0.5, 3, 450, False, 0),
    ),
    "XDR": (
        ("DAC", "passive_copper", 0.5, 1.5, 500, False, 0),
        ("ACC", "active_copper", 2, 3, 1_400, False, 5),
        ("MMF", "mm_fibre", 3, 50, 150, True, 0),
        ("SMF", "sm_fibre", 3, 500, 220, True, 0),
    ),
}

_OPTICS: dict[tuple[str, str], tuple[float, float]] = {
    ("EDR", "MMF"): (350, 3.5),
    ("EDR", "SMF"): (700, 3.5),
    ("HDR", "MMF"): (700, 5.0),
    ("HDR", "SMF"): (1_400, 5.5),
    ("NDR", "MMF"): (1_200, 17.0),
    ("NDR", "SMF"): (1_800, 17.0),
    ("NDR", "LR"): (2_600, 18.0),
    ("XDR", "MMF"): (2_200, 24.0),
    ("XDR", "SMF"): (3_000, 26.0),
}


def _build_cables() -> tuple[dict[str, CableType], dict[str, TransceiverType]]:
    cables: dict[str, CableType] = {}
    optics: dict[str, TransceiverType] = {}
    for gen, rows in _CABLE_TABLE.items():
        for short, kind, rmin, rmax, price, optic, power in rows:
            optic_name = ""
            if optic:
                optic_name = f"{gen}-{short}-optic"
                o_price, o_power = _OPTICS[(gen, short)]
                optics[optic_name] = TransceiverType(optic_name, gen, o_price, o_power)
            name = f"{gen}-{short}"
            cables[name] = CableType(name, kind, gen, rmin, rmax, price, optic, optic_name, power)
    return cables, optics


def default_catalogue() -> Catalogue:
    """A fresh, independently editable copy of the seeded catalogue."""
    cables, optics = _build_cables()
    return Catalogue(
        switches={s.name: s for s in _SWITCHES},
        nodes={n.name: n for n in _NODES},
        cables=cables,
        transceivers=optics,
    )


DEFAULT_CATALOGUE: Catalogue = default_catalogue()
