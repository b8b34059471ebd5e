"""The live page's resync, in Chromium against uvicorn and Redis, the collector driven by the test
(no lab). A gap in the sequence makes the page reload the snapshot; a delta that went out before
the collector rewrote the snapshot is kept on top of it, not dropped as already held."""

from __future__ import annotations

import pytest

from console import broadcast
from tests.live.fabric_fixtures import statuses

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180), pytest.mark.django_db(transaction=True)]


def _up(page, link: str) -> bool | None:
    return page.evaluate("(id) => window.__live.links.get(id)?.up ?? null", link)


def test_a_gap_resyncs_and_a_delta_newer_than_the_snapshot_is_kept(operator_live_page, world):
    collector, fabric = world["collector"], world["fabric"]
    page, everything = operator_live_page
    link = sorted(collector.lm.ends)[0]
    assert _up(page, link) is True

    # A message is lost (numbered, never sent); the next sweep pulls `link` down. Its delta reaches
    # the page, which finds the gap and resyncs, while the snapshot still holds the sweep before.
    broadcast.next_seq(f"fabric.{fabric.pk}")
    down = statuses(collector, down={link})
    collector._publish(down, 2.0)
    page.wait_for_function("() => window.__live.stream.resyncs >= 2")
    # The collector writes the sweep's snapshot: the page ends up with the link down (from the
    # held delta or the newer snapshot), never stuck on the older snapshot's "up".
    collector._snapshot(down, 2.0, 0.1)
    page.wait_for_function("(id) => window.__live.links.get(id)?.up === false", arg=link)
    edge = page.evaluate("(id) => window.__live.edgeOfLink.get(id)", link)
    assert page.evaluate("(e) => window.__live.canvas.cy.getElementById(e).hasClass('live-down')", edge)
    # and the stream goes on from there: the link back up is one ordinary delta
    resyncs = page.evaluate("() => window.__live.stream.resyncs")
    collector._publish(everything, 3.0)
    page.wait_for_function("(id) => window.__live.links.get(id)?.up === true", arg=link)
    assert page.evaluate("() => window.__live.stream.resyncs") == resyncs
