"""How to use a reservation: its hosts (and their Slurm hostlist), SSH targets, and the variables
a job needs on this fabric (``NCCL_IB_HCA``, ``NCCL_IB_PKEY``, ``NCCL_IB_SL``, ``UCX_IB_SL``; and
``NCCL_COLLNET_ENABLE=1`` for a SHARP reservation, as NVIDIA's NCCL-RDMA-SHARP plugin documents).

A reservation spanning sites has a P_Key and an SL on each subnet (fabric) it touches: the guide
lists them per subnet. When the P_Keys or their indexes differ, ``NCCL_IB_PKEY`` differs per site;
when the SLs differ (each fabric's QoS table gives the class its own SL), ``NCCL_IB_SL`` and
``UCX_IB_SL`` differ per site: the env file then sets neither and says the value of each site.

``NCCL_IB_PKEY`` is the *index* of the reservation's P_Key in its ports' P_Key tables, not the
key: it is read from what the fabric verified (the change whose verify step read the member
ports' tables, ``outcome["pkey_indexes"]``), never guessed. Before the partition is verified, or
when the ports disagree on the index, it is left out and ``pkey_index_note`` says why.

HCA device names are ``mlx5_<HCA index>`` (the console's HCA index is the node's port number,
0-based, the order in which mlx5 names a DGX's compute ports).

A Kubernetes tenant gets the NetworkAttachmentDefinition that puts its pods' virtual functions
in the reservation's partition (ib-sriov-cni, with ib-kubernetes adding the VF GUIDs to the
P_Key through the console's UFM-compatible API), and the ib-kubernetes configuration whose GUID
pool is the reservation's own virtual GUID range (the only VF GUIDs the console lets its tenant
add to the P_Key; :mod:`console.fabric.opensm.vguids`).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace

from console.fabric.changes.desired import qos_table_of
from console.fabric.changes.ownership import port_names
from console.fabric.models import ChangeRequest, FabricPartition
from console.fabric.services import vguid_range
from console.tenancy.models import Membership
from scheduling.hostlist import compress
from scheduling.models import HCA, Node, Reservation, ReservationAllocation, ReservationSubnet

#: How many of the fabric's latest verified changes to look through for the P_Key's index.
RECENT_CHANGES = 10
#: The device-plugin resource of InfiniBand SR-IOV VFs, as in ib-sriov-cni's example; a cluster
#: whose SR-IOV device plugin names its pool otherwise changes the annotation.
IB_SRIOV_RESOURCE = "mellanox.com/mlnx_sriov_rdma_ib"


@dataclass(frozen=True)
class GuideNode:
    name: str
    ssh: str
    gpus: int
    hcas: list[str]


@dataclass(frozen=True)
class GuideSubnet:
    """The reservation on one subnet (fabric) it touches: its P_Key there and that P_Key's index
    in the ports of its hosts on that fabric."""

    fabric: str
    site: str  # the site's slug, or the fabric's name for a fabric without a site
    hosts: list[str]
    pkey_hex: str
    pkey_index: int | None
    pkey_index_note: str = ""
    sl: int = 0  # NCCL_IB_SL and UCX_IB_SL on these hosts: the class's SL in this fabric's QoS table


@dataclass(frozen=True)
class GuideService:
    """A service partition the reservation's hosts are limited members of: the service's hosts
    (storage, login) reach them and they reach the service hosts, on the service's P_Key."""

    name: str
    description: str
    pkey_hex: str
    hosts: list[str]
    sentence: str


@dataclass(frozen=True)
class UsageGuide:
    reservation_id: int
    status: str
    verified: bool
    nodes: list[GuideNode]
    hosts: list[str]
    hostlist: str
    ssh_targets: list[str]
    hca_devices: list[str]
    pkey: int | None
    pkey_hex: str | None
    pkey_index: int | None
    pkey_index_note: str
    sl: int | None  # None: the SL differs per site (``sl_per_site_note``)
    partition_name: str = ""
    sl_note: str = ""  # the class the SL belongs to and the VL the fabric's QoS table maps it to
    env: dict[str, str] = field(default_factory=dict)
    network_attachment: str = ""
    vguid_start: str = ""  # the reservation's virtual GUID range (ib-kubernetes's GUID pool)
    vguid_end: str = ""
    ib_kubernetes_config: str = ""
    #: The switches of the reservation's SHARP aggregation tree (empty: SHARP not asked for).
    sharp_switches: list[str] = field(default_factory=list)
    #: The sites it runs at (a pool at several sites), and for a spanning one what crossing costs.
    sites: list[str] = field(default_factory=list)
    sites_note: str = ""
    #: One per subnet it touches when it spans several (empty: one subnet, the fields above).
    subnets: list[GuideSubnet] = field(default_factory=list)
    #: Why NCCL_IB_PKEY is not one value for every host (empty: it is, or it is not known yet).
    pkey_per_site_note: str = ""
    #: Why NCCL_IB_SL/UCX_IB_SL is not one value for every host (empty: it is).
    sl_per_site_note: str = ""
    #: The service partitions (storage, login) the tenant's hosts reach.
    services: list[GuideService] = field(default_factory=list)


