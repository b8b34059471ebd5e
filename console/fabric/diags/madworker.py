"""A long-lived MAD helper: counters, port states, P_Key tables and forwarding tables via libibmad.

Why: one diag process (``perfquery``, ``smpquery``) per port or switch costs ~40-80 ms of start-up
and ibsim attach. One process that opens its umad port once answers every request of a session.
It runs with the same environment as the diags (``LD_PRELOAD`` of umad2sim, ``SIM_HOST``,
``IBSIM_SOCKNAME`` in the lab; nothing on a real host), so it must be its own process. The client
is :class:`console.fabric.diags.mad.MadSession`.

Two ways to put MADs on the wire, same answers:

- **pipelined** (the default): :class:`~console.fabric.diags.mad_pipeline.Pipeline` builds each 256-byte MAD itself and keeps up to
  ``window`` of them in flight on the umad port libibmad opened (``umad_send``/``umad_recv`` of
  libibumad with libibmad's agents), matches replies by transaction ID, times each MAD out on its
  own and retries it (``retries`` times); answers come back in request order whatever order the
  replies arrived in. A MAD the fabric answers with a redirect (ClassPortInfo) is re-asked
  synchronously through libibmad, which follows redirects.
- **sync**: libibmad's ``pma_query_via``/``smp_query_via``, one MAD in flight (~10,000 MADs/s
  against ibsim, each MAD paying a full round trip through umad2sim and ibsim).

Protocol: one JSON request per stdin line, one JSON reply per stdout line; the first line the
helper writes is ``{"ok": true, "ready": true, "pipelined": bool}`` (or ``{"ok": false,
"error": ...}``)::

    {"op": "ping"}                                    → {"ok": true, "data": "pong"}
    {"op": "counters", "ports": [[lid, port(, mask)], ...]}
                                                      → {"ok": true, "data": [[x, r, errs, state]...]}
    {"op": "lft", "lid": 12, "top": 300}              → {"ok": true, "data": [port per lid...]}
    {"op": "pkeys", "ports": [[lid, port(, blocks)], ...]} → {"ok": true, "data": [[[index, raw]...]...]}
    {"op": "portinfo", "ports": [[lid, port], ...]}   → {"ok": true, "data": [{"lid":..}...]}
    {"op": "qos", "ports": [[lid, port, switch, nports], ...]}
                                                      → {"ok": true, "data": [{"sl2vl": {in: [16 VLs]},
                                                          "low": [[vl, weight] × 32], "high": [...]}...]}
    {"op": "nodeinfo", "lids": [lid, ...]}            → {"ok": true, "data": [{"port_guid":..}...]}
    {"op": "sminfo", "lid": 1}                        → {"ok": true, "data": {"act_count": ...}}

Every request may carry ``"mode": "sync" | "pipelined"``, ``"window"`` (MADs in flight),
``"mad_timeout_ms"``, ``"retries"`` and ``"native": false`` (pipelined MADs through the Python loop
even where madpipe.c's is built); every reply carries ``"stats"`` (``mads`` sent, ``seconds``,
``retried``, ``failed``, ``mode``, ``native``). The hello line says ``"native"`` when the C loop
(``_madpipe.so``, built from ``madpipe.c`` by scripts/bootstrap.sh) is loaded: the same algorithm
without the interpreter's cost per MAD.

``counters``: ``mask`` (default 7) picks what is read for the port: 1 the data counters
(PortCountersExtended), 2 the error counters (PortCounters), 4 the link state (PortInfo). The row
is ``null`` when the data counters were asked for and failed; ``errs`` is ``{}`` and ``state``
``""`` when their MAD failed, and both are ``null`` when not asked for. Other per-port answers are
``null`` where the MAD failed (timeout, no such LID). ``pkeys`` is SubnGet(P_KeyTable) of block 0
(the first 32 keys, where OpenSM puts them) or of the first ``blocks`` blocks (``smpquery pkeys``
reads PartitionCap/32 blocks, NodeInfo ``partition_cap`` gives it) and returns the non-zero
entries as ``[index, raw]`` — the top bit of ``raw`` is full membership. The attribute modifier is
``port << 16 | block`` as smpquery sends it; on an HCA the port is its CA port (the one owning the
LID).

This module is the process (request loop and dispatch); the wire format is in
:mod:`~console.fabric.diags.mad_wire`, the two modes in :mod:`~console.fabric.diags.mad_sync` and
:mod:`~console.fabric.diags.mad_pipeline`, the ops and the decoding of answers in
:mod:`~console.fabric.diags.mad_ops`.

Standard library only (no Django): ``python -m console.fabric.diags.madworker``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO

from console.fabric.diags.mad_ops import Run, counters, lft, nodeinfo, pkeys, portinfo, qos_tables, sminfo
from console.fabric.diags.mad_pipeline import Pipeline
from console.fabric.diags.mad_sync import Mad
from console.fabric.diags.mad_wire import ATTR_NODE_INFO, ATTR_PORT_INFO, ATTR_SM_INFO, SMI_CLASS, Stats


@dataclass
class Helper:
    """The helper's state: libibmad, the pipeline when it could be set up, defaults."""

    mad: Mad
    pipeline: Pipeline | None = None
    last: Stats = field(default_factory=Stats)

    @classmethod
    def open(cls) -> Helper:
        mad = Mad()
        try:
            pipeline: Pipeline | None = Pipeline(mad)
        except (OSError, AttributeError):
            pipeline = None  # no libibumad (or an ABI we do not know): synchronous only
        return cls(mad, pipeline)

    def runner(self, req: dict, stats: Stats) -> Run:
        mode = req.get("mode", "pipelined")
        if mode not in ("sync", "pipelined"):
            raise ValueError(f"unknown mode {mode!r}")
        if mode == "sync" or self.pipeline is None:
            return lambda queries: self.mad.query(queries, stats)
        pipe = self.pipeline
        window = int(req["window"]) if "window" in req else None
        timeout = int(req["mad_timeout_ms"]) if "mad_timeout_ms" in req else None
        retries = int(req["retries"]) if "retries" in req else None
        native = bool(req.get("native", True))
        return lambda queries: pipe.query(
            queries, stats, window=window, timeout_ms=timeout, retries=retries, native=native
        )


