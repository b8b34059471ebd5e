"""Every console page renders for the roles that may see it, with well-formed head markup."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def design_id(operator):
    from console.tenancy.context import Actor
    from console.tenancy.models import Principal
    from designer import services

    design, _ = services.create_design(
        Actor.for_user(operator),
        Principal.of(operator),
        name="pages",
        options={"topology": "rail-optimized", "gpus": 256},
    )
    return design.pk


def _pages(design_id: int) -> list[str]:
    return [
        reverse("web:home"),
        reverse("web:audit"),
        reverse("web:tenants"),
        reverse("web:tokens"),
        reverse("web:designer"),
        reverse("web:designer-design", args=[design_id]),
    ]


def test_operator_pages_render_with_clean_titles_and_body_class(client, operator, design_id):
    client.force_login(operator)
    for url in _pages(design_id):
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        title = re.search(r"<title>(.*?)</title>", html, re.S).group(1)
        assert "<" not in title, (url, title)
        body = re.search(r"<body[^>]*>", html).group(0)
        assert body.count('"') == 2, (url, body)  # one class attribute, nothing leaked into it


def test_tenant_member_gets_404_for_operator_pages(client, member_a, design_id):
    client.force_login(member_a)
    for url in _pages(design_id)[1:3] + _pages(design_id)[4:]:
        assert client.get(url).status_code == 404, url
    assert client.get(reverse("web:home")).status_code == 200
