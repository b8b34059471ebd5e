"""The replay with sites: jobs placed near their data by the console's site choice, spanning,
the locality report, the trace's site column, the generator's locality mix and the CLI.

The fabric of the hand-worked replays: 2 SUs of 2 nodes × 8 GPUs, ``--sites 2`` putting SU 0
(nodes 0, 1) at site-1 and SU 1 (nodes 2, 3) at site-2, 1,000 µs apart.
"""

from __future__ import annotations

import json
from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.placement import rail_optimized
from scheduling.placement.sites import SiteLinkSpec
from scheduling.replay import ReplayOptions, TraceJob, load_generic, replay, simulate
from scheduling.replay.generator import TraceSpec, generate, write_csv
from scheduling.replay.sites import load_sites_file, split_sites

FABRIC = rail_optimized(2, nodes_per_su=2)
SITES = split_sites(FABRIC, 2)
PATIENT = ReplayOptions(max_wait_s=60, sites=SITES)


def locality_trace() -> list[TraceJob]:
    """Worked by hand (patience 60 s):

    a  t=0   2 nodes 100 s, data site-1: site-1 free now              -> site-1 at 0   (wait 0)
    b  t=10  2 nodes  50 s, data site-1: site-1 at 100 (90 s > 60),
             site-2 now                                               -> site-2 at 10  (wait 0)
    c  t=20  1 node   10 s, data site-2: site-2 at 60, site-1 at 100   -> site-2 at 60  (wait 40)
    d  t=30  1 node   10 s, data site-1: site-1 at 100 (70 s), site-2
             at 60 (c reserved one node): 70 <= 30 + 60, so site-1    -> site-1 at 100 (wait 70)

    Without data sites (the baseline) d takes site-2 at 60 (wait 30): waits 0, 0, 40, 30.
    """
    return [
        TraceJob("a", 0, 100, 16, site="site-1"),
        TraceJob("b", 10, 50, 16, site="site-1"),
        TraceJob("c", 20, 10, 8, site="site-2"),
        TraceJob("d", 30, 10, 8, site="site-1"),
    ]


def test_each_job_goes_where_the_site_choice_sends_it():
    result = simulate(locality_trace(), FABRIC, "topology", PATIENT)

    got = {r.job.job_id: (r.start, r.sites, r.near, r.site_rule) for r in result.records}
    assert got == {
        "a": (0, (0,), 0, "nearest_now"),
        "b": (10, (1,), 0, "farther_now"),
        "c": (60, (1,), 1, "soonest"),
        "d": (100, (0,), 0, "nearer_later"),
    }


def test_the_locality_report_and_the_wait_locality_cost():
    result = replay(locality_trace(), FABRIC, "topology", PATIENT)

    locality = result["locality"]
    assert locality["sites"] == 2
    assert locality["jobs_with_data_site"] == 4
    assert locality["at_data_site"] == 3 / 4  # a, c, d
    assert locality["spanning"] == 0
    assert locality["wait_by_where"]["data_site"] == {"jobs": 3, "avg_wait_s": (0 + 40 + 70) / 3, "p95_wait_s": 70}
    assert locality["wait_by_where"]["other_site"] == {"jobs": 1, "avg_wait_s": 0, "p95_wait_s": 0}
    assert locality["rules"] == {"farther_now": 1, "nearer_later": 1, "nearest_now": 1, "soonest": 1}
    assert result["avg_wait_s"] == (0 + 0 + 40 + 70) / 4
    assert locality["baseline_avg_wait_s"] == (0 + 0 + 40 + 30) / 4
    assert locality["locality_wait_cost_s"] == 10.0
    assert locality["baseline_p95_wait_s"] == 40
    assert locality["locality_p95_cost_s"] == 30


def test_no_patience_runs_now_wherever_there_is_room():
    # Patience 0: b goes to site-2 now as before; d takes site-2 at 60 (sooner than site-1's 100).
    result = simulate(locality_trace(), FABRIC, "topology", ReplayOptions(sites=SITES))
    got = {r.job.job_id: (r.start, r.sites) for r in result.records}
    assert got == {"a": (0, (0,)), "b": (10, (1,)), "c": (60, (1,)), "d": (60, (1,))}


def spanning_trace() -> list[TraceJob]:
    """a (1 node, site-1) and b (1 node, site-2) each leave one node free on their site until
    100; c (2 nodes, data at site-1) arrives at t=2: no site holds it before t=100, 98 s away,
    beyond 60 s of patience, so with spanning it runs now on one node of each site."""
    return [
        TraceJob("a", 0, 100, 8, site="site-1"),
        TraceJob("b", 1, 100, 8, site="site-2"),
        TraceJob("c", 2, 50, 16, site="site-1"),
    ]


def test_a_gang_spans_sites_when_allowed_and_no_site_can_hold_it_in_time():
    spanning = simulate(spanning_trace(), FABRIC, "topology", replace(PATIENT, span_sites=True))
    c = next(r for r in spanning.records if r.job.job_id == "c")
    assert (c.start, c.sites, c.site_rule) == (2, (0, 1), "span")
    locality = spanning.summary()["locality"]
    assert locality["spanning"] == 1 / 3
    assert locality["at_data_site"] == 2 / 3
    assert locality["wait_by_where"]["spanning"] == {"jobs": 1, "avg_wait_s": 0, "p95_wait_s": 0}

    held = simulate(spanning_trace(), FABRIC, "topology", PATIENT)
    c = next(r for r in held.records if r.job.job_id == "c")
    assert (c.start, c.sites) == (100, (0,))  # waits for its data's site


