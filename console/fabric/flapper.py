"""A demo fault: one lab link that goes down now and then and comes back.

It simulates a marginal cable (the physical world, not an operator action), so it talks to the
ibsim console directly and writes no audit rows; the collector and discovery notice it exactly
as they would notice a real flap.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from console.fabric.lab.fabrics import lab_for
from console.fabric.lab.faults import resolve_port
from console.fabric.lab.manager import Lab
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Flap:
    node: str  # the design's name, e.g. "su01-leaf-r1"
    port: int
    every_s: float = 90.0  # time up between flaps
    down_s: float = 8.0  # time down per flap


#: The demo lab's flapping link: one cable of the su01-leaf-r1 -- spine-01 bundle.
DEMO_FLAP = Flap("su01-leaf-r1", 33, every_s=90.0, down_s=8.0)


def flap_once(fabric: Fabric, flap: Flap, stop: threading.Event) -> bool:
    """Unplug, wait ``down_s`` (or until stopped), replug. Returns whether it unplugged."""
    lab = lab_for(fabric)
    node_id, sim_port = resolve_port(fabric, flap.node, flap.port)
    return _flap(lab, node_id, sim_port, flap.down_s, stop)


def _flap(lab: Lab, node_id: str, sim_port: int, down_s: float, stop: threading.Event) -> bool:
    try:
        lab.unplug(node_id, sim_port)
    except LabError as exc:
        log.warning("flapper: cannot unplug %s[%s]: %s", node_id, sim_port, exc)
        return False
    try:
        stop.wait(down_s)
    finally:
        try:
            lab.replug(node_id, sim_port)  # always put it back, even when stopping
        except LabError as exc:  # ibsim gone meanwhile: its next start cables everything anew
            log.warning("flapper: cannot replug %s[%s]: %s", node_id, sim_port, exc)
    return True


def start_flapper(fabric: Fabric, flap: Flap) -> threading.Event:
    """Flap the link in a daemon thread until the returned event is set.

    The cable lives in ibsim, so the thread needs ibsim alone: an OpenSM restarted (by the
    start-up push, a takeover, an operator) changes nothing for it. It reads the lab's state
    afresh before each flap; while ibsim is down it says so once in the log and waits for it to
    come back, and it logs when it stops and why."""
    stop = threading.Event()
    lab = lab_for(fabric)
    node_id, sim_port = resolve_port(fabric, flap.node, flap.port)
    what = f"{flap.node} port {flap.port} of {fabric.name}"

    def run() -> None:
        away = False
        try:
            while not stop.wait(flap.every_s):
                if not lab.ibsim_running():
                    if not away:
                        log.warning(
                            "flapper: the lab of %s is not running; %s flaps again when it is back", fabric.name, what
                        )
                    away = True
                    continue
                if away:
                    log.warning("flapper: the lab of %s is back; %s flaps again", fabric.name, what)
                    away = False
                _flap(lab, node_id, sim_port, flap.down_s, stop)
        except Exception:
            log.exception("flapper: stopped by an error; %s no longer flaps", what)
            raise
        log.info("flapper: stopped; %s stays up", what)

    threading.Thread(target=run, name="lab-flapper", daemon=True).start()
    return stop