def hca_device(index: int) -> str:
    """The device name of a node's HCA port ``index``."""
    return f"mlx5_{index}"


def pkey_index(
    reservation: Reservation, port_guids: list[str], *, fabric_id: int | None = None, pkey: int | None = None
) -> tuple[int | None, str]:
    """(index, why not) of the reservation's P_Key in its ports' tables, as the fabric verified it
    (``fabric_id``/``pkey``: on another subnet it touches, its P_Key there)."""
    pkey = reservation.pkey if pkey is None else pkey
    if reservation.status != Reservation.Status.READY or pkey is None:
        return None, f"not verified yet: the reservation is {reservation.status}; the index is known once it is ready"
    key = f"{pkey:#06x}"
    changes = (
        ChangeRequest.objects.filter(
            fabric_id=reservation.fabric_id if fabric_id is None else fabric_id,
            dry_run=False,
            status__in=(ChangeRequest.Status.APPLIED, ChangeRequest.Status.UNCHANGED),
            finished_at__gte=reservation.created_at,
        )
        .order_by("-finished_at", "-id")
        .values_list("outcome", flat=True)[:RECENT_CHANGES]
    )
    for outcome in changes:
        ports = ((outcome or {}).get("pkey_indexes") or {}).get(key)
        if not ports:
            continue
        seen = {ports[g.lower()] for g in port_guids if g.lower() in ports}
        if len(seen) == 1:
            return seen.pop(), ""
        if len(seen) > 1:
            return None, f"the ports hold P_Key {key} at different indexes ({sorted(seen)}): set it per port"
    return None, "the fabric's verification did not record the index (a driver that reads no P_Key tables)"


def login_user(reservation: Reservation) -> str:
    """The tenant's user on the reservation's hosts, whoever reads the guide (an operator reading
    a tenant's guide sees the tenant's, never their own): the member of the tenant who asked for
    it, else the tenant's name (its slug)."""
    creator = reservation.created_by
    if creator is not None and Membership.objects.filter(user=creator, tenant_id=reservation.tenant_id).exists():
        return creator.get_username()
    return reservation.tenant.slug


