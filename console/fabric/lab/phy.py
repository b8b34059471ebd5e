"""PHY readings on a lab: what a real SM host's periodic ``mlxlink -d lid-N -p P -m -c`` job
records, which ibsim cannot (it has no transceivers). ``manage.py lab phy set`` writes a port's
reading into the lab's PHY directory (the one its SM host's agent reads: ``LabHost.phy_dir``), in
mlxlink's layout, so the validation suite's ``phy`` test and the health policy's gauges read a
lab as they read a real fabric; the demo records one for every switch port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from console.fabric.lab.fabrics import lab_for
from console.fabric.lab.faults import audit_fault, resolve_port
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.context import Actor
from designer.imports.phy import PhyReading

#: a healthy NDR link through an optical module (Quantum-2 firmware): what a port reads unless set
HEALTHY = PhyReading(
    temperature=46.0,
    temperature_range=(-5.0, 75.0),
    raw_ber=3e-9,
    effective_ber=1.5e-254,
    symbol_ber=1.5e-254,
    speed="NDR",
    fec="Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)",
    media="Active",
    firmware="31.2012.2256",
)
FIELDS = ("temperature", "raw_ber", "effective_ber", "symbol_ber")
_TECHNOLOGY = {
    "Active": "850 nm VCSEL, optical",
    "DACs": "Copper cable, passive, unequalized",
    "ACC": "Copper cable, active",
}


def _line(key: str, value: object) -> str:
    return f"{key:<35}: {value}"


def _ber(value: float | None) -> str:
    """As mlxlink prints a BER: an integer coefficient, two digits (``15E-255`` is 1.5e-254)."""
    if value is None:
        return "N/A"
    mantissa, _, exponent = f"{value:.1E}".partition("E")
    return f"{round(float(mantissa) * 10)}E{int(exponent) - 1}"


def mlxlink_text(r: PhyReading) -> str:
    """``r`` as mlxlink prints a port (``-m -c``: operational, tool, counters and module info)."""
    if r.temperature is None:
        temperature = "N/A"
    elif r.temperature_range:
        temperature = f"{r.temperature:g} [{r.temperature_range[0]:g}..{r.temperature_range[1]:g}]"
    else:
        temperature = f"{r.temperature:g}"
    sections = {
        "Operational Info": [
            ("State", "Active"),
            ("Physical state", "LinkUp"),
            ("Speed", f"IB-{r.speed}" if r.speed else "N/A"),
            ("Width", "4x"),
            ("FEC", r.fec or "N/A"),
        ],
        "Tool Information": [("Firmware Version", r.firmware or "N/A")],
        "Physical Counters and BER Info": [
            ("Symbol BER", _ber(r.symbol_ber)),
            ("Effective Physical BER", _ber(r.effective_ber)),
            ("Raw Physical BER", _ber(r.raw_ber)),
        ],
        "Module Info": [
            ("Temperature [C]", temperature),
            ("Cable Technology", _TECHNOLOGY.get(r.media, "N/A")),
        ],
    }
    out = [""]
    for title, rows in sections.items():
        out += [title, "-" * len(title), *(_line(k, v) for k, v in rows), ""]
    return "\n".join(out) + "\n"


def parse_assignments(values: Iterable[str]) -> dict[str, float]:
    """``temperature=79 effective_ber=3e-11`` → {field: value}; a clear error for anything else."""
    out: dict[str, float] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or name not in FIELDS:
            raise LabError(f"not a PHY value: {item!r} (expected one of {', '.join(FIELDS)}=number)")
        try:
            out[name] = float(value)
        except ValueError:
            raise LabError(f"{name}: {value!r} is not a number") from None
    return out


def _file(directory: Path, node_id: str, port: int) -> Path:
    return directory / f"0x{node_id.split('-', 1)[1].lower()}_{port}.txt"


def set_phy(
    fabric: Fabric, node: str, port: int, values: Mapping[str, float], *, actor: Actor | None = None
) -> PhyReading:
    """Record ``node`` ``port``'s reading (the healthy one, with ``values`` over it); audited."""
    lab = lab_for(fabric)
    node_id, sim_port = resolve_port(fabric, node, port)
    node_id = lab.node_id(node_id)
    reading = PhyReading(**{**HEALTHY.__dict__, **values})
    directory = Path(lab.workdir) / "phy"
    directory.mkdir(exist_ok=True)
    _file(directory, node_id, sim_port).write_text(mlxlink_text(reading))
    audit_fault(fabric, actor, "fabric.lab.phy", {"node": node, "port": port, **values})
    return reading


def record_all(fabric: Fabric, overrides: Mapping[tuple[str, int], Mapping[str, float]] = {}) -> int:
    """A reading for every switch port of the lab (healthy, or ``overrides`` by design name and
    port): what the demo's SM host would have recorded. The number of files written."""
    lab = lab_for(fabric)
    directory = Path(lab.workdir) / "phy"
    directory.mkdir(exist_ok=True)
    healthy = mlxlink_text(HEALTHY)
    for switch in lab.topology.switches():
        for port in range(1, switch.nports + 1):
            _file(directory, switch.node_id, port).write_text(healthy)
    for (node, port), values in overrides.items():
        set_phy(fabric, node, port, values)
    return sum(s.nports for s in lab.topology.switches())