def answer(helper: Helper, req: dict, stats: Stats | None = None) -> object:
    """The data of one request (raises ValueError/KeyError/TypeError on a bad one)."""
    stats = stats if stats is not None else Stats()
    op = req["op"]
    if op == "ping":
        return "pong"
    run = helper.runner(req, stats)
    if op == "counters":
        return counters(run, req["ports"])
    if op == "lft":
        return lft(run, int(req["lid"]), int(req["top"]))
    if op == "pkeys":  # ports: [lid, port] or [lid, port, blocks]
        return pkeys(run, req["ports"])
    if op == "qos":  # ports: [lid, port, switch, nports]
        return qos_tables(run, req["ports"])
    if op == "portinfo":
        ports = [(int(p[0]), int(p[1])) for p in req["ports"]]
        return [portinfo(a) for a in run([(SMI_CLASS, lid, ATTR_PORT_INFO, port) for lid, port in ports])]
    if op == "nodeinfo":
        lids = [int(lid) for lid in req["lids"]]
        return [nodeinfo(a) for a in run([(SMI_CLASS, lid, ATTR_NODE_INFO, 0) for lid in lids])]
    if op == "sminfo":
        return sminfo(run([(SMI_CLASS, int(req["lid"]), ATTR_SM_INFO, 0)])[0])
    raise ValueError(f"unknown op {op!r}")


def serve(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    """Answer requests until stdin closes."""
    try:
        helper = Helper.open()
    except OSError as exc:
        stdout.write(json.dumps({"ok": False, "error": str(exc)}) + "\n")
        stdout.flush()
        return
    pipe = helper.pipeline
    hello = {
        "ok": True,
        "ready": True,
        "pipelined": pipe is not None,
        "native": pipe is not None and pipe.native is not None,
    }
    stdout.write(json.dumps(hello) + "\n")
    stdout.flush()
    for line in stdin:
        stats = Stats()
        started = time.monotonic()
        try:
            reply = {"ok": True, "data": answer(helper, json.loads(line), stats)}
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stats.seconds = time.monotonic() - started
        reply["stats"] = stats.as_dict()
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
