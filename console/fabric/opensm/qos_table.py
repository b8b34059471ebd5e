"""The per-fabric QoS table: each priority class's SL, VL and VL arbitration weight (plain Python).

Operators edit one row per priority class (``training``, ``inference``, ``best-effort``, the
names scheduling uses) plus the high-priority limit. :meth:`QosTable.options` turns the table
into the ``opensm.conf`` options of :class:`~console.fabric.opensm.qos.QosOptions`:

- ``qos_sl2vl``: each class's SL goes to its VL; every SL no class uses goes to the best-effort
  class's VL (unmarked traffic is best effort);
- ``qos_vlarb_high`` / ``qos_vlarb_low``: one ``VL:weight`` entry per class in the table the class
  sits in (weights in units of 64 bytes, IBA 7.6.9);
- ``qos_high_limit``: how many 4 KB the high-priority table may send before a low-priority packet
  gets its chance (255 = unbounded, which can starve the low table).

The default puts inference alone in the high-priority table with a bounded limit (it goes first,
so keeps its latency, and a saturating training job cannot take its share) and weighs training
3:1 against best-effort in the low table. docs/operations.md explains the numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.fabric.opensm.qos import QosOptions

CLASSES = ("training", "inference", "best-effort")
TABLES = ("high", "low")


@dataclass(frozen=True)
class ClassQos:
    """One priority class: its service level, the VL that SL maps to, and the VL's arbitration."""

    name: str
    sl: int
    vl: int
    table: str
    weight: int

    def to_json(self) -> dict[str, Any]:
        """The stored form (without the name, which is the key)."""
        return {"sl": self.sl, "vl": self.vl, "table": self.table, "weight": self.weight}


@dataclass(frozen=True)
class QosTable:
    """Class → SL/VL/weight rows and the limit of the high-priority table."""

    classes: tuple[ClassQos, ...]
    high_limit: int = 4
    max_vls: int = 8

    def by_name(self) -> dict[str, ClassQos]:
        """Rows by class name."""
        return {c.name: c for c in self.classes}

    def sl_of(self, name: str) -> int | None:
        """The SL of class ``name`` (None when the class has no row)."""
        row = self.by_name().get(name)
        return row.sl if row else None

    def validate(self) -> list[str]:
        """Every reason this table cannot reach OpenSM (empty when it can)."""
        errors: list[str] = []
        names = [c.name for c in self.classes]
        if sorted(names) != sorted(CLASSES):
            errors.append(f"classes must be exactly {', '.join(CLASSES)} (got {', '.join(names) or 'none'})")
        if self.max_vls not in (1, 2, 4, 8, 15):
            errors.append(f"max_vls={self.max_vls}: expected 1, 2, 4, 8 or 15")
        if not 0 <= self.high_limit <= 255:
            errors.append(f"high_limit={self.high_limit}: expected 0-255 (units of 4 KB; 255 = unbounded)")
        for c in self.classes:
            if not 0 <= c.sl <= 15:
                errors.append(f"{c.name}: SL {c.sl} outside 0-15")
            if not 0 <= c.vl < min(self.max_vls, 15):
                errors.append(f"{c.name}: VL {c.vl} not below max_vls={self.max_vls} (VL15 is management only)")
            if c.table not in TABLES:
                errors.append(f"{c.name}: table {c.table!r} must be 'high' or 'low'")
            if not 0 <= c.weight <= 255:
                errors.append(f"{c.name}: weight {c.weight} outside 0-255")
        for field_name in ("sl", "vl"):
            seen: dict[int, str] = {}
            for c in self.classes:
                value = getattr(c, field_name)
                if value in seen:
                    errors.append(
                        f"{c.name}: {field_name.upper()} {value} already used by {seen[value]} "
                        "(each class needs its own, or arbitration cannot tell them apart)"
                    )
                seen.setdefault(value, c.name)
        if self.classes and not any(c.table == "low" and c.weight > 0 for c in self.classes):
            errors.append("the low-priority table needs at least one class with a weight above 0")
        return errors

    def options(self) -> QosOptions:
        """The ``opensm.conf`` QoS options this table renders to. Raises ValueError when invalid."""
        errors = self.validate()
        if errors:
            raise ValueError("; ".join(errors))
        rows = self.by_name()
        fallback = rows["best-effort"].vl
        sl2vl = [fallback] * 16
        for c in self.classes:
            sl2vl[c.sl] = c.vl
        ordered = sorted(self.classes, key=lambda c: c.vl)
        high = tuple((c.vl, c.weight) for c in ordered if c.table == "high") or ((0, 0),)
        low = tuple((c.vl, c.weight) for c in ordered if c.table == "low")
        options = QosOptions(
            max_vls=self.max_vls, high_limit=self.high_limit, vlarb_high=high, vlarb_low=low, sl2vl=tuple(sl2vl)
        )
        problems = options.validate()
        if problems:  # defence in depth: the options lint OpenSM's own way too
            raise ValueError("; ".join(problems))
        return options

    def to_json(self) -> dict[str, Any]:
        """Canonical JSON (classes in :data:`CLASSES` order)."""
        order = {name: i for i, name in enumerate(CLASSES)}
        classes = sorted(self.classes, key=lambda c: order.get(c.name, len(order)))
        return {
            "max_vls": self.max_vls,
            "high_limit": self.high_limit,
            "classes": {c.name: c.to_json() for c in classes},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QosTable:
        """Rebuild from :meth:`to_json` (raises ValueError/KeyError/TypeError on malformed input)."""
        classes = data["classes"]
        if not isinstance(classes, Mapping):
            raise TypeError("classes must be an object of class name → row")
        rows = tuple(
            ClassQos(
                name=str(name),
                sl=int(row["sl"]),
                vl=int(row["vl"]),
                table=str(row["table"]),
                weight=int(row["weight"]),
            )
            for name, row in classes.items()
        )
        return cls(rows, high_limit=int(data.get("high_limit", 4)), max_vls=int(data.get("max_vls", 8)))


#: The default: inference first (high table, bounded), training 3:1 over best-effort (low table).
DEFAULT_TABLE = QosTable(
    classes=(
        ClassQos("training", sl=1, vl=1, table="low", weight=192),
        ClassQos("inference", sl=2, vl=2, table="high", weight=64),
        ClassQos("best-effort", sl=0, vl=0, table="low", weight=64),
    ),
    high_limit=4,
    max_vls=8,
)
