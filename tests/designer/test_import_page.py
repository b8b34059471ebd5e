"""The designer page's import form: operators import (dump + node-name map), others cannot."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from designer.exports import export
from designer.models import Design
from designer.plan import plan

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def dump() -> bytes:
    return export(plan({"topology": "rail-optimized", "gpus": 256}).graph, "ibnetdiscover")[0].encode()


def post(client, name: str, dump: bytes, names: bytes | None = None):
    data = {"name": name, "dump": SimpleUploadedFile("fabric.topo", b"\xef\xbb\xbf" + dump)}
    if names is not None:
        data["node_name_map"] = SimpleUploadedFile("names.map", names)
    return client.post(reverse("web:designer-import"), data)


def test_operator_imports_with_a_map_and_sees_one_line_per_kind(client, operator, dump):
    client.force_login(operator)
    guid = next(line for line in dump.decode().splitlines() if line.startswith("caguid=")).split("=", 1)[1]
    response = post(client, "page-import", dump, f'{guid} "site-host mlx5_0"\n'.encode())
    design = Design.objects.get(name="page-import")
    assert response.status_code == 302 and response["Location"] == f"/designer/{design.pk}/imported/"
    html = client.get(response["Location"]).content.decode()
    assert any(n["name"] == "site-host" for n in design.revisions.get(number=1).graph["nodes"])
    assert 'data-testid="import-switches">12<' in html and 'data-testid="import-tier-leaf">8<' in html
    # one line per kind: those that need a look, then the noise folded with its count
    shown = html.count('data-testid="import-warning"') + html.count('data-testid="import-note"')
    assert shown == len(design.revisions.get(number=1).summary["warnings"])
    assert reverse("web:designer-design", args=[design.pk]) in html


def test_malformed_dump_is_refused_with_its_line(client, operator, dump):
    client.force_login(operator)
    bad = dump.replace(b"lid 0 4xNDR", b"lid -1 4xNDR", 1)
    response = post(client, "page-bad", bad)
    assert response.status_code == 400 and "line " in response.content.decode()
    assert "LID" in response.content.decode() and not Design.objects.filter(name="page-bad").exists()


@pytest.mark.parametrize(("who", "status"), [("auditor", 403), ("member_a", 404)])
def test_only_operators_import(client, request, who, status, dump):
    """The auditor reads the designer, so the import is refused (403); for a tenant it does not exist."""
    client.force_login(request.getfixturevalue(who))
    assert post(client, f"page-{who}", dump).status_code == status
    assert not Design.objects.filter(name=f"page-{who}").exists()
