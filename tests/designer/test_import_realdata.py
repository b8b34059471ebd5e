"""Imports of real ibnetdiscover dumps (tests/data/realdata) and of fabrics rewritten into forms we
do not generate: director chassis, SHARP Aggregation Nodes, pasted prompts and stderr, -g grouping.

Every count is checked against an independent reading written here (headers and port lines
counted with a few regular expressions), never against the parser under test.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from designer.builtin_catalogue import default_catalogue
from designer.errors import ParseError
from designer.exports import export
from designer.imports import import_fabric, parse_ibnetdiscover, summarise
from designer.imports.namemap import NodeNameMapError
from designer.plan import plan
from designer.validation import validate
from tests.datafiles import IBNETDISCOVER
from tests.ibnetdiscover_rewrites import with_aggregation_nodes

REAL = IBNETDISCOVER
DUMPS = [
    "topograph_dgx_h100_ndr_582ca_40sw.ibnetdiscover",
    "psmn_x5_voltaire_qdr_89ca_11sw.ibnetdiscover",
    "jabl_1_manpage_voltaire_isr9024.ibnetdiscover",
    "jabl_2_ibm_mt43132.ibnetdiscover",
    "jabl_4_oracle_sun_dcs36.ibnetdiscover",
    "fabricmon_ibsim.net",
    "ibsim_net",
    "ibsim_net.1",
    "ibsim_net.2sw2path",
    "ibsim_net.2sw2path4hca",
    "ibsim_net.2sw2path4hca2port",
]
PORTS_REPORTS = ["osc_ibnetdiscover-p_test.out", "osc_ibnetdiscover-p_test2.out", "osc_ibnetdiscover-p_test3.out"]
AN = "Aggregation Node"


# -- the independent reading ------------------------------------------------------------------


def reading(text: str) -> dict:
    """Switches, CAs, Aggregation Nodes, hosts, HCA ports and links, counted from the raw lines."""
    switches, cas, ans, descs = set(), set(), set(), {}
    ports: set[frozenset] = set()
    cur = ""
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.strip()
        m = re.match(r'^(Switch|Ca|Hca)\s+\d+\s+"([^"]+)"\s*(?:#\s*"([^"]*)")?', line)
        if m:
            cur = m.group(2)
            (switches if m.group(1) == "Switch" else cas).add(cur)
            descs[cur] = m.group(3) or cur
            if AN in (m.group(3) or ""):
                ans.add(cur)
            continue
        m = re.match(r'^\[(\d+)\][^"]*"([^"]+)"\[(\d+)\]', line)
        if m:
            ports.add(frozenset({(cur, int(m.group(1))), (m.group(2), int(m.group(3)))}))
    known = switches | cas
    links = {p for p in ports if all(end[0] in known and end[0] not in ans for end in p)}
    hca_ports = {end for p in links for end in p if end[0] in cas}
    hosts = set()
    for ca in {end[0] for end in hca_ports}:
        words = descs[ca].split()
        hosts.add(words[0] if len(words) == 2 else ca)
    return {
        "switches": len(switches),
        "ans": len(ans),
        "hcas": len(hca_ports),
        "hosts": len(hosts),
        "links": len(links),
        "host_switches": {end[0] for p in links for end in p if end[0] in switches}
        & {e[0] for p in links if any(x[0] in cas for x in p) for e in p},
    }


def counts_of(result) -> dict:
    graph = result.graph
    return {
        "switches": len(graph.switches),
        "ans": len(result.discovery.aggregation_nodes),
        "hcas": graph.endpoints(),
        "hosts": len(graph.nodes),
        "links": len(graph.links),
    }


@pytest.fixture(scope="module")
def catalogue():
    return default_catalogue()


@pytest.mark.parametrize("name", DUMPS)
def test_real_dump_imports_with_true_counts(name, catalogue):
    text = (REAL / name).read_text()
    truth = reading(text)
    result = import_fabric(text, catalogue)
    got = counts_of(result)
    assert got == {k: truth[k] for k in got}
    leaves = {result.names[s] for s in truth["host_switches"]}
    assert {n for n, s in result.graph.switches.items() if s.tier == "leaf"} >= leaves


def test_rdma_core_format_reference_example(catalogue):
    """The example inside rdma-core's topology-file format page (a "Non-Chassis Nodes" section)."""
    rst = (REAL / "rdmacore_sec_topology-file.rst").read_text()
    block = rst.split("::\n", 1)[1].split("\n\n\nWhen grouping", 1)[0]
    text = "\n".join(line[3:] for line in block.splitlines())
    assert "Non-Chassis Nodes" in text
    truth = reading(text)
    got = counts_of(import_fabric(text, catalogue))
    assert got == {k: truth[k] for k in got} and truth["switches"] == 2