def usage_guide(reservation: Reservation, username: str | None = None) -> UsageGuide:
    """Everything a job on ``reservation`` needs, for the user ``username`` on its hosts (by
    default :func:`login_user`)."""
    username = username or login_user(reservation)
    gpus: dict[int, set[int]] = {}
    names: dict[int, str] = {}
    rows = ReservationAllocation.objects.filter(reservation=reservation).values_list("node_id", "node__name", "gpu_id")
    for node_id, name, gpu_id in rows:
        names[node_id] = name
        gpus.setdefault(node_id, set()).add(gpu_id)
    hcas: dict[int, list[HCA]] = {}
    for hca in HCA.objects.filter(node_id__in=names).order_by("node", "index"):
        hcas.setdefault(hca.node_id, []).append(hca)
    order = sorted(names, key=lambda pk: names[pk])
    nodes = [
        GuideNode(names[pk], f"{username}@{names[pk]}", len(gpus[pk]), [hca_device(h.index) for h in hcas.get(pk, [])])
        for pk in order
    ]
    devices = sorted({h.index for pk in order for h in hcas.get(pk, [])})
    index, note = pkey_index(reservation, [h.port_guid for pk in order for h in hcas.get(pk, [])])
    hosts = [n.name for n in nodes]
    pkey_hex = f"{reservation.pkey:#06x}" if reservation.pkey is not None else None
    owned = vguid_range(reservation.pk)
    guide = UsageGuide(
        reservation_id=reservation.pk,
        status=reservation.status,
        verified=reservation.status == Reservation.Status.READY,
        nodes=nodes,
        hosts=hosts,
        hostlist=compress(hosts),
        ssh_targets=[n.ssh for n in nodes],
        hca_devices=[hca_device(i) for i in devices],
        pkey=reservation.pkey,
        pkey_hex=pkey_hex,
        pkey_index=index,
        pkey_index_note=note,
        sl=reservation.sl,
        sl_note=sl_note(reservation),
        partition_name=reservation.partition_name,
        network_attachment=network_attachment(reservation.partition_name, pkey_hex) if pkey_hex else "",
        vguid_start=owned.start if owned is not None else "",
        vguid_end=owned.end if owned is not None else "",
        ib_kubernetes_config=ib_kubernetes_config(owned.start, owned.end, username) if owned is not None else "",
        sharp_switches=list(reservation.placement.get("sharp", [])),
        sites=[str(s) for s in reservation.placement.get("sites", [])],
        sites_note=span_note(reservation),
        services=services_of(reservation),
    )
    subnets = guide_subnets(reservation, order, names, hcas)
    if len(subnets) > 1:
        guide = replace(guide, subnets=subnets, pkey_per_site_note=per_site_note(subnets))
        if guide.pkey_per_site_note:
            guide = replace(guide, pkey_index=None, pkey_index_note=guide.pkey_per_site_note)
        else:  # one P_Key: one index on every subnet once each verified it
            unknown = next((s for s in subnets if s.pkey_index is None), None)
            index, note = (subnets[0].pkey_index, "") if unknown is None else (None, unknown.pkey_index_note)
            guide = replace(guide, pkey_index=index, pkey_index_note=note)
        sls = {s.sl for s in subnets}
        if len(sls) > 1:
            note = sl_per_site_note(subnets)
            guide = replace(guide, sl=None, sl_note=note, sl_per_site_note=note)
        else:
            guide = replace(guide, sl=sls.pop())
    guide.env.update(environment(guide))
    return guide


def services_of(reservation: Reservation) -> list[GuideService]:
    """The service partitions of the fabrics the reservation is on that its tenant may reach."""
    fabrics = set(ReservationSubnet.objects.filter(reservation=reservation).values_list("fabric_id", flat=True))
    rows = FabricPartition.objects.filter(
        fabric_id__in=fabrics or {reservation.fabric_id},
        source=FabricPartition.Source.SERVICE,
        allowed_tenants=reservation.tenant_id,
    ).select_related("fabric")
    out = []
    for row in rows.order_by("pkey"):
        guids = [port.lower() for port, _ in row.members if str(port).startswith("0x")]
        by_guid = dict(HCA.objects.filter(port_guid__in=guids).values_list("port_guid", "node__name"))
        design = port_names(row.fabric)
        hosts = sorted({by_guid.get(g) or design.get(int(g, 16), g).split(" ")[0] for g in guids})
        pkey_hex = f"{row.pkey:#06x}"
        what = f" ({row.description})" if row.description else ""
        out.append(
            GuideService(
                row.name,
                row.description,
                pkey_hex,
                hosts,
                f"Your hosts reach {compress(hosts)}{what} on P_Key {pkey_hex}, as limited members: "
                "other tenants' hosts in it cannot reach yours.",
            )
        )
    return out


def guide_subnets(
    reservation: Reservation, order: list[int], names: dict[int, str], hcas: dict[int, list[HCA]]
) -> list[GuideSubnet]:
    """The reservation's subnets, its own fabric first, each with its hosts there and the index of
    its P_Key there (as that fabric verified it)."""
    rows = ReservationSubnet.objects.filter(reservation=reservation).values_list(
        "fabric_id", "fabric__name", "fabric__site__slug", "pkey", "sl"
    )
    fabric_of = dict(Node.objects.filter(pk__in=order).values_list("pk", "fabric_id"))
    out = []
    for fabric_id, name, site, pkey, sl in sorted(rows, key=lambda r: (r[0] != reservation.fabric_id, r[1])):
        mine = [pk for pk in order if fabric_of.get(pk) == fabric_id]
        index, note = pkey_index(
            reservation, [h.port_guid for pk in mine for h in hcas.get(pk, [])], fabric_id=fabric_id, pkey=pkey
        )
        out.append(GuideSubnet(name, site or name, [names[pk] for pk in mine], f"{pkey:#06x}", index, note, sl))
    return out


