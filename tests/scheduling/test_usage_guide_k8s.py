"""How to use a reservation from Kubernetes: the NetworkAttachmentDefinition of ib-sriov-cni with
the reservation's P_Key, on the page (with a copy button) and in the API, valid against the
published NAD CRD and ib-sriov-cni's configuration (tests/designer/schemas)."""

from __future__ import annotations

import html
import json
import re

import jsonschema
import pytest
import yaml
from django.urls import reverse

from console.fabric.services import vguid_range
from console.tenancy import actions
from console.tenancy.context import Actor
from console.tenancy.models import Principal
from scheduling.models import Reservation
from tests.designer import k8s_schemas
from tests.scheduling.test_reservation_pages import booked, logged_in  # noqa: F401  (fixture)
from tests.ufm.test_ufm_api import basic

pytestmark = pytest.mark.django_db
NETCONF = jsonschema.Draft202012Validator(k8s_schemas.load("ib-sriov-cni.netconf.schema.yaml"))


def check_nad(text: str, pkey: int, name: str) -> dict:
    """The snippet is one NAD that the CRD accepts, whose CNI config ib-sriov-cni accepts."""
    doc = yaml.safe_load(text)
    assert k8s_schemas.errors(doc) == []
    assert doc["metadata"]["name"] == name
    assert doc["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
    config = json.loads(doc["spec"]["config"])
    NETCONF.validate(config)
    assert config["type"] == "ib-sriov" and config["name"] == name
    assert int(config["pkey"], 16) == pkey  # the reservation's key, without the membership bit
    return config


def test_page_and_api_give_the_reservations_network_attachment(client, client_for, admin_a, booked):  # noqa: F811
    mine, _ = booked
    page = logged_in(client, admin_a).get(reverse("web:reservation-use", args=[mine.pk])).content.decode()
    shown = re.search(r'<pre id="use-nad" data-testid="use-nad">(.*?)</pre>', page, re.S)
    assert shown is not None and 'data-copy="use-nad"' in page
    config = check_nad(html.unescape(shown.group(1)), mine.pkey, f"res-{mine.pk}")
    assert config["ibKubernetesEnabled"] is True

    body = client_for(admin_a).get(f"/api/reservations/{mine.pk}/usage-guide/").json()
    assert body["network_attachment"] == html.unescape(shown.group(1))
    assert body["partition_name"] == f"res-{mine.pk}"


def test_the_schemas_refuse_what_ib_sriov_cni_would_not_read():
    good = {"cniVersion": "0.3.1", "type": "ib-sriov", "name": "res-1", "pkey": "0x0005"}
    NETCONF.validate(good)
    for bad in ({**good, "pKey": "0x5"}, {**good, "pkey": 5}, {**good, "type": "sriov"}, {**good, "pkey": "0x18005"}):
        assert list(NETCONF.iter_errors(bad)), bad
    nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": "res-1"}}
    assert k8s_schemas.errors({**nad, "spec": {"config": "{}"}}) == []
    assert k8s_schemas.errors({**nad, "spec": {"config": {"type": "ib-sriov"}}})  # config is a string
    assert k8s_schemas.errors({**nad, "metadata": {"name": "Res_1"}, "spec": {"config": "{}"}})


def test_the_ib_kubernetes_guid_pool_is_the_reservations_own_vguid_range(client, client_for, admin_a, booked):  # noqa: F811
    mine, other = booked
    body = client_for(admin_a).get(f"/api/reservations/{mine.pk}/usage-guide/").json()
    config_map, secret = yaml.safe_load_all(body["ib_kubernetes_config"])
    data = config_map["data"]
    assert data["DAEMON_SM_PLUGIN"] == "ufm"
    assert (data["GUID_POOL_RANGE_START"], data["GUID_POOL_RANGE_END"]) == (body["vguid_start"], body["vguid_end"])
    assert secret["metadata"]["name"] == "ib-kubernetes-ufm-secret" and secret["stringData"]["UFM_USERNAME"]
    # 02:C0:FF:EE (the default prefix) | reservation id (20 bits) | 12 bits of VFs, as ib-kubernetes spells GUIDs
    first = int(body["vguid_start"].replace(":", ""), 16)
    last = int(body["vguid_end"].replace(":", ""), 16)
    assert (first >> 32, (first >> 12) & 0xFFFFF, first & 0xFFF, last - first) == (0x02C0FFEE, mine.pk, 0, 4095)
    assert body["env"]["IBC_VGUID_RANGE_START"] == body["vguid_start"]
    # another reservation's range does not overlap
    theirs = vguid_range(other.pk)
    assert theirs is not None and (theirs.last < first or theirs.first > last)
    page = logged_in(client, admin_a).get(reverse("web:reservation-use", args=[mine.pk])).content.decode()
    shown = re.search(r'<pre id="use-ibk8s" data-testid="use-ibk8s">(.*?)</pre>', page, re.S)
    assert shown is not None and html.unescape(shown.group(1)) == body["ib_kubernetes_config"]


def test_the_secret_names_the_tenants_user_and_a_token_which_the_ufm_api_takes_as_basic(
    client_for,
    admin_a,
    member_a,
    operator,
    booked,  # noqa: F811
):
    mine, _ = booked
    Reservation.objects.filter(pk=mine.pk).update(created_by=admin_a)
    # read by an operator: still the tenant's user, and a token asked for, never a password
    body = client_for(operator).get(f"/api/reservations/{mine.pk}/usage-guide/").json()
    _, secret = yaml.safe_load_all(body["ib_kubernetes_config"])
    assert secret["stringData"]["UFM_USERNAME"] == "admin-a"
    assert (
        "API token" in secret["stringData"]["UFM_PASSWORD"]
        and "your password" not in secret["stringData"]["UFM_PASSWORD"]
    )
    # what ib-kubernetes does with it: HTTP Basic, the user and one of its tokens
    _, token = actions.issue_token(Actor.for_user(admin_a), Principal.of(admin_a), user=admin_a, name="ib-k8s")

    assert basic("admin-a", token).get("/ufmRest/resources/pkeys").status_code == 200
    assert basic("member-a", token).get("/ufmRest/resources/pkeys").status_code == 401  # not member-a's token
    assert basic("admin-a", token[:-2] + "xx").get("/ufmRest/resources/pkeys").status_code == 401