def test_topograph_dgx_h100_tiers_and_aggregation_nodes(catalogue):
    text = (REAL / DUMPS[0]).read_text()
    result = import_fabric(text, catalogue)
    graph = result.graph
    # The site's names say what each switch is: A09-P1-IBLEAF-04-04, A10-P1-IBSPINE-02.
    for name, sw in graph.switches.items():
        assert sw.tier == ("leaf" if "IBLEAF" in name else "spine"), name
    assert len(re.findall(r'^Ca\s+\d+\s+"[^"]+"\s+#\s+"Mellanox Technologies Aggregation Node"', text, re.M)) == 40
    assert len(result.discovery.aggregation_nodes) == 40
    assert not any(AN in n for n in graph.nodes)
    assert len(graph.meta["sharp"]) == 40
    assert {s.model for s in graph.switches.values()} == {"QM9700"}  # QM9701: 64 ports + the AN's
    report = result.report()
    an_ports = len(re.findall(r"Aggregation Node.*4xNDR$", text, re.M)) + len(
        re.findall(r'^\[1\]\([0-9a-f]+\)\s+"S-[0-9a-f]+"\[65\]', text, re.M)
    )
    assert report["levels"] == 2 and report["rates"] == {
        "4xNDR": (len(re.findall(r"4xNDR$", text, re.M)) - an_ports) // 2
    }
    assert report["rails"] >= 2  # each leaf serves one HCA index of the DGX nodes
    errors = {i.code for i in validate(graph).errors}
    assert "duplicate-guid" not in errors and "guid-collision" not in errors


def test_voltaire_site_with_node_name_map_and_spine_list(catalogue):
    text = (REAL / DUMPS[1]).read_text()
    names = (REAL / "psmn_x5.node-name-map").read_text()
    result = import_fabric(text, catalogue, node_name_map=names)
    mapped = dict(re.findall(r"^H-([0-9a-f]{16})\s+(\S+)", names, re.M))
    assert set(mapped.values()) <= set(result.graph.nodes)
    spines = {int(g[2:], 16) for g in (REAL / "psmn_x5.spine").read_text().split() if g.startswith("S-")}
    tiers = {sw.guid: sw.tier for sw in result.graph.switches.values()}
    # The site's spine list: none of them is a leaf; every other switch serves hosts.
    assert all(tiers[g] != "leaf" for g in spines)
    assert all(t == "leaf" for g, t in tiers.items() if g not in spines)
    assert result.report()["mixed_speeds"] is True  # 4xQDR and 4xDDR


@pytest.mark.parametrize("name", PORTS_REPORTS)
def test_ports_reports_are_read(name, catalogue):
    text = (REAL / name).read_text()
    rows = [line.split() for line in text.splitlines() if line.strip()]
    # CA|SW lid port guid width speed - CA|SW lid port guid ( 'desc' - 'desc' )
    linked = [r for r in rows if len(r) > 10 and r[6] == "-"]
    sw_guids = {r[3] for r in rows if r[0] == "SW"} | {r[10] for r in linked if r[7] == "SW"}
    pairs = {frozenset({(r[3], r[2]), (r[10], r[9])}) for r in linked if AN not in " ".join(r)}
    result = import_fabric(text, catalogue)
    assert result.discovery.source == "ports-report"
    assert len(result.graph.switches) == len(sw_guids)
    assert len(result.graph.links) == len(pairs)


