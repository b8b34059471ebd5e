"""The live collector's sweeps as the agent sends them (console/telemetry/agent_ops.py): what
comes out is what went in, sweep after sweep, with error counters and link states sent only where
they changed; a fresh start resends everything."""

from __future__ import annotations

import random

from console.telemetry.agent_ops import decode_sweep, encode_sweep
from console.telemetry.core import WATCHED_COUNTERS, PortReading


def sweep(rng: random.Random, switches: list[str], before: dict | None = None) -> dict:
    out = {}
    for sw in switches:
        for port in range(1, 65):
            old = (before or {}).get((sw, port))
            moved = old is None or rng.random() < 0.05
            errors = {n: rng.randrange(0, 3) for n in WATCHED_COUNTERS} if moved else dict(old.errors)
            state = rng.choice(["Active", "Active", "Down", "Init"]) if moved else old.state
            base = old.xmit_words if old else rng.randrange(0, 2**60)
            out[(sw, port)] = PortReading(base + rng.randrange(0, 10**9), rng.randrange(0, 2**63), errors, state)
    return out


def test_sweeps_arrive_whole_with_only_the_changes_sent_again():
    rng = random.Random(7)
    switches = [f"leaf-{i:02d}" for i in range(12)]
    sent: dict = {}
    held: dict = {}
    first = sweep(rng, switches)
    text = encode_sweep(first, switches, sent)
    assert decode_sweep(text, switches, held) == first
    second = sweep(rng, switches, first)
    text2 = encode_sweep(second, switches, sent)
    assert decode_sweep(text2, switches, held) == second
    assert len(text2) < len(text) * 0.8  # unchanged errors and states are not sent again
    # a collector that starts again (fresh) gets everything: the agent forgets what it sent
    assert decode_sweep(encode_sweep(second, switches, {}), switches, {}) == second
    # a port whose errors were never read stays without them
    partial = {("leaf-00", 1): PortReading(5, 6, {}, "")}
    assert decode_sweep(encode_sweep(partial, switches, {}), switches, {}) == partial
