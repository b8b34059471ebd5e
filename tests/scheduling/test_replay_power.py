"""Replay under a power policy: idle nodes go off, jobs wait for boots, energy is accounted."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from designer.builtin_catalogue import default_catalogue
from scheduling.placement import rail_optimized
from scheduling.power.energy import NodeWatts
from scheduling.power.policy import PowerPolicy
from scheduling.replay import (
    POWER_KEYS,
    RESULT_KEYS,
    WAIT_DELTA_KEYS,
    PowerSettings,
    ReplayOptions,
    TraceJob,
    parse_power_policy,
    replay,
    simulate,
)
from scheduling.replay.generator import TraceSpec, generate, write_csv
from scheduling.replay.power import PowerModel

H100 = default_catalogue().nodes["DGX-H100"]  # 10,200 W busy, 1,800 W idle, 45 W off, 420 s boot
FOUR_NODES = rail_optimized(1, nodes_per_su=4)  # 4 DGX nodes, 32 GPUs, one leaf group


def settings(text: str) -> PowerSettings:
    return parse_power_policy(text, H100)


def test_parse_power_policy_reads_durations_buffers_and_the_node_type():
    parsed = settings("idle=30m,buffer=2%,margin=90s,rate=6")

    assert parsed.policy == PowerPolicy(
        idle_after=timedelta(minutes=30),
        buffer_nodes=0,
        buffer_percent=2.0,
        margin=timedelta(seconds=90),
        max_actions_per_minute=6,
    )
    assert parsed.watts == NodeWatts(busy=10_200, idle=1_800, off=45)
    assert parsed.boot_s == 420
    assert settings("idle=1h,buffer=3").policy.buffer_nodes == 3
    assert settings("idle=10").policy.idle_after == timedelta(minutes=10)  # bare number: minutes
    for bad in ("buffer=2", "idle=soon", "idle=10m,spare=1", "idle=10m,buffer=two"):
        with pytest.raises(ValueError):
            settings(bad)


def test_idle_nodes_go_off_and_a_job_that_needs_them_waits_exactly_one_boot():
    # a: 1 node, 0-3600 s. b: all 4 nodes, arrives at 7200 s for 3600 s.
    # idle=10m: the 3 unused nodes go off at 600 s, a's node at 4200 s. b's arrival powers all 4
    # on; they boot 420 s, so b starts at 7620 s (without the policy: at 7200 s).
    jobs = [TraceJob("a", 0, 3600, 8), TraceJob("b", 7200, 3600, 32)]

    powered = simulate(jobs, FOUR_NODES, "topology", ReplayOptions(power=settings("idle=10m,buffer=0")))
    result = replay(jobs, FOUR_NODES, "topology", ReplayOptions(power=settings("idle=10m,buffer=0")))

    assert {r.job.job_id: r.start for r in powered.records} == {"a": 0, "b": 7620}
    assert result["power_off_actions"] == 4 and result["power_on_actions"] == 4
    # Waits 0 and 420 s against 0 and 0: avg +210 s, p95 (nearest rank of two) +420 s.
    assert result["wait_delta_avg_s"] == pytest.approx(210)
    assert result["wait_delta_p95_s"] == pytest.approx(420)
    assert result["wait_delta_p95_fraction"] is None  # the baseline's p95 is 0
    # Over the busy period 0-11,220 s (4 nodes: 44,880 node-seconds):
    #   off:     a's node 4200-7200 (3,000 s) + 3 nodes 600-7200 (3 x 6,600 s) = 22,800 s
    #   booting: 4 x 420 s = 1,680 s (at the busy draw)
    #   on:      44,880 - 22,800 - 1,680 = 20,400 s (at least the idle draw)
    #   busy:    8 GPUs x 3,600 s + 32 GPUs x 3,600 s = 144,000 GPU-s = 18,000 full-node seconds
    # kWh = (1,800 x 20,400 + 8,400 x 18,000 + 45 x 22,800 + 10,200 x 1,680) / 3.6e6
    #     = (36,720,000 + 151,200,000 + 1,026,000 + 17,136,000) / 3.6e6 = 57.245
    # always on = (1,800 x 44,880 + 8,400 x 18,000) / 3.6e6 = 231,984,000 / 3.6e6 = 64.44
    assert result["energy_kwh"] == pytest.approx(57.245)
    assert result["energy_kwh_always_on"] == pytest.approx(64.44)
    assert result["energy_saved_fraction"] == pytest.approx(1 - 57.245 / 64.44)
    assert result["node_hours_off"] == pytest.approx(22_800 / 3600)


def test_a_node_reserved_for_the_queue_head_is_never_powered_off():
    # a: 3 nodes for 5,000 s; b: all 4 nodes, arrives at 1 s: the head, reserved from 5,000 s on
    # all 4. The 4th node is idle from 0 and idle=10m would switch it off at 600 s, but the head's
    # reservation holds it: b starts at 5,000 s as without the policy.
    jobs = [TraceJob("a", 0, 5000, 24), TraceJob("b", 1, 1000, 32)]

    powered = simulate(jobs, FOUR_NODES, "topology", ReplayOptions(power=settings("idle=10m,buffer=0")))
    summary = powered.summary()

    assert {r.job.job_id: r.start for r in powered.records} == {"a": 0, "b": 5000}
    assert summary["power_off_actions"] == 0
    assert summary["energy_kwh"] == pytest.approx(summary["energy_kwh_always_on"])
    assert summary["energy_saved_fraction"] == pytest.approx(0.0)


def test_a_warm_buffer_spares_the_boot_wait():
    jobs = [TraceJob("a", 0, 3600, 8), TraceJob("b", 7200, 600, 8)]

    no_buffer = replay(jobs, FOUR_NODES, "topology", ReplayOptions(power=settings("idle=10m,buffer=0")))
    buffer_one = replay(jobs, FOUR_NODES, "topology", ReplayOptions(power=settings("idle=10m,buffer=1")))

    assert no_buffer["wait_delta_p95_s"] == pytest.approx(420)
    assert buffer_one["wait_delta_p95_s"] == 0 and buffer_one["wait_delta_avg_s"] == 0
    # The warm node costs energy: less is saved.
    assert 0 < buffer_one["energy_saved_fraction"] < no_buffer["energy_saved_fraction"]


def test_dry_run_switches_nothing():
    jobs = [TraceJob("a", 0, 3600, 8), TraceJob("b", 7200, 3600, 32)]
    dry = settings("idle=10m")
    dry = PowerSettings(
        PowerPolicy(idle_after=dry.policy.idle_after, dry_run=True), dry.watts, dry.boot_s, dry.node_type
    )

    result = replay(jobs, FOUR_NODES, "topology", ReplayOptions(power=dry))

    assert result["power_off_actions"] == 0 and result["wait_delta_avg_s"] == 0
    assert result["energy_kwh"] == pytest.approx(result["energy_kwh_always_on"])


def test_the_policy_keeps_the_replay_keys_and_every_job_placed_on_a_generated_trace():
    topology = rail_optimized(2)  # 64 nodes, 512 GPUs
    spec = TraceSpec(jobs=200, load=0.4, seed=3, capacity_gpus=topology.total_gpus, max_duration_s=6 * 3600)
    jobs = generate(spec)

    plain = replay(jobs, topology, "topology")
    powered = replay(jobs, topology, "topology", ReplayOptions(power=settings("idle=30m,buffer=2")))

    assert list(plain) == list(RESULT_KEYS)
    assert list(powered) == [*RESULT_KEYS, *POWER_KEYS, *WAIT_DELTA_KEYS]
    assert powered["jobs"] == plain["jobs"]
    # On this trace the boots only add wait; the saving is real but partial.
    assert powered["wait_delta_avg_s"] >= 0
    assert 0 < powered["energy_saved_fraction"] < 1
    assert powered["energy_kwh_always_on"] > powered["energy_kwh"] > 0


@pytest.mark.django_db  # operators' catalogue overrides are read
def test_replay_cli_power_policy_adds_energy_and_wait_change(tmp_path):
    trace = tmp_path / "two.csv"
    write_csv([TraceJob("a", 0, 3600, 8), TraceJob("b", 7200, 3600, 32)], trace)
    out = StringIO()

    replay_args = f"replay --trace {trace} --design fat-tree:nodes=4,node_type=DGX-H100 --json".split()

    call_command("schedule", *replay_args, "--power-policy", "idle=10m,buffer=0", stdout=out)

    result = json.loads(out.getvalue())
    assert list(result) == [*RESULT_KEYS, *POWER_KEYS, *WAIT_DELTA_KEYS]
    assert result["wait_delta_p95_s"] == pytest.approx(420)
    assert result["energy_kwh"] == pytest.approx(57.245)
    with pytest.raises(CommandError, match="idle=T"):
        call_command("schedule", *replay_args, "--power-policy", "buffer=1")
    with pytest.raises(CommandError, match="unknown node type"):
        call_command("schedule", *replay_args, "--power-policy", "idle=10m", "--node-type", "Toaster")


def test_skipping_the_planner_when_it_cannot_act_changes_nothing(monkeypatch):
    # The model's cheap pre-check skips the planner on quiet events; asking it every time must
    # give the very same replay.
    topology = rail_optimized(2)
    jobs = generate(TraceSpec(jobs=150, load=0.4, seed=7, capacity_gpus=topology.total_gpus, max_duration_s=4 * 3600))
    options = ReplayOptions(power=settings("idle=20m,buffer=5%"))

    skipping = simulate(jobs, topology, "topology", options).summary()
    monkeypatch.setattr(PowerModel, "_may_act", lambda self, now: True)
    always = simulate(jobs, topology, "topology", options).summary()

    assert skipping["power_off_actions"] > 0
    keys = ("avg_wait_s", "p95_wait_s", "energy_kwh", "power_on_actions", "power_off_actions")
    assert {k: skipping[k] for k in keys} == {k: always[k] for k in keys}