def test_down_trained_links_are_flagged(one_su, catalogue):
    # The man page's example: two links report 1xSDR on one of their ends.
    text = (REAL / DUMPS[2]).read_text()
    narrow = {
        tuple(sorted(p)) for p in re.findall(r'^\[(\d+)\].*"(S-[0-9a-f]+|H-[0-9a-f]+)"\[(\d+)\].* 1xSDR$', text, re.M)
    }
    result = import_fabric(text, catalogue)
    assert len(result.inference.degraded) == len(narrow) == 2
    # An NDR fabric with one link trained down to 4xSDR on both ends.
    ndr = export(one_su, "ibnetdiscover")[0]
    line = next(x for x in ndr.splitlines() if x.startswith("[33]\t"))
    peer, port = re.search(r'"(S-[0-9a-f]+)"\[(\d+)\]', line).groups()
    own = re.search(r'^Switch\t\d+ "(S-[0-9a-f]+)"', ndr.split(line)[0].rsplit("\n\n", 1)[-1], re.M).group(1)
    back = next(x for x in ndr.split(f'"{peer}"', 1)[1].splitlines() if x.startswith(f'[{port}]\t"{own}"[33]'))
    slow = ndr.replace(line, line.replace("4xNDR", "4xSDR")).replace(back, back.replace("4xNDR", "4xSDR"))
    # and one HCA port (its only port) trained down to 4xSDR on its own line
    hca_line = next(x for x in slow.splitlines() if x.startswith("[1](") and x.endswith("4xNDR"))
    slow = slow.replace(hca_line, hca_line.replace("4xNDR", "4xSDR"))
    result = import_fabric(slow, catalogue)
    assert [f.code for f in result.findings].count("degraded-link") == 2
    assert result.report()["rates"] == {"4xNDR": 510, "4xSDR": 2} and result.report()["mixed_speeds"]


# -- forms we do not generate ------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_level(catalogue):
    result = plan({"topology": "fat-tree", "nodes": 24, "levels": "3", "switch": "QM8700", "node_type": "generic"})
    assert result.ok, result.errors
    return result.graph


def director_form(text: str, graph) -> tuple[str, int]:
    """Rewrite spines as line ASICs and cores as spine ASICs of one CS8500 chassis."""
    chassis = 0x0002C9AAAA000000
    line = iter(range(1, 999))
    spine = iter(range(1, 999))
    renames = {}
    for sw in graph.switches.values():
        if sw.tier in ("spine", "core"):
            slot = f"L{next(line):02d}" if sw.tier == "spine" else f"S{next(spine):02d}"
            renames[f"MF0;{sw.name}:MQM8700/U1"] = f"MF0;dir1:MCS8500/{slot}/U1"
            text = text.replace(
                f"sysimgguid=0x{sw.guid:016x}\nswitchguid=0x{sw.guid:016x}({sw.guid:x})",
                f"sysimgguid=0x{chassis:x}\nswitchguid=0x{chassis:x}({sw.guid:x})",
            )
    for old, new in renames.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    return text, len(renames)


def test_director_chassis_is_one_chassis_with_true_tiers(three_level, catalogue):
    text, asics = director_form(export(three_level, "ibnetdiscover")[0], three_level)
    assert text.count("switchguid=0x2c9aaaa000000(") == asics
    truth = reading(text)
    result = import_fabric(text, catalogue)
    assert counts_of(result) == {k: truth[k] for k in counts_of(result)}
    [chassis] = result.graph.meta["chassis"]
    assert (chassis["name"], chassis["model"], chassis["asics"]) == ("dir1", "CS8500", asics)
    want = Counter(s.tier for s in three_level.switches.values())
    assert Counter(s.tier for s in result.graph.switches.values()) == want
    assert len(chassis["line"]) == want["spine"] and len(chassis["spine"]) == want["core"]
    assert all(result.graph.switches[n].tier == "spine" for n in chassis["line"])
    assert all(n.startswith("dir1/L") for n in chassis["line"])
    # Node GUIDs from the header and the parentheses: no ASIC "already uses" another's GUID.
    guids = [s.guid for s in result.graph.switches.values()]
    assert len(set(guids)) == len(guids) == truth["switches"]
    assert not [i for i in validate(result.graph).errors if "GUID" in i.message]


def grouped_form(text: str) -> str:
    """``ibnetdiscover -g``: chassis sections with slot lines, then "Non-Chassis Nodes"."""
    blocks = text.split("\n\n")
    chassis = [b for b in blocks if "MCS8500" in b.split("Switch", 1)[-1].split("\n", 1)[0]]
    others = [b for b in blocks if b not in chassis]
    out = ["Chassis 1 (guid 0x0002c9aaaa000000)"]
    for i, b in enumerate(chassis, 1):
        out.append(f"MCS8500 {'Line' if '/L' in b.split(chr(10))[4] else 'Spine'} {i} Chip 1\n{b}")
    return "\n\n".join([*out, "Non-Chassis Nodes", *others])


