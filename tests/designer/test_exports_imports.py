"""Exports (golden ibnetdiscover fragment, OpenSM, Slurm, k8s, CSV, JSON) and imports."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from console.fabric.lab.spec import find_umad2sim
from designer.errors import ParseError, UnknownItemError
from designer.exports import FORMATS, export
from designer.hostlist import compress
from designer.imports import graph_from_dict, graph_from_ibnetdiscover, parse_ibnetdiscover
from designer.serialize import graph_to_dict
from tests.designer.conftest import graph_identity
from tests.needs import needs

GOLDEN_SWITCH = """\
vendid=0x2c9
devid=0xd2f2
sysimgguid=0x0002c90200000001
switchguid=0x0002c90200000001(2c90200000001)
Switch\t64 "S-0002c90200000001"\t\t# "MF0;su01-leaf-r1:MQM9700/U1" enhanced port 0 lid 0 lmc 0
[1]\t"H-0002c90300000000"[1](2c90300000001)\t\t# "su01-n01 HCA-1" lid 0 4xNDR
[2]\t"H-0002c90300000100"[1](2c90300000101)\t\t# "su01-n02 HCA-1" lid 0 4xNDR
"""
GOLDEN_CA = """\
vendid=0x2c9
devid=0x1021
sysimgguid=0x0002c90300000000
caguid=0x0002c90300000000
Ca\t1 "H-0002c90300000000"\t\t# "su01-n01 HCA-1"
[1](2c90300000001)\t"S-0002c90200000001"[1]\t\t# lid 0 lmc 0 "MF0;su01-leaf-r1:MQM9700/U1" lid 0 4xNDR
"""


def test_ibnetdiscover_golden_fragment(one_su):
    content, filename, ctype = export(one_su, "ibnetdiscover")
    assert filename == "rail-optimized-ibnetdiscover.topo" and ctype == "text/plain"
    assert GOLDEN_SWITCH in content
    assert GOLDEN_CA in content
    assert '[33]\t"S-0002c90200000009"[1]\t\t# "MF0;spine-01:MQM9700/U1" lid 0 4xNDR' in content
    assert max(len(line) for line in content.splitlines()) < 256  # ibsim's MAXLINE


def test_guids_are_unique_and_stable(catalogue):
    from designer.plan import plan

    a = plan({"topology": "rail-optimized", "gpus": 512}, catalogue).graph
    b = plan({"topology": "rail-optimized", "gpus": 512}, catalogue).graph
    guids = [s.guid for s in a.switches.values()]
    guids += [g for n in a.nodes.values() for g in n.ca_guids + n.port_guids]
    assert len(guids) == len(set(guids))
    assert graph_identity(a) == graph_identity(b)


def test_ibnetdiscover_round_trip(one_su, catalogue):
    back = graph_from_ibnetdiscover(export(one_su, "ibnetdiscover")[0], catalogue)
    assert graph_identity(back) == graph_identity(one_su)
    assert {(s.name, s.tier) for s in back.switches.values()} == {(s.name, s.tier) for s in one_su.switches.values()}
    assert back.meta["routing"] == "ftree"


def test_json_round_trip_keeps_everything(one_su, catalogue):
    data = json.loads(export(one_su, "json")[0])
    back = graph_from_dict(data, catalogue)
    assert graph_to_dict(back) == graph_to_dict(one_su)


REAL_OUTPUT = """\
#
# Topology file: generated on Tue Jun  5 14:15:10 2007
#
# Initiated from node 0008f10403960558 port 0008f10403960559

Non-Chassis Nodes

vendid=0x8f1
devid=0x5a06
sysimgguid=0x5442ba00003000
switchguid=0x5442ba00003080(5442ba00003080)
Switch  24 "S-005442ba00003080"         # "ISR9024 Voltaire" base port 0 lid 6 lmc 0
[22]    "H-0008f10403961354"[1](8f10403961355)         # "MT23108 InfiniHost Mellanox Technologies" lid 4 4xSDR
[10]    "S-0008f10400410015"[1]         # "SW-6IB4 Voltaire" lid 3 4xSDR

vendid=0x8f1
devid=0x5a05
switchguid=0x8f10400410015(8f10400410015)
Switch  8 "S-0008f10400410015"          # "SW-6IB4 Voltaire" base port 0 lid 3 lmc 0
[1]     "S-005442ba00003080"[10]                # "ISR9024 Voltaire" lid 6 1xSDR
[6]     "H-0008f10403960984"[1](8f10403960985)         # "node7 mlx5_0" lid 16 4xNDR

