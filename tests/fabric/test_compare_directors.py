"""Compare on fabrics we do not generate: director chassis, SHARP Aggregation Nodes, node-name maps.

Discovery and compare read the dump with the importer's parser, so a design imported from a
director fabric (switch names ``dir1/L03/U1``) compares cleanly against a discovery of it, by name
and by GUID, and findings name the chassis and slot. Pure tests first (stored discovery texts:
an export rewritten into director form, the real dumps in ``tests/data/realdata/ibnetdiscover/``),
then the real lab running the director design.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from console.fabric.diags.topology import parse_topology
from console.fabric.discovery import services
from console.fabric.discovery.compare import compare_topology, discovered_topology
from console.fabric.lab.faults import unplug
from console.tenancy.models import Principal, Role
from designer.builtin_catalogue import default_catalogue
from designer.exports import export
from designer.imports import import_fabric, parse_ibnetdiscover
from designer.plan import plan
from designer.services import import_ibnetdiscover, revision_graph
from tests.datafiles import IBNETDISCOVER
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, routing_passes, wait_for_new_routing_pass
from tests.ibnetdiscover_rewrites import with_aggregation_nodes as add_aggregation_nodes

REAL = IBNETDISCOVER
CHASSIS = 0x0002C9AAAA000000

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision


def director_form(text: str, graph) -> str:
    """Rewrite the spines as line ASICs and the cores as spine ASICs of one CS8500 chassis
    ``dir1`` (``MF0;dir1:MCS8500/L01/U1``; ``sysimgguid``/``switchguid`` the chassis' value, the
    ASIC's own GUID in the parentheses and the header), the way such a chassis reports itself."""
    line, spine = iter(range(1, 99)), iter(range(1, 99))
    for sw in graph.switches.values():
        if sw.tier not in ("spine", "core"):
            continue
        slot = f"L{next(line):02d}" if sw.tier == "spine" else f"S{next(spine):02d}"
        text = text.replace(f'"MF0;{sw.name}:M{sw.model}/U1"', f'"MF0;dir1:MCS8500/{slot}/U1"')
        text = text.replace(
            f"sysimgguid=0x{sw.guid:016x}\nswitchguid=0x{sw.guid:016x}({sw.guid:x})",
            f"sysimgguid=0x{CHASSIS:016x}\nswitchguid=0x{CHASSIS:016x}({sw.guid:x})",
        )
    return text


def with_aggregation_nodes(text: str) -> str:
    """Every switch gets SHARP's extra port with its "Mellanox Technologies Aggregation Node" CA."""
    return add_aggregation_nodes(text, short_port_guids=False)[0]


def without_cable(text: str, node_id: str, port: int) -> str:
    """The dump with the cable at ``node_id[port]`` pulled (its port line on both ends gone)."""
    block = re.split(rf'^(?:Switch|Ca)\s+\d+\s+"{node_id}".*$', text, maxsplit=1, flags=re.M)[1].split("\n\n")[0]
    m = re.search(rf'^\[{port}\]\S*\s+"([^"]+)"\[(\d+)\]', block, re.M)
    assert m, f"{node_id}[{port}] is not cabled"
    peer, peer_port = m.group(1), int(m.group(2))
    out = []
    owner = ""
    for line in text.splitlines():
        head = re.match(r'^(?:Switch|Ca)\s+\d+\s+"([^"]+)"', line)
        if head:
            owner = head.group(1)
        pm = re.match(r"^\[(\d+)\]", line)
        if pm and (owner, int(pm.group(1))) in ((node_id, port), (peer, peer_port)):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def _ends(entry: dict) -> tuple:
    return (entry["a"], entry["a_port"], entry["b"], entry["b_port"])


@pytest.fixture(scope="module")
def director():
    """(design graph imported from the director dump, the dump with Aggregation Nodes added)."""
    three = plan({"topology": "fat-tree", "nodes": 24, "levels": "3", "switch": "QM8700", "node_type": "generic"})
    assert three.ok, three.errors
    text = director_form(export(three.graph, "ibnetdiscover")[0], three.graph)
    assert text.count(f"switchguid=0x{CHASSIS:016x}(") >= 4
    design = import_fabric(text, default_catalogue()).graph
    return design, with_aggregation_nodes(text)


def _compare(graph, text: str, **kw) -> tuple[dict, dict]:
    topology = discovered_topology(parse_ibnetdiscover(text), graph, **kw)
    return topology, compare_topology(graph, topology)


# -- pure: stored discovery texts ------------------------------------------------------------


def test_director_fabric_with_aggregation_nodes_compares_clean(director):
    graph, text = director
    asics = [n for n in graph.switches if n.startswith("dir1/")]
    assert asics and all(re.fullmatch(r"dir1/[LS]\d\d/U1", n) for n in asics)
    topology, result = _compare(graph, text)
    assert result["ok"], result["fixes"][:5]
    assert result["summary"]["matched"] == len(graph.links) == len(topology["links"])
    assert not result["summary"]["unknown_devices"] and not result["summary"]["missing_devices"]
    # Aggregation Nodes are counted apart: not hosts, not extra cables
    assert topology["aggregation_nodes"] == len(graph.switches)
    assert not any("Aggregation" in n["name"] for n in topology["nodes"])
    line = next(n for n in topology["nodes"] if n["name"] == "dir1/L03/U1")
    assert (line["chassis"], line["slot"], line["known"]) == ("dir1", "L03/U1", True)
    assert line["guid"] == f"0x{graph.switches['dir1/L03/U1'].guid:016x}"


def test_unplugged_director_cable_is_named_by_chassis_and_slot(director):
    graph, text = director
    asic = graph.switches["dir1/L03/U1"]
    port, (peer, peer_port) = next(
        (lk.b_port, (lk.a, lk.a_port)) if lk.b == asic.name else (lk.a_port, (lk.b, lk.b_port))
        for lk in graph.links
        if asic.name in (lk.a, lk.b) and ((lk.b if lk.a == asic.name else lk.a).startswith("dir1/S"))
    )
    _, result = _compare(graph, without_cable(text, f"S-{asic.guid:016x}", port))
    [missing] = result["missing"]
    assert {_ends(missing)} <= {
        ("dir1/L03/U1", port, peer, peer_port),
        (peer, peer_port, "dir1/L03/U1", port),
    }
    side = "a" if missing["a"] == "dir1/L03/U1" else "b"
    other = "b" if side == "a" else "a"
    assert (missing[f"{side}_chassis"], missing[f"{side}_slot"]) == ("dir1", "L03/U1")
    assert missing[f"{other}_chassis"] == "dir1" and missing[f"{other}_slot"].startswith("S")
    assert not result["extra"] and not result["miswired"] and len(result["fixes"]) == 1
    assert f"dir1 L03/U1 port {port}" in result["fixes"][0]
    assert f"dir1 {peer.split('/', 1)[1]} port {peer_port}" in result["fixes"][0]
    assert "dir1 L03/U1[" in missing["label"]


def test_director_asics_match_by_name_when_their_guids_changed(director):
    """A line card replaced: new ASIC GUIDs, same chassis and slot → still the designed ASIC."""
    graph, text = director
    old = graph.switches["dir1/L01/U1"].guid
    new = 0x0002C9CCCC000001
    swapped = text.replace(f"{old:016x}", f"{new:016x}").replace(f"({old:x})", f"({new:x})")
    assert f"{old:016x}" not in swapped
    topology, result = _compare(graph, swapped)
    assert result["ok"], result["fixes"][:5]
    line = next(n for n in topology["nodes"] if n["name"] == "dir1/L01/U1")
    assert line["guid"] == f"0x{new:016x}" and line["known"]


def test_devices_without_names_match_by_guid(director):
    """Descriptions the design does not know (factory defaults): switches by node GUID, HCAs by port GUID."""
    graph, text = director
    plain = re.sub(r'"MF0;[^"]+"', '"Quantum Mellanox Technologies"', text)
    plain = re.sub(r'"node-\d+ HCA-1"', '"MT4123 ConnectX6 Mellanox Technologies"', plain)
    assert "MF0;" not in plain and "HCA-1" not in plain
    _, result = _compare(graph, plain)
    assert result["ok"], result["fixes"][:5]


def test_node_name_map_names_what_descriptions_do_not(director):
    graph, text = director
    plain = re.sub(r'"MF0;[^"]+"', '"Quantum Mellanox Technologies"', text)
    # a discovery whose switch GUIDs the design does not know, named by the site's map
    name_map = []
    for name, sw in graph.switches.items():
        new = sw.guid ^ 0x0000_0000_00F0_0000
        plain = plain.replace(f"{sw.guid:016x}", f"{new:016x}").replace(f"({sw.guid:x})", f"({new:x})")
        name_map.append(f'0x{new:016x} "{name}"')
    without_map = _compare(graph, plain)[1]
    assert not without_map["ok"]
    topology, result = _compare(graph, plain, node_name_map="\n".join(name_map) + "\n")
    assert result["ok"], result["fixes"][:5]
    assert {n["name"] for n in topology["nodes"] if n["kind"] == "switch"} == set(graph.switches)


def test_real_dgx_h100_dump_with_aggregation_nodes_compares_clean_with_itself():
    text = (REAL / "topograph_dgx_h100_ndr_582ca_40sw.ibnetdiscover").read_text()
    ans = len(re.findall(r'^Ca\s+\d+\s+"[^"]+"\s+#\s+"Mellanox Technologies Aggregation Node"', text, re.M))
    assert ans == 40
    graph = import_fabric(text, default_catalogue()).graph
    topology, result = _compare(graph, text)
    assert result["ok"], result["fixes"][:5]
    assert topology["aggregation_nodes"] == ans and not result["extra"]
    assert result["summary"]["matched"] == len(graph.links)


def test_real_voltaire_dump_compares_clean_with_its_node_name_map():
    text = (REAL / "psmn_x5_voltaire_qdr_89ca_11sw.ibnetdiscover").read_text()
    name_map = (REAL / "psmn_x5.node-name-map").read_text()
    graph = import_fabric(text, default_catalogue(), node_name_map=name_map).graph
    assert "x5570comp1" in graph.nodes
    topology, result = _compare(graph, text, node_name_map=name_map)
    assert result["ok"], result["fixes"][:5]
    assert not result["summary"]["unknown_devices"]
    # without the map the descriptions do not name the design's hosts: GUIDs still place them
    assert _compare(graph, text)[1]["ok"]


def test_diags_topology_reads_with_the_import_parser(director):
    """The diags' id-keyed view is the importer's reading (one parser): same nodes, links, GUIDs."""
    _, text = director
    disc = parse_ibnetdiscover(text)
    topo = parse_topology(text)
    assert set(topo.nodes) == {n.node_id for n in disc.nodes}
    assert len(topo.links) == len(disc.links())
    asics = [n for n in topo.switches() if n.description.startswith("MF0;dir1:")]
    assert asics and all(n.guid == int(n.node_id[2:], 16) != CHASSIS for n in asics)
    assert topo.port_guids == {**{(n.node_id, 0): n.guid for n in topo.switches()}, **topo.port_guids}


# -- the real lab ------------------------------------------------------------------------------


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(240)
@pytest.mark.django_db
def test_lab_of_a_director_design_compares_clean_and_names_an_unplugged_cable(lab_fabric, director):
    """The lab runs the imported director design as ibsim switches with the chassis' system image
    GUID and NVIDIA's director descriptions; compare is clean, and an unplugged line-to-spine
    ASIC cable is exactly the one missing cable, named by chassis and slot."""
    _, text = director
    principal = Principal(None, Role.OPERATOR, None)
    _, revision = import_ibnetdiscover(ACTOR, principal, name=f"dir-{uuid.uuid4().hex[:6]}", text=text)
    graph = revision_graph(revision)
    assert "dir1/L03/U1" in graph.switches
    fabric, lab = lab_fabric("director", revision)
    net = (lab.workdir / "fabric.net").read_text()
    assert '"MF0;dir1:MCS8500/L03/U1"' in net and net.count(f"sysimgguid=0x{CHASSIS:016x}") == 40
    run = services.discover(fabric, actor=ACTOR)
    result = services.compare(fabric, run)
    assert result["ok"], result["fixes"][:5]
    line = next(n for n in run.topology["nodes"] if n["name"] == "dir1/L03/U1")
    assert line["chassis"] == "dir1" and line["lid"]
    lk = next(x for x in graph.links if "dir1/L03/U1" in (x.a, x.b) and (x.a + x.b).count("dir1/S") == 1)
    end = (lk.a, lk.a_port) if lk.a == "dir1/L03/U1" else (lk.b, lk.b_port)
    passes = routing_passes(lab)
    unplug(fabric, end[0], end[1], actor=ACTOR)
    wait_for_new_routing_pass(lab, passes)
    deadline = time.monotonic() + 15.0
    while True:  # ibsim unlinks at once; poll anyway, bounded, as the other lab tests do
        result = services.compare(fabric, services.discover(fabric, actor=ACTOR))
        if result["missing"] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [_ends(m) for m in result["missing"]] == [(lk.a, lk.a_port, lk.b, lk.b_port)]
    side = "a" if lk.a == "dir1/L03/U1" else "b"
    assert (result["missing"][0][f"{side}_chassis"], result["missing"][0][f"{side}_slot"]) == ("dir1", "L03/U1")
    assert not result["extra"] and not result["miswired"] and len(result["fixes"]) == 1
    assert f"dir1 L03/U1 port {end[1]}" in result["fixes"][0]