def per_site_note(subnets: list[GuideSubnet]) -> str:
    """Why one NCCL_IB_PKEY does not hold for every host ("" when it does, or when it is not
    known yet on some subnet: the guide says that instead)."""
    keys = {s.pkey_hex for s in subnets}
    indexes = {s.pkey_index for s in subnets}
    if None in indexes and len(keys) == 1:
        return ""
    if len(keys) == 1 and len(indexes) == 1:
        return ""
    what = "its P_Key differs per site" if len(keys) > 1 else "its P_Key sits at another index per site"
    per = "; ".join(
        f"{s.site} ({', '.join(s.hosts)}): P_Key {s.pkey_hex}, "
        + (f"NCCL_IB_PKEY={s.pkey_index}" if s.pkey_index is not None else s.pkey_index_note)
        for s in subnets
    )
    return f"NCCL_IB_PKEY differs per site ({what}): set it on each host: {per}"


def sl_per_site_note(subnets: list[GuideSubnet]) -> str:
    """That NCCL_IB_SL and UCX_IB_SL differ per site, and the SL of each site's hosts."""
    per = "; ".join(f"{s.site} ({', '.join(s.hosts)}): SL {s.sl}" for s in subnets)
    return (
        "NCCL_IB_SL and UCX_IB_SL differ per site (each fabric's QoS table gives the class its own SL): "
        f"set them on each host: {per}"
    )


def network_attachment(name: str, pkey_hex: str) -> str:
    """The NetworkAttachmentDefinition (YAML) of ib-sriov-cni for the partition ``name``/``pkey_hex``.

    ``ibKubernetesEnabled``: ib-kubernetes assigns each pod VF a GUID and adds it to the P_Key
    (through the console's UFM-compatible API, with the tenant's credentials) before the CNI
    moves the VF into the pod; ``link_state`` enable brings the VF's port up.
    """
    config = {
        "cniVersion": "0.3.1",
        "type": "ib-sriov",
        "name": name,
        "pkey": pkey_hex,
        "link_state": "enable",
        "ibKubernetesEnabled": True,
    }
    body = "\n".join("    " + line for line in json.dumps(config, indent=2).splitlines())
    return (
        "apiVersion: k8s.cni.cncf.io/v1\n"
        "kind: NetworkAttachmentDefinition\n"
        "metadata:\n"
        f"  name: {name}\n"
        "  annotations:\n"
        f"    k8s.v1.cni.cncf.io/resourceName: {IB_SRIOV_RESOURCE}\n"
        "spec:\n"
        "  config: |\n"
        f"{body}\n"
    )


def ib_kubernetes_config(start: str, end: str, username: str) -> str:
    """ib-kubernetes's ConfigMap (its UFM plugin, GUID pool = the reservation's vGUID range) and the
    Secret that points the plugin at this console's UFM-compatible API with the tenant's user and
    one of its API tokens (the UFM API takes a token as the Basic password: no personal password
    in a cluster's Secret)."""
    return (
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        "  name: ib-kubernetes-config\n"
        "  namespace: kube-system\n"
        "data:\n"
        '  DAEMON_SM_PLUGIN: "ufm"\n'
        '  DAEMON_PERIODIC_UPDATE: "5"\n'
        f'  GUID_POOL_RANGE_START: "{start}"\n'
        f'  GUID_POOL_RANGE_END: "{end}"\n'
        "---\n"
        "apiVersion: v1\n"
        "kind: Secret\n"
        "metadata:\n"
        "  name: ib-kubernetes-ufm-secret\n"
        "  namespace: kube-system\n"
        "stringData:\n"
        f'  UFM_USERNAME: "{username}"\n'
        '  UFM_PASSWORD: "<an API token of this user (API tokens page), never a password>"\n'
        '  UFM_ADDRESS: "<this console\'s host name>"\n'
        '  UFM_HTTP_SCHEMA: "https"\n'
        '  UFM_PORT: "443"\n'
    )


def sl_note(reservation: Reservation) -> str:
    """Which class the reservation's SL is and what the fabric's QoS table does with it."""
    row = qos_table_of(reservation.fabric).by_name().get(reservation.priority_class)
    if row is None or row.sl != reservation.sl:
        return (
            f"SL {reservation.sl}, given when the reservation was granted; the fabric's QoS table "
            "now gives its class another SL, so this one keeps no class share"
        )
    return (
        f"SL {row.sl} is the {row.name} class: the fabric maps it to VL {row.vl} "
        f"({row.table}-priority arbitration, weight {row.weight}); traffic on another SL "
        "does not get this class's share"
    )


