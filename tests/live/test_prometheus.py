"""/metrics against the real Prometheus tools (Debian's ``prometheus`` package): ``promtool check
metrics`` accepts it, a real Prometheus scrapes a live console on the lab (OpenSM on ibsim, the
collector running) and answers PromQL with the lab's link rates and the reservations the test
made, and the shipped Grafana dashboard and alert rules (``deploy/``) pass promtool and evaluate
on that Prometheus, naming only metrics a real scrape exposes."""

from __future__ import annotations

import json
import re
import time
from collections import Counter

import pytest
import yaml

from console.fabric.models import ChangeRequest
from console.telemetry.core import LinkStatus
from console.telemetry.metrics import metrics_text
from console.tenancy.models import Principal, Role
from designer.services import revision_graph
from scheduling.services import inventory, lifecycle
from tests.fabric.lab_fixtures import lab_data_dir, lab_fabric, su1_revision  # noqa: F401
from tests.live.fabric_fixtures import statuses
from tests.live.helpers import SYSTEM, ready_reservation
from tests.live.prometheus_fixtures import (
    DASHBOARD,
    RULE_TESTS,
    RULES,
    TOKEN,
    http_get,
    prometheus,  # noqa: F401
    promtool,
)
from tests.needs import needs
from tests.servers import processes, serve, web  # noqa: F401

pytestmark = [needs("prometheus"), pytest.mark.timeout(300)]

GPUS_PER_NODE = 8  # DGX H100, the design's node type


def _names(body: str) -> set[str]:
    """The metric families a scrape declares (its ``# TYPE`` lines)."""
    return {line.split()[2] for line in body.splitlines() if line.startswith("# TYPE ")}


def _check_metrics(body: str) -> None:
    result = promtool("check", "metrics", stdin=body)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_promtool_refuses_what_the_conventions_forbid():
    # the check the tests rely on is not a rubber stamp: the old bits name and a counter without
    # _total (and without HELP) are refused
    bad = (
        "# HELP ibc_link_tx_bits_per_second Bits.\n# TYPE ibc_link_tx_bits_per_second gauge\n"
        'ibc_link_tx_bits_per_second{link="a"} 1\n# TYPE ibc_pushes counter\nibc_pushes 2\n'
    )
    result = promtool("check", "metrics", stdin=bad)
    assert result.returncode != 0
    out = result.stdout + result.stderr
    assert 'use base unit "bytes" instead of "bits"' in out
    assert 'counter metrics should have "_total" suffix' in out and "ibc_pushes no help text" in out


@pytest.mark.django_db
def test_metrics_with_errors_sm_state_and_push_failures_pass_promtool(world):
    collector = world["collector"]
    links = statuses(collector, down={sorted(collector.lm.ends)[0]})
    hot = sorted(collector.lm.ends)[1]
    links[hot] = LinkStatus(hot, True, 8e9, 4e9, 0.4, 2, error_totals={"SymbolErrorCounter": 7, "PortRcvErrors": 2})
    collector.sm = {"state": "MASTER", "priority": 0}
    collector._snapshot(links, 1_700_000_000.0, 0.25)
    ChangeRequest.objects.create(fabric=world["fabric"], status=ChangeRequest.Status.FAILED)
    ChangeRequest.objects.create(fabric=world["fabric"], status=ChangeRequest.Status.ROLLED_BACK)
    body = metrics_text()
    _check_metrics(body)
    name = world["fabric"].name
    assert f'ibc_link_tx_bytes_per_second{{fabric="{name}",link="{hot}"}} 1000000000' in body
    assert f'ibc_link_errors_total{{fabric="{name}",link="{hot}",counter="SymbolErrorCounter"}} 7' in body
    assert f'ibc_sm_state_info{{fabric="{name}",state="MASTER"}} 1' in body
    assert f'ibc_partition_push_failures_total{{fabric="{name}"}} 2' in body
    assert f'ibc_collector_last_sweep_timestamp_seconds{{fabric="{name}"}} 1700000000' in body
    assert body.count("ibc_link_up{") == len(collector.lm.ends)


def test_rules_pass_promtool_and_their_unit_tests_and_evaluate_on_prometheus(prometheus):  # noqa: F811
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
    # the real Prometheus loaded the same file and evaluates every rule without error
    answer = prometheus.api("rules")
    rules = [rule for group in answer["data"]["groups"] for rule in group["rules"]]
    shipped = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert len(rules) == len(shipped) >= 10
    healthy = prometheus_rules_health(prometheus)
    assert healthy == {rule["name"]: "ok" for rule in rules}


