"""Kubernetes exports against the published CRDs (tests/designer/schemas, SOURCES.md there) and
the published examples: node labels Kueue's Topology names, the Topology itself, Volcano HyperNodes.

Expectations about the tree come from the design graph (which hosts are cabled to which leaf),
never from the exporter.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import jsonschema
import pytest
import yaml

from designer.builtin_catalogue import default_catalogue
from designer.exports import export
from designer.graph import FabricGraph
from designer.imports import import_fabric
from designer.plan import plan
from tests.designer import k8s_schemas
from tests.designer.sample_designs import DISCOVERED, REALDATA, THREE_LEVEL, TWO_LEVEL

EXAMPLES = REALDATA / "slurm_k8s_topology"
DESIGNS = {
    "two-level": TWO_LEVEL,
    "three-level": THREE_LEVEL,
    "rail-optimized": {"topology": "rail-optimized", "gpus": 512},
    "discovered": DISCOVERED,
}


def design(options: dict | Path) -> FabricGraph:
    if isinstance(options, Path):
        if not options.exists():
            pytest.skip(f"{options} is not on this machine")
        return import_fabric(options.read_text(), default_catalogue()).graph
    result = plan(options)
    assert result.ok and result.graph is not None, result.errors
    return result.graph


def compute_hosts(graph: FabricGraph) -> set[str]:
    return {name for name, node in graph.nodes.items() if node.role == "compute"}


def cabled_groups(graph: FabricGraph) -> list[frozenset[str]]:
    """Hosts grouped the way the design groups them: by scalable unit when it has them, else by
    the switch their first HCA is cabled to."""
    groups: dict[object, set[str]] = defaultdict(set)
    first: dict[str, tuple[int, str]] = {}
    for lk in graph.links:
        for dev, port, other in ((lk.a, lk.a_port, lk.b), (lk.b, lk.b_port, lk.a)):
            if dev in graph.nodes and other in graph.switches and (dev not in first or port < first[dev][0]):
                first[dev] = (port, other)
    for host in compute_hosts(graph):
        node = graph.nodes[host]
        groups[("su", node.su) if node.su >= 0 else ("leaf", first[host][1])].add(host.lower())
    return sorted((frozenset(g) for g in groups.values()), key=sorted)


@pytest.mark.parametrize("which", DESIGNS)
def test_node_labels_carry_every_level_the_kueue_topology_names(which):
    graph = design(DESIGNS[which])
    labels = json.loads(export(graph, "k8s-labels")[0])["nodes"]
    topology = yaml.safe_load(export(graph, "kueue-topology")[0])
    levels = [level["nodeLabel"] for level in topology["spec"]["levels"]]

    # every compute host is labelled, with keys and values Kubernetes accepts
    assert set(labels) == {h.lower() for h in compute_hosts(graph)}
    key, value, name = (
        jsonschema.Draft202012Validator(k8s_schemas.names_schema(d))
        for d in ("labelKey", "labelValue", "dns1123Subdomain")
    )
    for host, node_labels in labels.items():
        name.validate(host)
        for k, v in node_labels.items():
            key.validate(k)
            value.validate(v)
        # and with every level the Topology names but the hostname, which the kubelet sets
        assert {lvl for lvl in levels if lvl != "kubernetes.io/hostname"} <= set(node_labels), host
    # the block label groups hosts exactly as the design cables them
    by_block: dict[str, set[str]] = defaultdict(set)
    for host, node_labels in labels.items():
        by_block[node_labels[levels[-2]]].add(host)
    assert sorted(map(frozenset, by_block.values()), key=sorted) == cabled_groups(graph)
    # and the levels nest: a block lies in one spine domain (Kueue's tree)
    spine_of = defaultdict(set)
    for node_labels in labels.values():
        spine_of[node_labels[levels[-2]]].add(node_labels[levels[0]])
    assert all(len(s) == 1 for s in spine_of.values())


def test_kueue_topology_passes_the_published_crd_and_matches_the_samples():
    graph = design(DESIGNS["three-level"])
    ours = yaml.safe_load(export(graph, "kueue-topology")[0])
    assert k8s_schemas.errors(ours) == []
    # the CRD's CEL rules: unique levels, the hostname label only as the lowest level
    levels = [level["nodeLabel"] for level in ours["spec"]["levels"]]
    assert len(set(levels)) == len(levels) and levels[-1] == "kubernetes.io/hostname"
    # the same shape as Kueue's own TAS samples (apiVersion, kind, levels of nodeLabel, hostname last)
    for sample in ("kueue_tas_sample-queues.yaml", "kueue_tas_sample-gpu-queues.yaml"):
        theirs = next(d for d in yaml.safe_load_all((EXAMPLES / sample).read_text()) if d["kind"] == "Topology")
        assert k8s_schemas.errors(theirs) == []  # the validator accepts the published sample
        assert (ours["apiVersion"], ours["kind"]) == (theirs["apiVersion"], theirs["kind"])
        assert [set(level) for level in ours["spec"]["levels"]] == [{"nodeLabel"}] * len(levels)
        assert theirs["spec"]["levels"][-1] == ours["spec"]["levels"][-1]


def test_the_validator_refuses_what_the_crds_refuse():
    good = yaml.safe_load(export(design(DESIGNS["two-level"]), "kueue-topology")[0])
    typo = {**good, "spec": {"levles": good["spec"]["levels"]}}
    assert k8s_schemas.errors(typo)  # misspelt field: required levels missing, unknown field
    bad_label = {**good, "spec": {"levels": [{"nodeLabel": "network topology/block"}]}}
    assert k8s_schemas.errors(bad_label)
    assert k8s_schemas.errors({**good, "apiVersion": "kueue.x-k8s.io/v9"})
    node = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "Leaf 1"}}
    assert k8s_schemas.errors({**node, "spec": {"tier": 1, "members": [{"type": "Switch"}]}})


def hypernode_docs(graph: FabricGraph) -> list[dict]:
    docs = list(yaml.safe_load_all(export(graph, "volcano-hypernodes")[0]))
    assert docs and all(d["kind"] == "HyperNode" for d in docs)
    return docs


@pytest.mark.parametrize("which", DESIGNS)
def test_volcano_hypernodes_pass_the_published_crd_and_form_the_fabrics_tree(which):
    graph = design(DESIGNS[which])
    docs = hypernode_docs(graph)
    for doc in docs:
        assert k8s_schemas.errors(doc) == [], doc["metadata"]["name"]
        for member in doc["spec"]["members"]:  # the CRD's CEL rule: exactly one selector
            assert len(member["selector"]) == 1
    by_name = {d["metadata"]["name"]: d for d in docs}
    assert len(by_name) == len(docs)  # names are unique

    # tier 1: the design's groups of hosts, each host in exactly one
    tier1 = [d for d in docs if d["spec"]["tier"] == 1]
    assert all(m["type"] == "Node" for d in tier1 for m in d["spec"]["members"])
    members = [frozenset(m["selector"]["exactMatch"]["name"] for m in d["spec"]["members"]) for d in tier1]
    assert sorted(members, key=sorted) == cabled_groups(graph)
    # higher tiers hold HyperNodes of the tier just below; one root spans them all
    parents: Counter[str] = Counter()
    for doc in docs:
        if doc["spec"]["tier"] > 1:
            for m in doc["spec"]["members"]:
                child = by_name[m["selector"]["exactMatch"]["name"]]
                assert m["type"] == "HyperNode" and child["spec"]["tier"] == doc["spec"]["tier"] - 1
                parents[child["metadata"]["name"]] += 1
    roots = [name for name in by_name if parents[name] == 0]
    assert len(roots) == 1 and all(parents[name] == 1 for name in by_name if name not in roots)
    top = max(d["spec"]["tier"] for d in docs)
    assert by_name[roots[0]]["spec"]["tier"] == top == (3 if which == "three-level" else 2)
    assert len({d["spec"]["tierName"] for d in docs if d["spec"]["tier"] == 1}) == 1


def benchmark_hypernodes() -> list[dict]:
    """The HyperNodes Volcano's own benchmark script applies, its shell variables filled in."""
    script = (EXAMPLES / "volcano_benchmark_create-hypernodes.sh").read_text()
    docs = []
    for body in re.findall(r"cat <<EOF \| kubectl apply -f -\n(.*?)\nEOF", script, re.S):
        member = "\n    - type: HyperNode\n      selector:\n        exactMatch:\n          name: rack-0"
        text = body.replace("${members}", member)
        docs.append(yaml.safe_load(re.sub(r"\$\{[^}]+\}", "0", text)))
    return docs


def test_hypernodes_have_the_shape_of_volcanos_own():
    theirs = benchmark_hypernodes()
    assert {d["spec"]["tier"] for d in theirs} == {1, 2}
    for doc in theirs:
        assert k8s_schemas.errors(doc) == []  # the validator accepts Volcano's own objects
    ours = hypernode_docs(design(DESIGNS["two-level"]))
    for tier in (1, 2):
        mine = next(d for d in ours if d["spec"]["tier"] == tier)
        example = next(d for d in theirs if d["spec"]["tier"] == tier)
        assert (mine["apiVersion"], mine["kind"]) == (example["apiVersion"], example["kind"])
        assert set(mine["spec"]) == set(example["spec"])
        assert {m["type"] for m in mine["spec"]["members"]} == {m["type"] for m in example["spec"]["members"]}
