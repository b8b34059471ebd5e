"""What every fabric driver offers the push pipeline: push, verify, read back, port admin.

A driver receives the complete declarative desired state (:class:`DesiredFabric`) and reports a
:class:`~console.fabric.opensm.push.PushResult` whose steps the pipeline records. Drivers never
touch the database; they speak to OpenSM files and SMPs (``lab``, ``opensm``, ``switch``) or to
UFM's REST API (``ufm``). Every push is set-style and idempotent: pushing the same state twice
changes nothing the second time and only re-verifies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from console.fabric.opensm.partitions import Member, Membership, Partition
from console.fabric.opensm.partitions_file import OperatorPartition
from console.fabric.opensm.push import PushOptions, PushResult
from console.fabric.opensm.qos import QosClass, QosOptions, QosPolicy
from console.fabric.opensm.qos_table import QosTable

# progress(step_name, "running"): called when a step starts, so the pipeline can show it live
# (and renew its lease). Drivers call it before slow work; it must be cheap.
Progress = Callable[[str, str], None]


def no_progress(step: str, status: str) -> None:
    """The default progress callback: nobody is watching."""


class DriverError(RuntimeError):
    """The driver could not reach or control its target (not a verification mismatch)."""


class DriverUnavailable(DriverError):
    """The target is not running or not configured (lab down, UFM unreachable)."""


# ibportstate codes of LinkWidthEnabled / LinkSpeedEnabled and how the tools print them.
WIDTH_NAMES = {1: "1X", 2: "4X", 4: "8X", 8: "12X", 16: "2X"}
SPEED_NAMES = {1: "2.5 Gbps", 2: "5.0 Gbps", 4: "10.0 Gbps"}


def decode_enabled(text: str, names: Mapping[int, str]) -> int | None:
    """``"1X or 4X"`` → 3 (the bit mask of the names); None when a part is not one of them."""
    codes = {name: code for code, name in names.items()}
    mask = 0
    for part in text.split(" or "):
        code = codes.get(part.strip())
        if code is None:
            return None
        mask |= code
    return mask or None


@dataclass(frozen=True, order=True)
class PortAdmin:
    """One switch port's wanted administrative state (``width``/``speed``: ibportstate codes of
    the enabled link width and speed, None = leave the port's own setting)."""

    switch: str
    port: int
    enabled: bool
    width: int | None = None
    speed: int | None = None

    @property
    def label(self) -> str:
        """``leaf3[6]`` as operators write it."""
        return f"{self.switch}[{self.port}]"

    def describe(self) -> str:
        """``enabled width=1X speed=2.5 Gbps`` (only what is set)."""
        text = "enabled" if self.enabled else "disabled"
        if self.width is not None:
            text += f" width={WIDTH_NAMES.get(self.width, self.width)}"
        if self.speed is not None:
            text += f" speed={SPEED_NAMES.get(self.speed, self.speed)}"
        return text


@dataclass(frozen=True)
class DesiredFabric:
    """The complete desired state of one fabric, as drivers consume it."""

    partitions: tuple[Partition, ...] = ()
    qos: QosPolicy | None = None
    port_admin: tuple[PortAdmin, ...] = ()
    # SL→VL map and VL arbitration from the fabric's QoS table (None: OpenSM's QoS options untouched).
    qos_options: QosOptions | None = None
    # P_Keys of partitions whose owner holds SHARP trees (drivers that can verify SHARP do; opensm ignores it).
    sharp_pkeys: frozenset[int] = frozenset()
    # Partitions found on the SM host that the console keeps as written (``source: operator``),
    # and the P_Keys of those an operator deleted in the console (to be dropped from the file).
    operator: tuple[OperatorPartition, ...] = ()
    dropped: tuple[int, ...] = ()
    # The canonical JSON this state was read from (what an agent is sent).
    source: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DesiredFabric:
        """Rebuild from the canonical JSON stored on a ChangeRequest (see changes.desired)."""
        partitions = []
        operator: list[OperatorPartition] = []
        dropped: list[int] = []
        console_rows = []
        for p in data.get("partitions", []):
            if p.get("source") == "operator":
                pkey = int(p["pkey"], 16) if isinstance(p["pkey"], str) else p["pkey"]
                if p.get("removed"):
                    dropped.append(pkey)
                else:
                    operator.append(OperatorPartition(pkey, p["name"], p["raw"]))
                continue
            console_rows.append(p)
            members = []
            for port, membership in p["members"]:
                key: int | str = port if not str(port).startswith("0x") else int(port, 16)
                members.append(Member(key, Membership(membership) if membership else None))
            partitions.append(
                Partition(
                    name=p["name"],
                    pkey=int(p["pkey"], 16) if isinstance(p["pkey"], str) else p["pkey"],
                    ipoib=bool(p.get("ipoib")),
                    # The class's SL rides both in qos-ulps (P_Key → SL) and on the partition
                    # (``sl=``: PathRecords and the partition's multicast groups), so they agree.
                    sl=int(p["sl"]) if p.get("sl") else None,
                    members=tuple(members),
                    indx0=bool(p.get("indx0")),
                )
            )
        qos_data = data.get("qos") or {}
        qos = None
        if qos_data.get("classes"):
            qos = QosPolicy(
                default_sl=int(qos_data.get("default_sl", 0)),
                classes=tuple(
                    QosClass(int(pkey, 16) if isinstance(pkey, str) else pkey, int(sl), label)
                    for pkey, sl, label in qos_data["classes"]
                ),
            )
        admin = tuple(
            PortAdmin(
                a["switch"],
                int(a["port"]),
                bool(a["enabled"]),
                int(a["width"]) if a.get("width") is not None else None,
                int(a["speed"]) if a.get("speed") is not None else None,
            )
            for a in data.get("port_admin", [])
        )
        table = qos_data.get("table")
        options = QosTable.from_json(table).options() if table else None
        sharp = frozenset(p.pkey for p, raw in zip(partitions, console_rows, strict=True) if raw.get("sharp"))
        return cls(tuple(partitions), qos, admin, options, sharp, tuple(operator), tuple(dropped), data)


@dataclass
class PortStateResult:
    """Outcome of one port-admin operation, verified by reading the port back."""

    switch: str
    port: int
    enabled: bool
    changed: bool
    verified: bool
    log: list[str] = field(default_factory=list)


class FabricDriver(Protocol):
    """The one interface the push pipeline uses, whatever manages the fabric."""

    name: str

    def push(
        self,
        desired: DesiredFabric,
        *,
        previous: DesiredFabric | None = None,
        options: PushOptions | None = None,
        progress: Progress = no_progress,
    ) -> PushResult:
        """Make the fabric carry ``desired`` and prove it on the wire; roll back on mismatch."""
        ...

    def verify(self, desired: DesiredFabric, *, options: PushOptions | None = None) -> list[str]:
        """Mismatches between ``desired`` and what the fabric shows now (empty = verified)."""
        ...

    def read_applied(self) -> dict[str, str]:
        """What the target carries now, as artefact name → text (for drift and diffs)."""
        ...

    def set_port_state(
        self,
        switch: str,
        port: int,
        enabled: bool,
        *,
        width: int | None = None,
        speed: int | None = None,
    ) -> PortStateResult:
        """Enable or disable one switch port (and set its enabled width/speed), read it back."""
        ...