def span_note(reservation: Reservation) -> str:
    """For a reservation spanning sites: its split and what one all-reduce costs between sites,
    and how to keep that cost down (ranks of a site next to each other in the ring)."""
    span = reservation.placement.get("span")
    if not isinstance(span, dict):
        return ""
    split = ", ".join(f"{part['nodes']} at {part['site']}" for part in span.get("split", []))
    return (
        f"spans {len(span.get('sites', []))} sites ({split}): {span.get('message', '')}. "
        "Order the ranks site by site (hosts of one site next to each other) so that NCCL's ring crosses "
        "between sites only where the console counted it; collectives slow to the inter-site link's pace"
    )


def environment(guide: UsageGuide) -> dict[str, str]:
    """The variables of the env file, in order (``NCCL_IB_PKEY`` only once verified)."""
    env = {
        "IBC_RESERVATION": str(guide.reservation_id),
        "IBC_HOSTS": ",".join(guide.hosts),
        "IBC_HOSTLIST": guide.hostlist,
        "NCCL_IB_HCA": ",".join(guide.hca_devices),
    }
    if guide.pkey_index is not None:
        env["NCCL_IB_PKEY"] = str(guide.pkey_index)
    if guide.sl is not None:
        env["NCCL_IB_SL"] = str(guide.sl)
        env["UCX_IB_SL"] = str(guide.sl)
    if guide.pkey_hex is not None:
        env["IBC_PKEY"] = guide.pkey_hex
    if guide.subnets:
        env["IBC_PKEYS"] = ",".join(f"{s.site}:{s.pkey_hex}" for s in guide.subnets)
        env["IBC_SLS"] = ",".join(f"{s.site}:{s.sl}" for s in guide.subnets)
    if guide.vguid_start:
        env["IBC_VGUID_RANGE_START"] = guide.vguid_start
        env["IBC_VGUID_RANGE_END"] = guide.vguid_end
    if guide.sharp_switches:
        # NVIDIA's NCCL-RDMA-SHARP plugin (HPC-X "NCCL-RDMA-SHARP Plugins"): CollNet on, so NCCL
        # reduces through the reservation's SHARP aggregation tree.
        env["NCCL_COLLNET_ENABLE"] = "1"
        env["IBC_SHARP_SWITCHES"] = ",".join(guide.sharp_switches)
    if guide.sites:
        env["IBC_SITES"] = ",".join(guide.sites)
    return env


def _comment(text: str) -> str:
    """One comment line: a line break in a name (imported node names are anyone's) would end the
    comment and start a command."""
    return "".join(" " if ch in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029" else ch for ch in text)


#: Characters an assignment's value may hold bare: no expansion happens to them there (a hostlist's
#: brackets are not globbed in ``X=node-[01-04]``).
_BARE = re.compile(r"[A-Za-z0-9_@%+=:,./\-\[\]]*")


def _value(value: str) -> str:
    return value if _BARE.fullmatch(value) else shlex.quote(value)


def env_file(guide: UsageGuide) -> str:
    """``KEY=VALUE`` lines (``# `` comments), for ``set -a; . ./use.env``: every value quoted for
    the shell where it needs it (a value of only safe characters, as almost all are, stays bare,
    so ``docker --env-file``, which takes values literally, reads those as they are), every
    comment one line. Imported node names can hold shell metacharacters and line breaks."""
    lines = [f"# reservation {guide.reservation_id} ({guide.status})"]
    for subnet in guide.subnets:
        lines.append(
            f"# site {subnet.site} (fabric {subnet.fabric}): P_Key {subnet.pkey_hex}, SL {subnet.sl}"
            f" on {', '.join(subnet.hosts)}"
        )
    if guide.pkey_index is None:
        lines.append(f"# NCCL_IB_PKEY omitted: {guide.pkey_index_note}")
    if guide.sl is None:
        lines.append(f"# NCCL_IB_SL, UCX_IB_SL omitted: {guide.sl_per_site_note}")
    elif guide.sl_note:
        lines.append(f"# NCCL_IB_SL, UCX_IB_SL: {guide.sl_note}")
    if guide.sharp_switches:
        lines.append("# SHARP: NCCL_COLLNET_ENABLE needs the nccl-rdma-sharp-plugins (HPC-X) on the job's library path")
    if guide.sites_note:
        lines.append(f"# sites: {guide.sites_note}")
    lines = [_comment(line) for line in lines]
    lines += [f"{k}={_value(v)}" for k, v in guide.env.items()]
    return "\n".join(lines) + "\n"
