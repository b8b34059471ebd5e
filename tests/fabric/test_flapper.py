"""The demo's flapping link: down for a while, then back, seen by discovery like a real fault."""

from __future__ import annotations

import threading
import time

import pytest

from console.fabric.discovery import services
from console.fabric.flapper import Flap, flap_once, start_flapper
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


def test_a_flap_is_a_missing_link_while_down_and_gone_after(lab_fabric):
    fabric, _ = lab_fabric("flap")
    stop = threading.Event()
    # when the link flaps (down for 8 s) in the background
    worker = threading.Thread(target=flap_once, args=(fabric, FLAP, stop))
    worker.start()
    seen = _missing_until(fabric, FLAPPED, 7.0)
    worker.join(10)
    # then discovery saw exactly that link missing while it was down, and it is back after
    assert seen == FLAPPED
    assert _missing_until(fabric, [], 15.0) == []


def test_stopping_the_flapper_leaves_the_link_up(lab_fabric):
    fabric, _ = lab_fabric("flapstop")
    stop = start_flapper(fabric, FLAP)
    time.sleep(0.5)  # mid-flap: the link is down
    stop.set()
    assert _missing_until(fabric, [], 15.0) == []