def test_jobs_without_a_data_site_and_too_large_for_any_site():
    jobs = [TraceJob("free", 0, 10, 8), TraceJob("whole", 0, 10, 32)]
    result = replay(jobs, FABRIC, "topology", ReplayOptions(sites=SITES))
    assert result["jobs"]["skipped_too_large"] == 1  # 4 nodes, and no site has more than 2
    assert result["locality"]["jobs_with_data_site"] == 0
    assert result["locality"]["wait_by_where"]["no_data_site"]["jobs"] == 1
    spans = replay(jobs, FABRIC, "topology", ReplayOptions(sites=SITES, span_sites=True))
    assert spans["jobs"]["placed"] == 2 and spans["locality"]["spanning"] == 1 / 2


def test_an_unknown_data_site_is_refused():
    with pytest.raises(ValueError, match="unknown site 'mars'; the replay's sites are site-1, site-2"):
        replay([TraceJob("x", 0, 10, 8, site="mars")], FABRIC, "topology", PATIENT)


def test_without_sites_nothing_changes():
    plain = replay(locality_trace(), FABRIC, "topology", ReplayOptions(max_wait_s=60))
    assert "locality" not in plain


def test_split_sites_cuts_leaf_groups_into_even_runs():
    sites = split_sites(rail_optimized(8, nodes_per_su=2), 3, latency_us=500, bandwidth_gbps=200)
    assert sites.site_of_group == (0, 0, 0, 1, 1, 1, 2, 2)  # 8 = 3 + 3 + 2
    assert sites.map.names == ("site-1", "site-2", "site-3")
    assert sites.map.route(0, 2) == SiteLinkSpec(500, 200, "ib_router")
    with pytest.raises(ValueError, match="between 1 and the fabric's 2 leaf groups"):
        split_sites(FABRIC, 3)


def test_sites_file(tmp_path):
    path = tmp_path / "sites.json"
    path.write_text(
        json.dumps(
            {
                "sites": [{"name": "east", "sus": [1]}, {"name": "west", "sus": [0]}],
                "links": [{"a": "east", "b": "west", "latency_us": 2000, "bandwidth_gbps": 100, "kind": "ethernet"}],
            }
        )
    )
    sites = load_sites_file(path, FABRIC)
    assert sites.site_of_group == (1, 0)
    assert sites.map.latency(0, 1) == 2000 and sites.map.route(1, 0) == SiteLinkSpec(2000, 100, "ethernet")
    for bad, message in (
        ({"sites": [{"name": "east", "sus": [0, 1]}, {"name": "west", "sus": [1]}]}, "leaf group 1 is in two sites"),
        ({"sites": [{"name": "east", "sus": [0]}]}, r"leaf groups \[1\] belong to no site"),
        ({"sites": [{"name": "east", "sus": [0, 7]}]}, "site 'east': no leaf group 7"),
    ):
        path.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=message):
            load_sites_file(path, FABRIC)


def test_the_generic_trace_reads_site_or_data_site(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,arrival_s,duration_s,gpus,data_site\nx,0,10,8,site-2\ny,1,10,8,\n")
    assert [j.site for j in load_generic(path)] == ["site-2", None]
    path.write_text("job_id,arrival_s,duration_s,gpus,site\nx,0,10,8,site-1\n")
    assert load_generic(path)[0].site == "site-1"


def test_the_generator_locality_mix_leaves_the_other_columns_alone(tmp_path):
    spec = TraceSpec(jobs=200, load=0.5, capacity_gpus=256, seed=3)
    located = generate(replace(spec, locality=(("east", 3.0), ("west", 1.0), ("-", 0.0))))
    plain = generate(spec)
    assert [replace(j, site=None) for j in located] == plain
    east = sum(1 for j in located if j.site == "east")
    assert {j.site for j in located} == {"east", "west"}
    assert 120 <= east <= 180  # 3/4 of 200 = 150, binomial sd ~6
    assert all(j.site is None for j in generate(replace(spec, locality=(("-", 1.0),))))
    path = tmp_path / "loc.csv"
    write_csv(located, path)
    assert load_generic(path) == located
    write_csv(plain, path)
    assert path.read_text().splitlines()[0] == "job_id,arrival_s,duration_s,gpus,gpus_per_node"
    with pytest.raises(ValueError, match="locality"):
        TraceSpec(locality=(("east", -1.0),))


@pytest.mark.django_db  # the design's catalogue overrides are read
def test_the_cli_generates_a_located_trace_and_reports_locality(tmp_path):
    path = tmp_path / "syn.csv"
    call_command(
        "schedule",
        "trace-gen",
        "--out",
        str(path),
        "--jobs",
        "30",
        "--capacity",
        "512",
        "--locality",
        "site-1:1,site-2:1",
        stdout=StringIO(),
    )
    assert {j.site for j in load_generic(path)} == {"site-1", "site-2"}
    args = ["schedule", "replay", "--trace", str(path), "--design", "rail-optimized:gpus=512"]
    out = StringIO()
    call_command(*args, "--max-wait", "30", "--sites", "2", "--json", stdout=out)
    locality = json.loads(out.getvalue())["locality"]
    placed = json.loads(out.getvalue())["jobs"]["placed"]
    assert locality["jobs_with_data_site"] == placed > 0
    assert 0 < locality["at_data_site"] <= 1
    out = StringIO()
    call_command(*args, "--sites", "2", stdout=out)
    assert "locality.at_data_site" in out.getvalue()
    with pytest.raises(CommandError, match="between 1 and the fabric's 2 leaf groups"):
        call_command(*args, "--sites", "3")
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"sites": [{"name": "site-1", "sus": [0, 1]}]}))
    with pytest.raises(CommandError, match="unknown site 'site-2'"):
        call_command(*args, "--sites", str(one))
    with pytest.raises(CommandError, match="missing.json"):
        call_command(*args, "--sites", str(tmp_path / "missing.json"))
