"""PHY health (issue 35's suite, last part): the transceivers' temperatures and the links' bit
error rates, on fabrics that report them.

The reading is mlxlink's, per port — ``mlxlink -d lid-<LID> -p <port> -m -c`` (or ``-d mlx5_0``
on a host), as text or as its ``--json`` document: the *Operational Info* (speed, FEC), the
*Physical Counters and BER Info* (raw/pre-FEC, effective/post-FEC and symbol BER, printed
``<coef>E-<magnitude>``) and the *Module Info* (temperature, with the module's own alarm range
``54 [-5..75]``; a passive copper cable reports ``0 [0..0]``, nothing). ibsim has none of it: on
a real fabric a periodic job writes one file per port into a directory the SM host's agent
reads (:func:`read_dir`), named after the device and the port (``lid-12_3.txt``,
``0x98039b0300867bba_1.txt``).

- Temperature: above the module's high alarm (or below its low one); a module that gives no
  range is held to :data:`MAX_TEMPERATURE_C` (UFM's PDR plugin's ``TMAX``).
- BER: against the *Error* column of NVIDIA's field thresholds (``data/field_ber_thresholds.csv``,
  by ASIC generation, speed, FEC mode — mlxlink's FEC name mapped to its mode number, as the
  table keys it — and media); where the reading does not say which row is its
  own (an unknown FEC name, firmware or cable), the loosest of the rows it may be: a port is
  reported only when it is over every limit that can apply.

Plain typed Python: what reads the files on the SM host and names the ports lives in the console.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from designer.imports.health import Verdict

#: the hottest a module that reports no alarm range may run (°C; UFM's PDR plugin's TMAX)
MAX_TEMPERATURE_C = 70.0

THRESHOLDS_CSV = Path(__file__).with_name("data") / "field_ber_thresholds.csv"

#: firmware major version → ASIC generation, as NVIDIA's table names them (ConnectX-5/6,
#: BlueField-2 and Quantum are 16 nm; ConnectX-7, BlueField-3 and Quantum-2 are 7 nm)
ASIC_OF_FIRMWARE = {16: "16nm", 20: "16nm", 22: "16nm", 24: "16nm", 27: "16nm", 28: "7nm", 31: "7nm", 32: "7nm"}

#: mlxlink's names of a port's active FEC → the FEC mode number (PRTL's ``fec_mode_active``) that
#: NVIDIA's table keys its rows by (its "FEC OPCODE" column)
FEC_MODES = {
    "No FEC": 0,
    "Standard RS-FEC - RS(528,514)": 2,
    "Standard LL RS-FEC - RS(271,257)": 3,
    "Standard_RS-FEC - (544,514)": 7,
    "RS-FEC - (544,514) + PLR": 12,
    "LL-FEC - (271,257) + PLR": 13,
    "Ethernet_Consortium_LL_50G_RS_FEC_PLR -(272,257+1)": 14,
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RANGE = re.compile(r"^\s*(-?[0-9.]+)(?:,[-0-9.,]+)?\s*\[\s*(-?[0-9.]+)\s*\.\.\s*(-?[0-9.]+)\s*\]")
_FILE = re.compile(
    r"^(?P<device>lid-\d+|(?:0x)?[0-9a-fA-F]{16}|[A-Za-z0-9_.]+?)[_-]p?(?P<port>\d+)(?:\.(?:txt|json|log))?$"
)


@dataclass(frozen=True)
class PhyReading:
    """What one port's mlxlink output says (None/"" where it says nothing)."""

    temperature: float | None = None
    temperature_range: tuple[float, float] | None = None  # the module's own low/high alarms
    raw_ber: float | None = None  # pre-FEC
    effective_ber: float | None = None  # post-FEC
    symbol_ber: float | None = None
    speed: str = ""  # "NDR", "HDR", "EDR" … ("" on an Ethernet port)
    fec: str = ""
    media: str = ""  # "DACs", "ACC", "Active" (the table's words), "" when the cable does not say
    firmware: str = ""

    def as_json(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> PhyReading:
        fields = dict(doc)
        rng = fields.get("temperature_range")
        fields["temperature_range"] = (float(rng[0]), float(rng[1])) if rng else None
        return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


def fields_of(text: str) -> dict[str, str]:
    """mlxlink's ``Key : value`` lines (text) or its ``--json`` document's sections, flattened to
    key → value (per-lane lists joined by commas; the first of a key wins)."""
    body = text.lstrip()
    out: dict[str, str] = {}
    if body.startswith("{"):
        doc = json.loads(body)
        sections = (doc.get("result") or {}).get("output") or doc
        for section in sections.values():
            if not isinstance(section, dict):
                continue
            for key, value in section.items():
                if isinstance(value, dict):
                    value = ",".join(str(v) for v in value.get("values") or [])
                elif isinstance(value, list):
                    value = ",".join(str(v) for v in value)
                out.setdefault(str(key).strip(), str(value).strip())
        return out
    for raw in _ANSI.sub("", text).splitlines():
        key, sep, value = raw.partition(":")
        if sep and key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def _ber(value: str | None) -> float | None:
    """``15E-255``, ``1E-13``, ``1.5e-12``; None for N/A or an empty field."""
    try:
        return float(value) if value and value.upper() != "N/A" else None
    except ValueError:
        return None


def _media(technology: str) -> str:
    low = technology.lower()
    if "copper" in low or "dac" in low:
        return "ACC" if "active" in low else "DACs"
    if any(word in low for word in ("optical", "vcsel", "nm ", "aoc", "fiber", "laser")):
        return "Active"
    return ""


def parse(text: str) -> PhyReading:
    """One port's reading from mlxlink's output (text or JSON)."""
    f = fields_of(text)
    temperature, rng = None, None
    m = _RANGE.match(f.get("Temperature [C]", ""))
    if m:
        temperature, rng = float(m.group(1)), (float(m.group(2)), float(m.group(3)))
        if temperature == 0 and rng == (0.0, 0.0):  # DDM all zero: no sensor (passive copper)
            temperature, rng = None, None
    else:
        try:
            temperature = float(f.get("Temperature [C]", "").split()[0])
        except (ValueError, IndexError):
            temperature = None
    speed = f.get("Speed", "").upper()
    speed = speed[3:] if speed.startswith("IB-") else speed if speed.isalpha() else ""
    return PhyReading(
        temperature=temperature,
        temperature_range=rng,
        raw_ber=_ber(f.get("Raw Physical BER")),
        effective_ber=_ber(f.get("Effective Physical BER")),
        symbol_ber=_ber(f.get("Symbol BER")),
        speed=speed,
        fec=f.get("FEC", "") if f.get("FEC", "").upper() != "N/A" else "",
        media=_media(f.get("Cable Technology", "") or f.get("Cable Type", "")),
        firmware=f.get("Firmware Version", ""),
    )


def read_dir(directory: Path) -> tuple[dict[tuple[str, int], PhyReading], list[str]]:
    """Every port's reading in ``directory`` (``<device>_<port>[.txt|.json]``, device a ``lid-N``,
    a GUID or a device name) and the files it could not read (name: why)."""
    readings: dict[tuple[str, int], PhyReading] = {}
    unread: list[str] = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        m = _FILE.match(path.name)
        if not path.is_file() or path.name.startswith("."):
            continue
        if not m:
            unread.append(f"{path.name}: not named <device>_<port> (lid-12_3.txt, 0x<guid>_1.txt)")
            continue
        try:
            readings[(device_key(m.group("device")), int(m.group("port")))] = parse(path.read_text(errors="replace"))
        except (OSError, ValueError) as exc:
            unread.append(f"{path.name}: {exc}")
    return readings, unread


def device_key(device: str) -> str:
    """``lid-12`` as it is; a GUID as ``0x`` and 16 lower-case hex digits; a device name as it is."""
    if re.fullmatch(r"(?:0x)?[0-9a-fA-F]{16}", device):
        return "0x" + device.lower().removeprefix("0x")
    return device


@dataclass(frozen=True)
class Limits:
    raw: float
    effective: float
    symbol: float


@dataclass(frozen=True)
class _Row:
    asic: str
    speed: str
    fec: int  # the FEC mode number
    media: str
    limits: Limits


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_FEC_BY_NAME = {_norm(name): mode for name, mode in FEC_MODES.items()}


@cache
def thresholds(path: Path = THRESHOLDS_CSV) -> tuple[_Row, ...]:
    """NVIDIA's table: one row per ASIC, IB speed, FEC and media, the *Error* levels kept."""
    with path.open(newline="") as fh:
        return tuple(
            _Row(
                row["ASIC"].strip(),
                row["Speed"].strip().upper(),
                int(row["FEC OPCODE"]),
                row["Media Type"].strip(),
                Limits(
                    float(row["Pre-FEC BER Error"]), float(row["Post-FEC BER Error"]), float(row["Symbol BER Error"])
                ),
            )
            for row in csv.DictReader(fh)
            if row.get("Protocol", "").strip() == "IB"
        )


def _narrow(rows: list[_Row], keep: Iterable[bool]) -> list[_Row]:
    """The rows ``keep`` selects, or all of them when it selects none (the reading was silent or
    said something the table does not know: every row stays possible)."""
    kept = [r for r, k in zip(rows, keep, strict=True) if k]
    return kept or rows


def limits_for(reading: PhyReading, table: tuple[_Row, ...] | None = None) -> Limits | None:
    """The BER limits that apply to ``reading`` (the loosest of the rows it may be), None when the
    table has no row for its speed (an Ethernet port, an SDR/QDR link)."""
    rows = [r for r in (table if table is not None else thresholds()) if r.speed == reading.speed]
    if not rows:
        return None
    try:
        asic = ASIC_OF_FIRMWARE.get(int(reading.firmware.split(".")[0]), "")
    except ValueError:
        asic = ""
    fec = _FEC_BY_NAME.get(_norm(reading.fec))
    rows = _narrow(rows, (bool(asic) and r.asic == asic for r in rows))
    rows = _narrow(rows, (r.fec == fec for r in rows))
    rows = _narrow(rows, (bool(reading.media) and r.media == reading.media for r in rows))
    return Limits(
        max(r.limits.raw for r in rows), max(r.limits.effective for r in rows), max(r.limits.symbol for r in rows)
    )


def over(reading: PhyReading, table: tuple[_Row, ...] | None = None) -> list[str]:
    """What in ``reading`` is beyond its limits, in words (empty: healthy or nothing reported)."""
    out: list[str] = []
    t, rng = reading.temperature, reading.temperature_range
    if t is not None:
        low, high = rng if rng else (None, MAX_TEMPERATURE_C)
        if t > high:
            out.append(f"module at {t:g} °C, above {high:g} °C")
        elif low is not None and t < low:
            out.append(f"module at {t:g} °C, below {low:g} °C")
    limits = limits_for(reading, table)
    if limits is not None:
        for name, value, limit in (
            ("raw (pre-FEC) BER", reading.raw_ber, limits.raw),
            ("effective (post-FEC) BER", reading.effective_ber, limits.effective),
            ("symbol BER", reading.symbol_ber, limits.symbol),
        ):
            if value is not None and value > limit:
                out.append(f"{name} {value:.1E} > {limit:.0E}")
    return out


TITLE = "Transceiver temperatures and bit error rates within their limits"
NOT_REPORTED = (
    "this fabric reports no transceiver temperature or BER (no mlxlink readings in the SM host's "
    'PHY directory: see docs/operations.md, "PHY readings")'
)


def phy(readings: Mapping[str, PhyReading], unread: Iterable[str] = ()) -> Verdict:
    """``readings``: a port's name → its reading. Skipped when there are none."""
    unread = list(unread)
    if not readings:
        why = NOT_REPORTED + (f"; unreadable: {'; '.join(unread[:3])}" if unread else "")
        return Verdict.skip("phy", TITLE, why)
    out = Verdict(
        "phy",
        TITLE,
        "A high raw BER under a clean effective BER is the FEC at work: plan the cable's "
        "replacement; an effective or symbol BER over its limit loses packets: isolate the port "
        "and replace the cable or transceiver; a hot module: check the airflow, then the module",
    )
    table = thresholds()
    for name, reading in sorted(readings.items()):
        found = over(reading, table)
        if found:
            out.add(f"{name}: " + "; ".join(found))
    return out
