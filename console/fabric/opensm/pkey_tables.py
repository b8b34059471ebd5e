"""Reading the P_Key tables of ports by GUID, and telling when OpenSM has acted on a reload.

How the tables are read: one batch of SubnGet(P_KeyTable) per polling round through the
long-lived MAD helper (:class:`console.fabric.diags.mad.MadSession`, ~15 ms for 136 ports on
the 2,048-GPU lab), or, where the helper cannot start (no libibmad), one ``smpquery pkeys``
process per port, ``parallel`` at a time. Ports are addressed by LID: the GUID → LID map of the
last discovery of this fabric is reused (or the lab's, written when its subnet came up); before
a push trusts it, NodeInfo through every checked LID must answer with the expected port GUID,
and a GUID the map does not know or a LID that answers for another port means a fresh
``ibnetdiscover``. Without the helper every push discovers, as before.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from console.fabric.diags import mad as mad_helper
from console.fabric.diags.mad import MadError, MadSession, MadUnavailable
from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.opensm.push_types import PushOptions, PushStep, PushTarget

# GUID → (LID, port) of the HCA ports of each fabric (by DiagEnv), from its last discovery.
_LID_CACHE: OrderedDict[tuple, dict[int, tuple[int, int]]] = OrderedDict()
_LID_CACHE_SIZE = 16
_LID_CACHE_LOCK = threading.Lock()


def _cached_lids(key: tuple) -> dict[int, tuple[int, int]] | None:
    with _LID_CACHE_LOCK:
        lids = _LID_CACHE.get(key)
        if lids is not None:
            _LID_CACHE.move_to_end(key)
        return lids


def cache_lids(key: tuple, lids: dict[int, tuple[int, int]] | None) -> None:
    """Remember (or, with None, forget) the LID map of the fabric whose diag env has ``key``."""
    with _LID_CACHE_LOCK:
        if lids is None:
            _LID_CACHE.pop(key, None)
            return
        _LID_CACHE[key] = lids
        _LID_CACHE.move_to_end(key)
        while len(_LID_CACHE) > _LID_CACHE_SIZE:
            _LID_CACHE.popitem(last=False)


class Sweep:
    """Did OpenSM end a heavy sweep after the reload? (None: the target cannot tell.)"""

    def __init__(self, target: PushTarget) -> None:
        self.target = target
        mark = getattr(target, "sweep_mark", None)
        self.mark = mark() if callable(mark) else None

    @property
    def known(self) -> bool:
        return self.mark is not None and callable(getattr(self.target, "swept_since", None))

    def done(self) -> bool:
        return self.known and bool(self.target.swept_since(self.mark))  # type: ignore[attr-defined]


class PortTables:
    """Reads P_Key tables by port GUID: LID map, MAD helper batch or smpquery processes."""

    def __init__(self, target: PushTarget, diags: DiagRunner, options: PushOptions) -> None:
        self.target = target
        self.diags = diags
        self.options = options
        env = getattr(diags, "env", None)
        self.key = mad_helper.env_key(env) if env is not None else None
        self.mad: MadSession | None = None
        if options.use_mad and env is not None:
            self.mad = mad_helper.shared_session(env, timeout=options.diag_timeout)
        self.lids: dict[int, tuple[int, int]] = {}
        self.source = ""
        self.blocks: dict[int, int] = {}  # P_Key table blocks to read per GUID (PartitionCap)
        self.validated: set[int] = set()
        # P_Key → index of each port's last read table (what a job's NCCL_IB_PKEY must name).
        self.indexes: dict[int, dict[int, int]] = {}

    # -- LIDs --------------------------------------------------------------------------------

    def load(self, step: PushStep) -> None:
        """The GUID → LID map: cached, the target's hint, or a fresh ibnetdiscover."""
        if self.mad is not None and self.key is not None:
            cached = _cached_lids(self.key)
            if cached:
                self.lids, self.source = cached, "cached"
                return
            hint = getattr(self.target, "port_lids", None)
            lids = hint() if callable(hint) else None
            if lids:
                self.lids, self.source = dict(lids), "lab"
                return
        self.discover(step)

    def discover(self, step: PushStep) -> None:
        started = time.monotonic()
        topo = self.diags.ibnetdiscover()
        self.lids = {
            guid: (lid, port)
            for (nid, port), guid in topo.port_guids.items()
            if not topo.nodes[nid].is_switch and (lid := topo.nodes[nid].lid) is not None
        }
        self.source = "ibnetdiscover"
        self.validated.clear()
        self.blocks.clear()
        if self.key is not None:
            cache_lids(self.key, self.lids)
        step.log.append(f"ibnetdiscover: {len(self.lids)} HCA ports in {time.monotonic() - started:.2f}s")

    def validate(self, guids: Iterable[int], step: PushStep) -> tuple[list[int], list[int]]:
        """NodeInfo through each LID must name the expected port GUID; also learns each port's
        P_Key table size. Returns (wrong, unchecked): LIDs that answer for another port, and
        ports not confirmed (no answer, helper error, no helper: the map is then fresh from
        ibnetdiscover, as every push did before the helper); those are read with smpquery."""
        todo = sorted(g for g in set(guids) if g in self.lids and g not in self.validated)
        if self.mad is None or not todo:
            return [], todo
        try:
            infos = self.mad.nodeinfo([self.lids[g][0] for g in todo], timeout=self.options.diag_timeout)
        except MadUnavailable as exc:
            self._give_up_mad(step, exc)
            return [], todo
        except MadError as exc:
            step.log.append(f"MAD helper: {exc}")
            return [], todo
        wrong, unchecked = [], []
        for guid, info in zip(todo, infos, strict=True):
            if info is None:
                unchecked.append(guid)
            elif int(info.get("port_guid", -1)) != guid:
                wrong.append(guid)
            else:
                self.validated.add(guid)
                cap = int(info.get("partition_cap") or 32)
                self.blocks[guid] = max(1, (cap + 31) // 32)
        return wrong, unchecked

    def _give_up_mad(self, step: PushStep, exc: Exception) -> None:
        step.log.append(f"MAD helper unavailable, reading with smpquery: {exc}")
        self.mad = None

    # -- P_Key tables ------------------------------------------------------------------------

    def read(self, guids: Sequence[int], step: PushStep) -> dict[int, dict[int, str] | str]:
        """Membership by P_Key of each port, or why it could not be read this round."""
        if self.mad is not None:
            mad_guids = [g for g in guids if g in self.validated]
            out: dict[int, dict[int, str] | str] = {}
            try:
                tables = self.mad.pkeys(
                    [self.lids[g] for g in mad_guids],
                    blocks=[self.blocks.get(g, 1) for g in mad_guids],
                    timeout=self.options.diag_timeout,
                )
                for guid, table in zip(mad_guids, tables, strict=True):
                    out[guid] = table.pkeys() if table is not None else "no P_Key table answer"
                    if table is not None:
                        self.indexes[guid] = table.indexes()
            except MadUnavailable as exc:
                self._give_up_mad(step, exc)
                return self._read_processes(guids)
            except MadError as exc:  # the session restarts its helper on the next request
                out = dict.fromkeys(mad_guids, f"MAD helper: {exc}")
            rest = [g for g in guids if g not in out]
            if rest:  # no NodeInfo answer: the process path finds the table size itself
                out.update(self._read_processes(rest))
            return out
        return self._read_processes(guids)

    def _read_processes(self, guids: Sequence[int]) -> dict[int, dict[int, str] | str]:
        def read(guid: int) -> tuple[int, dict[int, str] | str]:
            try:
                lid = self.lids[guid][0]
                table = self.diags.pkeys(lid, timeout=self.options.diag_timeout)
                self.indexes[guid] = table.indexes()
                return guid, table.pkeys()
            except DiagError as exc:  # transient while OpenSM re-sweeps: poll again
                return guid, str(exc)

        with ThreadPoolExecutor(max_workers=max(1, self.options.parallel)) as pool:
            return dict(pool.map(read, guids))