vendid=0x2c9
devid=0x5a44
caguid=0x8f10403960984
Ca      2 "H-0008f10403960984"          # "node7 mlx5_0"
[1](8f10403960985)      "S-0008f10400410015"[6]         # lid 16 lmc 1 "SW-6IB4 Voltaire" lid 3 4xNDR

vendid=0x2c9
devid=0x5a44
caguid=0x8f10403961354
Ca      2 "H-0008f10403961354"          # "MT23108 InfiniHost Mellanox Technologies"
[1](8f10403961355)      "S-005442ba00003080"[22]                # lid 4 lmc 1 "ISR9024 Voltaire" lid 6 4xSDR
"""


def test_parses_real_ibnetdiscover_output(catalogue):
    disc = parse_ibnetdiscover(REAL_OUTPUT)
    assert [n.kind for n in disc.nodes] == ["Switch", "Switch", "Ca", "Ca"]
    big = disc.nodes[0]
    assert (big.guid, big.devid, big.lid, big.enhanced_port0) == (
        0x5442BA00003080,
        0x5A06,
        6,
        False,
    )
    assert big.ports[0].peer_port_guid == 0x8F10403961355 and big.ports[0].peer_lid == 4
    uplink = disc.nodes[1].ports[0]
    assert (uplink.width, uplink.speed, uplink.rate_gbps) == (1, "SDR", 2.5)
    ca_port = disc.nodes[2].ports[0]
    assert (ca_port.lid, ca_port.lmc, ca_port.port_guid, ca_port.rate_gbps) == (16, 1, 0x8F10403960985, 400)
    assert len(disc.links()) == 3
    graph = graph_from_ibnetdiscover(disc, catalogue)
    assert set(graph.nodes) == {"node7", "MT23108 InfiniHost Mellanox Technologies"}
    assert graph.nodes["node7"].hca_names == ("mlx5_0",)
    assert {s.tier for s in graph.switches.values()} == {"leaf"}
    assert graph.switches["ISR9024 Voltaire"].model.startswith("imported-")


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ('Switch 8 "S-1"\n[1] "S-2"\n', 2, "malformed port line"),
        ('[1] "S-2"[1]\n', 1, "port line outside"),
        ('Switch 8 "S-1"\n[9] "S-2"[1]\n', 2, "port 9 outside 1..8"),
        ('Switch 8 "S-1"\n\nfoo bar\n', 3, "unrecognised line"),
        ('Switch 8 "S-1"\n\nSwitch 8 "S-1"\n', 3, "already defined on line 1"),
        ('Switch 8 "S-1"\n[1] "S-2"[1]\n[1] "S-3"[1]\n', 3, "listed twice"),
        ('Switch 8 "S-1"\n[1] "S-2"[3]\n\nSwitch 8 "S-2"\n[3] "S-9"[1]\n', 2, "points to"),
        ("# only comments\n", 0, "no Switch or Ca records"),
    ],
)
def test_malformed_input_names_the_line(text, line, reason):
    with pytest.raises(ParseError) as err:
        parse_ibnetdiscover(text)
    assert err.value.line == line and reason in str(err.value)


def test_malformed_json_is_a_parse_error(catalogue):
    with pytest.raises(ParseError, match="not an ib-fabric-designer"):
        graph_from_dict({"hello": 1}, catalogue)
    with pytest.raises(ParseError, match="malformed design JSON"):
        graph_from_dict({"format": "ib-fabric-designer", "switches": [{}]}, catalogue)


def test_opensm_files(one_su):
    roots = export(one_su, "opensm-root-guids")[0].split()
    assert roots == [f"0x{one_su.switches[f'spine-{i:02d}'].guid:016x}" for i in range(1, 5)]
    cns = export(one_su, "opensm-cn-guids")[0].split()
    assert len(cns) == 256 and cns[0] == "0x0002c90300000001"
    name_map = export(one_su, "node-name-map")[0]
    assert '0x0002c90200000001 "su01-leaf-r1"' in name_map
    assert '0x0002c90300000000 "su01-n01 HCA-1"' in name_map
    conf = export(one_su, "opensm-conf")[0]
    assert "routing_engine ftree" in conf and "io_guid_file" not in conf


def test_slurm_and_kubernetes_exports():
    from designer.plan import plan

    graph = plan({"topology": "rail-optimized", "gpus": 16_384}).graph
    tree = export(graph, "slurm-topology")[0]
    assert "SwitchName=su01 Nodes=su01-n[01-32]" in tree
    assert "SwitchName=pod01 Switches=su[01-04]" in tree
    assert "SwitchName=fabric Switches=pod[01-16]" in tree
    block = export(graph, "slurm-block")[0]
    assert "BlockName=su64 Nodes=su64-n[01-32]" in block
    assert "BlockSizes=32,64,128,256,512,1024,2048" in block
    labels = json.loads(export(graph, "k8s-labels")[0])["nodes"]
    assert labels["su05-n07"]["network.topology/block"] == "su05"
    assert labels["su05-n07"]["network.topology/spine"] == "pod02"
    assert labels["su05-n07"]["network.topology/leaf"] == "su05-leaf-r1"
    assert "nodeLabel: network.topology/block" in export(graph, "kueue-topology")[0]
    yml = export(graph, "slurm-yaml")[0]
    assert "block_sizes:" in yml and "cluster_default: true" in yml


def test_cabling_and_bom_csv(one_su):
    rows = list(csv.DictReader(io.StringIO(export(one_su, "cabling-csv")[0])))
    assert len(rows) == 512
    first = rows[0]
    assert (first["a_device"], first["a_port"], first["b_device"], first["b_port"]) == (
        "su01-n01",
        "HCA-1",
        "su01-leaf-r1",
        "1",
    )
    assert first["a_rack"] and first["b_rack"] and float(first["length_m"]) > 0
    bom = list(csv.DictReader(io.StringIO(export(one_su, "bom-csv")[0])))
    switches = [r for r in bom if r["category"] == "switch"]
    assert switches == [
        {
            "category": "switch",
            "item": "QM9700",
            "description": "Quantum-2, managed, 32 OSFP cages",
            "quantity": "12",
            "unit_price": "32000",
            "total_price": "384000",
            "unit_power_w": "1100",
            "total_power_w": "13200",
        }
    ]
    cables = sum(int(r["quantity"]) for r in bom if r["category"] == "cable")
    assert cables == 512


def test_every_format_renders_and_unknown_is_refused(one_su):
    for name in FORMATS:
        content, filename, ctype = export(one_su, name)
        assert filename and ctype
        assert content or name == "opensm-io-guids"  # no manager appliance in this design
    with pytest.raises(UnknownItemError, match="unknown export format 'visio'"):
        export(one_su, "visio")


def test_hostlist_compress():
    assert compress(["n01", "n02", "n03", "n07", "x", "gpu-9", "gpu-10"]) == "n[01-03,07],x,gpu-9,gpu-10"
    assert compress(["su01-n01"]) == "su01-n01"


def _ibsim_ready(sim: subprocess.Popen[bytes], log: Path, sockname: str) -> bool:
    """ibsim said it is ready and its control socket is bound (a failed start fails the test)."""
    assert sim.poll() is None, log.read_text(errors="replace")[-500:]
    with open("/proc/net/unix") as fh:
        # abstract sockets show as "@name:ctl@" (the trailing NUL of the name)
        bound = any(line.split()[-1].rstrip("@") == f"@{sockname}:ctl" for line in fh if line.strip())
    return bound and "Network simulator ready" in log.read_text(errors="replace")


@pytest.mark.lab
@needs("lab")
def test_ibsim_loads_export_and_discovery_round_trips(one_su, catalogue, tmp_path):
    # given the planned 1-SU fabric as an ibsim net file, simulated by ibsim
    net = tmp_path / "fabric.net"
    net.write_text(export(one_su, "ibnetdiscover")[0])
    sockname = f"designer-test-{os.getpid()}"
    env = dict(os.environ, IBSIM_SOCKNAME=sockname)
    log = tmp_path / "ibsim.log"
    with open(log, "wb") as out:
        sim = subprocess.Popen(
            ["ibsim", "-s", "-n", str(net)], env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    try:
        deadline = time.monotonic() + 30
        while not _ibsim_ready(sim, log, sockname):
            assert time.monotonic() < deadline, "ibsim did not become ready"
            time.sleep(0.05)
        env.update(LD_PRELOAD=find_umad2sim(), SIM_HOST="H-0002c90300000000")
        out = subprocess.run(["ibnetdiscover"], env=env, capture_output=True, text=True, timeout=60, check=True).stdout
    finally:
        sim.kill()
        sim.wait(timeout=10)
    # when the real discovery is imported, then it is the planned graph
    assert graph_identity(graph_from_ibnetdiscover(out, catalogue)) == graph_identity(one_su)