def test_grouped_output_reads_like_the_plain_one(three_level, catalogue):
    plain, _ = director_form(export(three_level, "ibnetdiscover")[0], three_level)
    grouped = grouped_form(plain)
    assert "Non-Chassis Nodes" in grouped and " Chip 1\n" in grouped
    a, b = import_fabric(plain, catalogue), import_fabric(grouped, catalogue)
    assert counts_of(a) == counts_of(b)
    assert {(n, s.tier) for n, s in a.graph.switches.items()} == {(n, s.tier) for n, s in b.graph.switches.items()}


def test_grouped_chassis_without_nvidia_names_takes_roles_from_slot_lines(catalogue):
    """A Voltaire-style -g chassis: ASICs share sysimgguid, descriptions name no slot, slot lines do."""
    blocks = ["Chassis 1 (guid 0x0008f10400400000)"]
    for i, (slot, guid) in enumerate([("Line 1", 0x11), ("Line 2", 0x12), ("Spine 1", 0x21)], 1):
        ports = "\n".join(
            f'[{p}]\t"S-{0x8F104004000000 + peer:016x}"[{i if slot.startswith("Line") else 1}]'
            f'\t\t# "ISR9288 Voltaire" lid {peer} 4xDDR'
            for p, peer in enumerate([0x21] if slot.startswith("Line") else [0x11, 0x12], 1)
        )
        blocks.append(
            f"ISR9288 {slot} Chip 1\nvendid=0x8f1\ndevid=0x5a30\nsysimgguid=0x8f10400400000\n"
            f"switchguid=0x{0x8F104004000000 + guid:x}({0x8F104004000000 + guid:x})\n"
            f'Switch\t24 "S-{0x8F104004000000 + guid:016x}"\t\t# "ISR9288 Voltaire" base port 0 lid {guid} lmc 0\n'
            + ports
            + (
                f'\n[9]\t"H-00000000000000{i:02x}"[1](1{i:02x})\t\t# "host{i} mlx4_0" lid 9{i} 4xDDR'
                if slot.startswith("Line")
                else ""
            )
        )
    for i in (1, 2):
        blocks.append(
            f'caguid=0x{i:x}\nCa\t1 "H-00000000000000{i:02x}"\t\t# "host{i} mlx4_0"\n'
            f'[1](1{i:02x})\t"S-{0x8F104004000000 + 0x10 + i:016x}"[9]\t\t# lid 9{i} lmc 0 "ISR9288 Voltaire" lid 1 4xDDR'
        )
    text = "\n\n".join(blocks) + "\n"
    result = import_fabric(text, catalogue)
    [chassis] = result.graph.meta["chassis"]
    assert chassis["asics"] == 3 and len(chassis["line"]) == 2 and len(chassis["spine"]) == 1
    assert Counter(s.tier for s in result.graph.switches.values()) == {"leaf": 2, "spine": 1}
    assert counts_of(result) == {k: v for k, v in reading(text).items() if k in counts_of(result)}


def test_aggregation_nodes_are_not_hosts_and_keep_three_levels(three_level, catalogue):
    text, count = with_aggregation_nodes(export(three_level, "ibnetdiscover")[0])
    truth = reading(text)
    assert truth["ans"] == count == len(three_level.switches)
    result = import_fabric(text, catalogue)
    assert counts_of(result) == {k: truth[k] for k in counts_of(result)}
    assert Counter(s.tier for s in result.graph.switches.values()) == Counter(
        s.tier for s in three_level.switches.values()
    )
    assert result.report()["levels"] == 3 and result.report()["sharp_switches"] == count
    assert {s.model for s in result.graph.switches.values()} == {"QM8700"}


# -- what people paste, and what is refused ----------------------------------------------------


