"""The how-to-use guide of a reservation as the API answers it (``scheduling.usage_guide``)."""

from __future__ import annotations

from rest_framework import serializers


class GuideNodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    ssh = serializers.CharField(help_text="user@host")
    gpus = serializers.IntegerField()
    hcas = serializers.ListField(child=serializers.CharField(), help_text="HCA device names (mlx5_N)")


class GuideSubnetSerializer(serializers.Serializer):
    """The reservation on one subnet it spans: its hosts there, its P_Key there and that key's index."""

    fabric = serializers.CharField()
    site = serializers.CharField(help_text="the site's slug (the fabric's name for a fabric without a site)")
    hosts = serializers.ListField(child=serializers.CharField())
    pkey_hex = serializers.CharField()
    pkey_index = serializers.IntegerField(allow_null=True, help_text="NCCL_IB_PKEY on these hosts, as verified")
    pkey_index_note = serializers.CharField(help_text="why pkey_index is null (empty when known)")
    sl = serializers.IntegerField(
        help_text="NCCL_IB_SL and UCX_IB_SL on these hosts: the priority class's SL in this fabric's QoS table"
    )


class GuideServiceSerializer(serializers.Serializer):
    """A service partition (storage, login) the reservation's hosts reach, as limited members."""

    name = serializers.CharField()
    description = serializers.CharField()
    pkey_hex = serializers.CharField(help_text="the service's P_Key")
    hosts = serializers.ListField(child=serializers.CharField(), help_text="the service's hosts")
    sentence = serializers.CharField(
        help_text='e.g. "Your hosts reach storage-[01-04] (lustre) on P_Key 0x0042, as limited members: …"'
    )


class UsageGuideSerializer(serializers.Serializer):
    """How to use a reservation (``scheduling.usage_guide``): hosts, SSH targets, NCCL/UCX variables;
    for one spanning sites, the P_Key, its index and the SL per subnet (``subnets``)."""

    reservation_id = serializers.IntegerField()
    status = serializers.CharField()
    verified = serializers.BooleanField(help_text="the partition is verified on the ports (status ready)")
    nodes = GuideNodeSerializer(many=True)
    hosts = serializers.ListField(child=serializers.CharField())
    hostlist = serializers.CharField(help_text="Slurm hostlist form, e.g. dgx-su1-[001-004,007]")
    ssh_targets = serializers.ListField(child=serializers.CharField())
    hca_devices = serializers.ListField(child=serializers.CharField(), help_text="NCCL_IB_HCA")
    pkey = serializers.IntegerField(allow_null=True)
    pkey_hex = serializers.CharField(allow_null=True)
    pkey_index = serializers.IntegerField(
        allow_null=True, help_text="NCCL_IB_PKEY: index of the P_Key in the ports' tables, as verified; null before"
    )
    pkey_index_note = serializers.CharField(help_text="why pkey_index is null (empty when known)")
    sl = serializers.IntegerField(
        allow_null=True,
        help_text="NCCL_IB_SL and UCX_IB_SL; null when the SL differs per site (see subnets[].sl, sl_per_site_note)",
    )
    sl_note = serializers.CharField(
        help_text="the priority class of the SL and the VL the fabric's QoS table maps it to "
        "(when the SL differs per site: sl_per_site_note)"
    )
    env = serializers.DictField(child=serializers.CharField(), help_text="the env file's variables, in order")
    sharp_switches = serializers.ListField(
        child=serializers.CharField(),
        help_text="the switches of the reservation's SHARP aggregation tree (empty without SHARP); "
        "the env then sets NCCL_COLLNET_ENABLE=1",
    )
    partition_name = serializers.CharField(help_text="the partition's name on the fabric (res-<id>)")
    network_attachment = serializers.CharField(
        help_text="Kubernetes NetworkAttachmentDefinition (YAML) of ib-sriov-cni with the reservation's P_Key; "
        "empty before a P_Key is assigned"
    )
    vguid_start = serializers.CharField(
        help_text="first virtual GUID (pod VF) of the reservation's own range, e.g. 02:C0:FF:EE:00:00:70:00: "
        "the GUID_POOL_RANGE_START of its ib-kubernetes"
    )
    vguid_end = serializers.CharField(help_text="last virtual GUID of the range (GUID_POOL_RANGE_END)")
    ib_kubernetes_config = serializers.CharField(
        help_text="ib-kubernetes ConfigMap (UFM plugin, GUID pool = the vGUID range) and UFM Secret (YAML)"
    )
    sites = serializers.ListField(
        child=serializers.CharField(), help_text="a pool at several sites: the sites it runs at (empty: one site)"
    )
    sites_note = serializers.CharField(
        help_text="spanning sites: the split, the inter-site cost of a ring all-reduce and how to order ranks"
    )
    subnets = GuideSubnetSerializer(
        many=True, help_text="one per subnet (site) when the reservation spans several; empty otherwise"
    )
    pkey_per_site_note = serializers.CharField(
        help_text="when the P_Key or its index differs between sites: NCCL_IB_PKEY differs per site, per host "
        "(empty otherwise)"
    )
    sl_per_site_note = serializers.CharField(
        help_text="when the sites' QoS tables give the class different SLs: NCCL_IB_SL and UCX_IB_SL differ per "
        "site, with each site's SL (empty otherwise; the env file then sets neither)"
    )
    services = GuideServiceSerializer(
        many=True, help_text="service partitions the tenant's hosts reach (their hosts full, the tenant's limited)"
    )
