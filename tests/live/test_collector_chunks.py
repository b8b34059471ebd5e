"""The collector reads the fabric a few switches at a time and publishes each live group's delta
as soon as all of that group's links are read: still exactly one delta per group per sweep, and
each part's rates over the time since that part was last read. No lab: a scripted reader."""

from __future__ import annotations

import time

import pytest

from console.broadcast import fabric_group, tenant_group
from console.telemetry import publisher as publisher_module
from console.telemetry.core import PortReading

pytestmark = pytest.mark.django_db


class ScriptedReader:
    """Every port moves ``GBPS`` each way; remembers which switches each read covered."""

    partial_reads = True
    GBPS = 100.0

    def __init__(self) -> None:
        self.reads: list[set[str]] = []
        self.started = time.monotonic()

    def read(self, ports, lids, *, state=None):
        self.reads.append(set(ports))
        words = int((time.monotonic() - self.started) * self.GBPS * 1e9 / 32)
        return {(sw, p): PortReading(words, words, {}, "Active") for sw, plist in ports.items() for p in plist}

    def lft(self, lid, top):
        return None

    def close(self):
        return None


def test_each_group_is_published_once_per_sweep_as_soon_as_its_links_are_read(world, monkeypatch):
    collector = world["collector"]
    collector.options.read_chunk_switches = 2
    reader = ScriptedReader()
    collector.reader = reader
    sent: list[tuple[int, list[str]]] = []
    monkeypatch.setattr(
        publisher_module, "publish_many", lambda messages: sent.append((len(reader.reads), [g for g, _ in messages]))
    )
    lm = collector.lm
    switches = list(lm.measured_ports())
    fabric = fabric_group(world["fabric"].pk)
    tenants = {tenant_group(world[k].pk): world[k].pk for k in ("a", "b")}

    for sweep in range(3):
        sent.clear()
        reads_before = len(reader.reads)
        report = collector.sweep()
        reads = reader.reads[reads_before:]
        # the fabric is read in parts of two switches, every switch once
        assert len(reads) == -(-len(switches) // 2) and all(len(r) <= 2 for r in reads)
        assert set().union(*reads) == set(switches)
        published = [(n - reads_before, g) for n, groups in sent for g in groups]
        live = [(n, g) for n, g in published if g == fabric or g in tenants]
        assert sorted(g for _, g in live) == sorted([fabric, *tenants])  # once each
        when = {g: n for n, g in live}
        assert when[fabric] == len(reads)  # every link: after the last part
        for group, tenant_id in tenants.items():
            # after the part holding the last switch its links are on, not later
            mine = {lm.ends[lk].switch for lk in collector.workload.tenant_links[tenant_id]}
            assert mine
            last = max(i for i, r in enumerate(reads, 1) if r & mine)
            assert when[group] == last
            assert last < len(reads)  # the 1-SU rail leaves are read before the spines
        assert report.publish_s > 0
        if sweep:  # every part's rate over the time since that part was read: 100 Gb/s each
            rates = [st.tx_bps for st in collector.last_statuses.values()]
            assert min(rates) == pytest.approx(100e9, rel=0.05)
            assert max(rates) == pytest.approx(100e9, rel=0.05)
        time.sleep(0.3)
    collector.close()