def test_bom_prompt_and_stderr_are_skipped_with_one_finding(one_su, catalogue):
    clean = export(one_su, "ibnetdiscover")[0]
    lines = clean.splitlines()
    lines.insert(40, "src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,3,7) bad status 110; Connection timed out")
    lines.insert(41, "ibwarn: [12345] _do_madrpc: recv failed: Connection timed out")
    pasted = "\ufeff[root@ufm01 ~]# ibnetdiscover 2>&1\n" + "\n".join(lines) + "\n[root@ufm01 ~]# \n"
    a, b = import_fabric(clean, catalogue), import_fabric(pasted, catalogue)
    assert counts_of(a) == counts_of(b)
    [note] = [f for f in b.findings if f.code == "skipped-lines"]
    assert "line(s) 1, 42, 43," in note.message and note.message.startswith("skipped 4 line(s)")


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda t: t.replace("lid 0 4xNDR", "lid -1 4xNDR", 1), "LID '-1'"),
        (lambda t: t.replace("lid 0 4xNDR", "lid  4xNDR", 1), "LID '4xNDR'"),
        (lambda t: t.replace("switchguid=0x0002c90200000001", "switchguid=0x0002c9020000zz01", 1), "malformed GUID"),
        (lambda t: t.replace("caguid=0x0002c90300000000", "caguid=0x10002c90300000000000", 1), "malformed GUID"),
        (lambda t: t.replace("[1](2c90300000001)", "[1](2c9030000000g)", 1), "malformed port GUID"),
        (lambda t: t.replace('"S-0002c90200000001"', '"S-0002c9020000000x"', 1), "malformed GUID in node id"),
    ],
)
def test_malformed_input_is_refused_with_line_and_text(one_su, mutate, reason):
    clean = export(one_su, "ibnetdiscover")[0]
    bad = mutate(clean)
    assert bad != clean
    changed = next(i for i, (x, y) in enumerate(zip(clean.splitlines(), bad.splitlines(), strict=False), 1) if x != y)
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(bad)
    assert err.value.line == changed and reason in str(err.value)
    assert err.value.text == bad.splitlines()[changed - 1]


def test_hca_without_link_is_reported_not_imported(one_su, catalogue):
    text = (
        export(one_su, "ibnetdiscover")[0]
        + '\ncaguid=0x0002c9cccc000001\nCa\t1 "H-0002c9cccc000001"\t\t# "lost01 mlx5_0"\n'
    )
    result = import_fabric(text, catalogue)
    [finding] = [f for f in result.findings if f.code == "unlinked-hca"]
    assert "lost01 mlx5_0" in finding.message and "no link" in finding.message
    assert "lost01" not in result.graph.nodes


def test_node_name_map_formats_and_errors(one_su, catalogue):
    text = export(one_su, "ibnetdiscover")[0]
    first = next(iter(one_su.nodes.values()))
    rdma = f'# site names\n0x{first.ca_guids[0]:016x} "gpu-a01 mlx5_0"\n0x0123456789abcdef\t# bogus entry\n'
    result = import_fabric(text, catalogue, node_name_map=rdma)
    assert "gpu-a01" in result.graph.nodes
    assert any(f.code == "map-entry-without-name" for f in result.findings)
    with pytest.raises(NodeNameMapError) as err:
        import_fabric(text, catalogue, node_name_map="# ok\nnot-a-guid name\n")
    assert err.value.line == 2


def test_warnings_are_one_line_per_kind_with_five_examples():
    findings = [{"code": "no-cable", "element": f"l{i}", "message": f"link {i} has no cable type"} for i in range(7)]
    findings += [{"code": "no-cable", "element": "fabric", "message": "… and 1,000 more no-cable findings"}]
    findings += [{"code": "imbalance", "element": "leaf1", "message": "leaf1 sends 3 uplinks"}]
    lines = summarise(findings)
    assert lines == [
        "no-cable (1,007): link 0 has no cable type — e.g. l0, l1, l2, l3, l4",
        "imbalance (1): leaf1 sends 3 uplinks",
    ]


# -- round trips on real data ------------------------------------------------------------------


@pytest.mark.parametrize("name", [DUMPS[0], DUMPS[1], DUMPS[2]])
def test_real_dump_round_trip(name, catalogue):
    first = import_fabric((REAL / name).read_text(), catalogue).graph
    again = import_fabric(export(first, "ibnetdiscover")[0], catalogue).graph

    def shape(graph):
        return (
            {(n, s.tier) for n, s in graph.switches.items()},
            {(n, node.hcas) for n, node in graph.nodes.items()},
            {lk.key() for lk in graph.links},
        )

    assert shape(again) == shape(first)
    assert export(again, "slurm-topology")[0] == export(first, "slurm-topology")[0]


