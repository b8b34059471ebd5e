"""``manage.py operator create NAME``: the first operator of a fresh console, as the deployment
guide says to make it (no shell, no role-less superuser)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from console.tenancy.models import AuditEntry, Membership, Role

pytestmark = pytest.mark.django_db


def test_an_operator_is_made_from_a_password_on_stdin_and_can_sign_in(monkeypatch, client):
    monkeypatch.setattr("sys.stdin", io.StringIO("Corr3ct-horse-battery\n"))
    out = io.StringIO()
    call_command("operator", "create", "firstop", "--password-stdin", stdout=out)
    assert "operator firstop created" in out.getvalue()
    membership = Membership.objects.get(user__username="firstop")
    assert membership.role == Role.OPERATOR and membership.tenant is None
    signed_in = client.post("/login/", {"username": "firstop", "password": "Corr3ct-horse-battery"})
    assert signed_in.status_code == 302, signed_in.content[:300]
    assert client.get("/api/fabrics/").status_code == 200  # an operator's read
    assert AuditEntry.objects.filter(action="member.create", object_repr__contains="firstop").exists()


def test_a_weak_password_a_taken_name_and_no_terminal_are_refused_with_the_reason(monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    with pytest.raises(CommandError, match="too short"):
        call_command("operator", "create", "weak", "--password-stdin")
    assert not Membership.objects.filter(user__username="weak").exists()
    monkeypatch.setattr("sys.stdin", io.StringIO("Corr3ct-horse-battery\n"))
    call_command("operator", "create", "twice", "--password-stdin", stdout=io.StringIO())
    monkeypatch.setattr("sys.stdin", io.StringIO("Corr3ct-horse-battery\n"))
    with pytest.raises(CommandError, match="exists"):
        call_command("operator", "create", "twice", "--password-stdin")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal, nothing piped
    with pytest.raises(CommandError, match="no terminal"):
        call_command("operator", "create", "nobody")
