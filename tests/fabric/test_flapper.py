"""The demo's flapping link: down for a while, then back, seen by discovery like a real fault.

Every assertion reads the fabric itself: PortInfo of both ends of the cable (``smpquery
portinfo`` through umad2sim, what an operator would run) and discovery's design-vs-actual compare.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from console.fabric.diags.parsers import PortInfo
from console.fabric.diags.runner import DiagError
from console.fabric.discovery import services
from console.fabric.flapper import Flap, flap_once, start_flapper
from console.fabric.lab import faults as labs
from console.fabric.lab.manager import Lab
from console.fabric.models import Fabric
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [
    requires_lab,
    pytest.mark.lab,
    pytest.mark.django_db(transaction=True),  # the flapper thread reads the fabric too
    pytest.mark.timeout(180),
]

FLAP = Flap("su01-leaf-r1", 33, every_s=0.2, down_s=8.0)


FLAPPED = [("su01-leaf-r1", 33)]


def _missing(fabric) -> list[tuple[str, int]]:
    result = services.compare(fabric, services.discover(fabric, actor=lab_fixtures.ACTOR))
    return [(m["a"], m["a_port"]) for m in result["missing"]]


def _missing_until(fabric, wanted: list, seconds: float) -> list:
    """Discover until the missing links are ``wanted`` or time runs out. A sweep taken while
    OpenSM re-routes after the link change can be partial (hundreds of links "missing"), so
    one reading is not enough either way."""
    deadline = time.monotonic() + seconds
    seen = _missing(fabric)
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = _missing(fabric)
    return seen


class CableEnds:
    """Both ends of the flapped cable (the leaf port and the spine port it is cabled to), read
    with ``smpquery portinfo``; the LIDs come from a discovery taken while the cable is in."""

    def __init__(self, fabric: Fabric, lab: Lab, flap: Flap) -> None:
        self.diags = lab.diags(timeout=10)
        topology = self.diags.ibnetdiscover()
        leaf_id, leaf_port = labs.resolve_port(fabric, flap.node, flap.port)
        link = topology.link_at(leaf_id, leaf_port)
        assert link is not None, f"{flap.node}[{flap.port}] is not cabled in the lab"
        peer_id, peer_port = (link.b_id, link.b_port) if link.a_id == leaf_id else (link.a_id, link.a_port)
        leaf, peer = topology.nodes[leaf_id], topology.nodes[peer_id]
        assert leaf.lid and peer.lid, (leaf, peer)
        self.ends = [(leaf.lid, leaf_port), (peer.lid, peer_port)]
        self.names = [f"{flap.node}[{flap.port}]", f"{peer.name}[{peer_port}]"]

    def read(self) -> list[PortInfo | None]:
        """PortInfo of each end; None where the query got no answer (while OpenSM re-routes
        around the cable, the LID route to the far end can be briefly broken)."""
        infos: list[PortInfo | None] = []
        for lid, port in self.ends:
            try:
                infos.append(self.diags.portinfo(lid, port))
            except DiagError:
                infos.append(None)
        return infos

    def wait(self, wanted: Callable[[PortInfo], bool], seconds: float) -> tuple[bool, dict[str, str]]:
        """Poll both ends until ``wanted`` holds for each or time runs out: whether it did, and
        the last ``logical/physical`` state of each end (``?`` where unanswered)."""
        deadline = time.monotonic() + seconds
        while True:
            infos = self.read()
            ok = all(info is not None and wanted(info) for info in infos)
            if ok or time.monotonic() > deadline:
                states = {
                    name: f"{info.link_state}/{info.phys_state}" if info else "?"
                    for name, info in zip(self.names, infos, strict=True)
                }
                return ok, states
            time.sleep(0.1)


def _down(info: PortInfo) -> bool:
    return info.is_down


def _linked(info: PortInfo) -> bool:
    return info.phys_state == "LinkUp"


def _active(info: PortInfo) -> bool:
    return info.is_active


def test_a_flap_is_a_missing_link_while_down_and_gone_after(lab_fabric):
    fabric, lab = lab_fabric("flap")
    cable = CableEnds(fabric, lab, FLAP)
    ok, states = cable.wait(_active, 0)
    assert ok, states
    stop = threading.Event()
    unplugged: list[bool] = []
    # when the link flaps (down for 8 s) in the background
    worker = threading.Thread(target=lambda: unplugged.append(flap_once(fabric, FLAP, stop)))
    worker.start()
    # then both ends of the cable report the link Down, and discovery sees exactly that link missing
    ok, states = cable.wait(_down, 4.0)
    assert ok, states
    seen = _missing_until(fabric, FLAPPED, 3.0)
    worker.join(10)
    assert not worker.is_alive() and unplugged == [True]
    assert seen == FLAPPED
    # and after the flap both ends are Active again and discovery misses nothing
    ok, states = cable.wait(_active, 20.0)
    assert ok, states
    assert _missing_until(fabric, [], 15.0) == []


def test_stopping_the_flapper_leaves_the_link_up(lab_fabric):
    fabric, lab = lab_fabric("flapstop")
    cable = CableEnds(fabric, lab, FLAP)
    stop = start_flapper(fabric, FLAP)
    try:
        # given the flapper has pulled the cable (it flaps every 0.2 s, down for 8 s)
        ok, states = cable.wait(_down, 5.0)
        assert ok, states
    finally:
        # when it is stopped mid-flap
        stop.set()
    # then the cable is back in at once (physically up well before the flap's 8 s are over) and
    # OpenSM brings both ends to Active
    ok, states = cable.wait(_linked, FLAP.down_s / 2)
    assert ok, states
    ok, states = cable.wait(_active, 20.0)
    assert ok, states
    # and it stays in: sampled over ten flap periods, no end that answers is ever not Active
    deadline = time.monotonic() + 10 * FLAP.every_s
    while time.monotonic() < deadline:
        infos = cable.read()
        assert all(info is None or info.is_active for info in infos), infos
    assert _missing_until(fabric, [], 15.0) == []


def test_the_flapper_outlives_an_opensm_restart_and_says_when_its_lab_is_gone(lab_fabric, caplog):
    fabric, lab = lab_fabric("flaprestart")
    flap = Flap("su01-leaf-r1", 33, every_s=3.0, down_s=1.0)
    cable = CableEnds(fabric, lab, flap)
    caplog.set_level("INFO", logger="console.fabric.flapper")
    stop = start_flapper(fabric, flap)
    try:
        ok, states = cable.wait(_down, 10.0)
        assert ok, states
        # OpenSM restarted from another handle (as the agent's start-up push does, in its process)
        Lab.attach(lab.workdir).restart_sm()
        # then the cable still flaps: back in, then pulled again
        ok, states = cable.wait(_linked, 10.0)
        assert ok, states
        ok, states = cable.wait(_down, 10.0)
        assert ok, states
        # and when the lab goes away the flapper says so in the log (once) and keeps waiting
        lab.stop()
        deadline = time.monotonic() + 15
        while not [r for r in caplog.records if "is not running" in r.getMessage()]:
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.1)
    finally:
        stop.set()
    deadline = time.monotonic() + 15
    while not [r for r in caplog.records if "stopped" in r.getMessage()]:
        assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
        time.sleep(0.1)
    warned = [r for r in caplog.records if "is not running" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"