def test_director_round_trip(three_level, catalogue):
    text, _ = director_form(export(three_level, "ibnetdiscover")[0], three_level)
    first = import_fabric(text, catalogue).graph
    again = import_fabric(export(first, "ibnetdiscover")[0], catalogue).graph
    assert {(n, s.tier, s.guid) for n, s in again.switches.items()} == {
        (n, s.tier, s.guid) for n, s in first.switches.items()
    }
    assert {lk.key() for lk in again.links} == {lk.key() for lk in first.links}


def test_rails_units_and_oversubscription_of_a_designed_fabric(catalogue, three_level):
    designed = plan({"topology": "rail-optimized", "gpus": 2048}).graph
    result = import_fabric(export(designed, "ibnetdiscover")[0], catalogue)
    report = result.report()
    assert report["rails"] == 8 and report["scalable_units"] == designed.meta["scalable_units"]
    assert report["oversubscription"] == {"leaf": "1:1"}

    def units(graph):
        groups: dict[int, set[str]] = {}
        for sw in graph.switches.values():
            if sw.tier == "leaf":
                groups.setdefault(sw.su, set()).add(sw.name)
        return sorted(sorted(g) for g in groups.values())

    assert units(result.graph) == units(designed)
    tree = import_fabric(export(three_level, "ibnetdiscover")[0], catalogue).report()
    by_tier = Counter(lk.tier for lk in three_level.links)  # the design's own cable counts (one speed)
    want = {
        "leaf": f"{by_tier['node_leaf'] / by_tier['leaf_spine']:.3g}:1",
        "spine": f"{by_tier['leaf_spine'] / by_tier['spine_core']:.3g}:1",
    }
    assert tree["oversubscription"] == want and tree["levels"] == 3


@pytest.mark.parametrize(
    "name",
    [
        "osc_perfquery_switch_0x7cfe9003009ce5b0.out",
        "osc_ibswinfo_test1.out",
        "rdmacore_error_thresholds",
        "psmn_x5.spine",
        "psmn_x5.node-name-map",
        "ibsim_examples.README",
    ],
)
def test_files_that_are_not_dumps_are_refused_with_a_line(name):
    text = (REAL / name).read_text()
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(text)
    content = [i for i, line in enumerate(text.splitlines(), 1) if line.strip() and not line.strip().startswith("#")]
    if not content:  # only comments: nothing to point at
        assert err.value.line == 0 and "no Switch or Ca records" in str(err.value)
        return
    assert err.value.line == content[0] and err.value.text == text.splitlines()[content[0] - 1]


def test_oversubscription_is_no_ratio_where_switches_with_hosts_have_no_uplinks(catalogue):
    from designer.graph import FabricGraph, Node
    from designer.metrics import compute_metrics

    # two host switches cabled to each other (what an imported flat fabric looks like): no "1:0"
    graph = FabricGraph(catalogue, "imported")
    for i in (1, 2):
        graph.add_switch(f"sw{i}", "QM9700", "leaf")
        graph.add_node(Node(f"h{i}", "generic", (i,), (i + 100,)))
        graph.connect(f"h{i}", 1, f"sw{i}", 1)
    graph.connect("sw1", 2, "sw2", 2)
    assert compute_metrics(graph)["oversubscription"] is None
    # with a spine above one of them, the ratio is that leaf's (the other has no uplink to count)
    graph.add_switch("spine", "QM9700", "spine")
    graph.connect("sw1", 3, "spine", 1)
    assert compute_metrics(graph)["oversubscription"] == "1:1"


def test_ibsim_link_options_documented_in_its_example_parse_as_the_same_links():
    # ibsim's example net file documents a link's width after its ports: '[1] "remoteid"[2]\tw=12'
    text = (IBNETDISCOVER / "ibsim_net").read_text()
    assert "'w=(1|4|12)'" in text
    plain = parse_ibnetdiscover(text)
    first = re.search(r'^(\[\d+\]\s+"[^"]+"\[\d+\])(.*)$', text, re.M)
    assert first is not None
    with_width = text.replace(first.group(0), f"{first.group(1)}\tw=12{first.group(2)}", 1)
    parsed = parse_ibnetdiscover(with_width)
    assert [(n.node_id, [(p.port, p.peer_id, p.peer_port) for p in n.ports]) for n in parsed.nodes] == [
        (n.node_id, [(p.port, p.peer_id, p.peer_port) for p in n.ports]) for n in plain.nodes
    ]