def prometheus_rules_health(prometheus, timeout: float = 30) -> dict[str, str]:  # noqa: F811
    """Every loaded rule's health once each has been evaluated (or after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while True:
        rules = [r for g in prometheus.api("rules")["data"]["groups"] for r in g["rules"]]
        health = {rule["name"]: rule["health"] for rule in rules}
        if "unknown" not in health.values() or time.monotonic() > deadline:
            return health
        time.sleep(0.5)


@needs("lab")
@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_prometheus_scrapes_the_labs_link_rates_and_the_reservations_made(
    prometheus,  # noqa: F811
    lab_fabric,  # noqa: F811
    processes,  # noqa: F811
    monkeypatch,
    tenant_a,
    tenant_b,
):
    monkeypatch.setenv("METRICS_TOKEN", TOKEN)
    fabric, _lab = lab_fabric("prom")
    inventory.import_inventory(fabric)
    res_a = ready_reservation(fabric, tenant_a, nodes=2)
    ready_reservation(fabric, tenant_a, nodes=1)
    ready_reservation(fabric, tenant_b, nodes=1)
    gone = ready_reservation(fabric, tenant_b, nodes=1)
    lifecycle.release(SYSTEM, Principal(None, Role.TENANT_ADMIN, tenant_b.pk), gone)
    # what the test made: two ready for A (3 nodes), one ready and one released (ending) for B
    made = {(tenant_a.slug, "ready"): 2, (tenant_b.slug, "ready"): 1, (tenant_b.slug, "ending"): 1}
    url = serve(processes, fabric)
    assert http_get(f"{url}/metrics")[0] == 403  # the token is what lets Prometheus in
    prometheus.point_at(url)

    where = f'fabric="{fabric.name}"'
    counts = prometheus.poll(f"ibc_reservations{{{where}}}", lambda v: len(v) == len(made))
    assert {(s["metric"]["tenant"], s["metric"]["status"]): int(s["value"][1]) for s in counts} == made
    held = prometheus.poll(f'sum by (tenant) (ibc_reservation_gpus{{{where},status="ready"}})', lambda v: len(v) == 2)
    assert {s["metric"]["tenant"]: int(s["value"][1]) for s in held} == {
        tenant_a.slug: 3 * GPUS_PER_NODE,
        tenant_b.slug: 1 * GPUS_PER_NODE,
    }

    # the lab's links: every designed link is up, and the traffic model loads the reservation's
    graph = revision_graph(fabric.revision)
    designed = [lk for lk in graph.links if lk.b in graph.switches]
    up = prometheus.poll(f"count(ibc_link_up{{{where}}} == 1)", lambda v: bool(v) and int(v[0]["value"][1]) > 0)
    assert int(up[0]["value"][1]) == len(designed)
    node = sorted(fabric.nodes.filter(pk__in=res_a.allocations.values("node")).values_list("name", flat=True))[0]
    leaf, port = fabric.nodes.get(name=node).hcas.values_list("leaf", "leaf_port").first()
    link = f'link="{leaf}/{port}"'
    busy = prometheus.poll(f"ibc_link_utilisation_ratio{{{where},{link}}} > 0.1", lambda v: len(v) == 1, timeout=90)
    assert 0.1 < float(busy[0]["value"][1]) <= 1.0
    # its bytes per second (the sweep's rates vary with the traffic model: the busiest minute)
    rates = prometheus.poll(
        f"max_over_time(ibc_link_tx_bytes_per_second{{{where},{link}}}[1m])"
        f" + max_over_time(ibc_link_rx_bytes_per_second{{{where},{link}}}[1m])",
        lambda v: len(v) == 1,
    )
    assert float(rates[0]["value"][1]) > 1e9  # over 10 % of a 400 Gb/s link is over 5 GB/s

    # the live body itself passes promtool, SM state and collector freshness included
    status, body = http_get(f"{url}/metrics", TOKEN)
    assert status == 200
    _check_metrics(body)
    sm = prometheus.poll(f"ibc_sm_state_info{{{where}}}", lambda v: len(v) == 1)
    assert sm[0]["metric"]["state"] == "MASTER"
    # the scrapes themselves: up, no error, within the timeout
    (target,) = prometheus.api("targets")["data"]["activeTargets"]
    assert (target["health"], target["lastError"]) == ("up", "")


@pytest.mark.django_db(transaction=True)
def test_dashboard_and_rules_name_only_scraped_metrics_and_every_panel_evaluates(
    prometheus,  # noqa: F811
    world,
    processes,  # noqa: F811
    lab_data_dir,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setenv("METRICS_TOKEN", TOKEN)
    world["collector"].sm = {"state": "MASTER"}
    world["collector"]._snapshot(statuses(world["collector"]), 1_700_000_000.0, 0.1)
    ChangeRequest.objects.create(fabric=world["fabric"], status=ChangeRequest.Status.FAILED)
    url = web(processes)
    status, body = http_get(f"{url}/metrics", TOKEN)
    assert status == 200
    exposed = _names(body)
    prometheus.point_at(url)
    where = f'fabric="{world["fabric"].name}"'
    failures = prometheus.poll(f"ibc_partition_push_failures_total{{{where}}}", lambda v: len(v) == 1)
    assert failures[0]["value"][1] == "1"
    counts = prometheus.poll(f"sum by (tenant) (ibc_reservations{{{where}}})", lambda v: len(v) == 2)
    assert Counter({s["metric"]["tenant"]: int(s["value"][1]) for s in counts}) == Counter(
        {world["a"].slug: 1, world["b"].slug: 1}
    )

    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"fabric"}
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 10 and len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    exprs = [variables["fabric"]["query"]["query"]] + [t["expr"] for p in panels for t in p["targets"]]
    rules = [rule["expr"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    for expr in exprs + rules:
        # metric names, not recording rules (level:metric:operation) nor label values
        used = set(re.findall(r"(?<![:\w])ibc_[a-z0-9_]+(?![:\w])", re.sub(r'"[^"]*"', '""', expr)))
        assert used, expr
        assert used <= exposed, f"{expr} names {used - exposed}, not in /metrics"
    for expr in exprs[1:]:
        concrete = expr.replace("$__rate_interval", "1m").replace('=~"$fabric"', '=~".*"')
        assert "$" not in concrete, expr
        answer = prometheus.query(concrete)
        assert answer["status"] == "success", (expr, answer)
