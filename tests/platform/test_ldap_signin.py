"""Sign-in through the company directory: a real slapd (tests/slapd.py) with people and groups,
the console's login form, and the groups mapped to roles and tenants (console.tenancy.directory).
Local accounts keep working when the directory is down (break-glass)."""

from __future__ import annotations

import ldap
import pytest

from console.tenancy.models import AuditEntry, Membership, Role, Tenant
from tests.needs import needs

pytestmark = [needs("ldap"), pytest.mark.django_db]

BASE = "dc=example,dc=org"
PEOPLE, GROUPS = f"ou=people,{BASE}", f"ou=groups,{BASE}"


def person(uid: str) -> str:
    return f"""dn: uid={uid},{PEOPLE}
objectClass: inetOrgPerson
uid: {uid}
cn: {uid.title()}
sn: {uid.title()}
mail: {uid}@example.org
userPassword: {uid}-directory-pass
"""


def group(cn: str, *members: str) -> str:
    lines = "".join(f"member: uid={m},{PEOPLE}\n" for m in members)
    return f"dn: cn={cn},{GROUPS}\nobjectClass: groupOfNames\ncn: {cn}\n{lines}"


LDIF = "\n".join(
    [
        f"dn: {BASE}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n",
        f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n",
        *(person(u) for u in ("alice", "carol", "dave", "erin", "frank")),
        group("ib-operators", "carol"),
        group("ib-auditors", "dave"),
        group("aurora-admins", "alice", "frank"),
        group("aurora-users", "erin"),
        group("borealis-admins", "frank"),
        group("unmapped", "erin"),
    ]
)
ROLES = {
    f"cn=ib-operators,{GROUPS}": "operator",
    f"cn=ib-auditors,{GROUPS}": "auditor",
    f"cn=aurora-admins,{GROUPS}": "tenant-admin:aurora",
    f"cn=borealis-admins,{GROUPS}": "tenant-admin:borealis",
}


@pytest.fixture
def directory(tmp_path, settings):
    from console.tenancy.directory_settings import ldap_settings
    from tests.slapd import slapd

    Tenant.objects.create(name="Aurora Labs", slug="aurora")
    Tenant.objects.create(name="Borealis AI", slug="borealis")
    with slapd(tmp_path / "slapd", LDIF) as server:
        env = {"CONSOLE_LDAP_URL": server.url, "CONSOLE_LDAP_USER_BASE": PEOPLE, "CONSOLE_LDAP_GROUP_BASE": GROUPS}
        for name, value in ldap_settings(env).items():
            setattr(settings, name, value)
        settings.CONSOLE_LDAP_ROLES = ROLES
        backends = list(settings.AUTHENTICATION_BACKENDS)
        settings.AUTHENTICATION_BACKENDS = [backends[0], "console.tenancy.directory.DirectoryBackend", *backends[1:]]
        yield server


def sign_in(client, username: str, password: str) -> bool:
    reply = client.post("/login/", {"username": username, "password": password})
    return reply.status_code == 302 and reply.headers["Location"] == "/"


def role_of(username: str) -> tuple[str, str | None]:
    row = Membership.objects.select_related("tenant").get(user__username=username)
    return row.role, row.tenant.slug if row.tenant else None


def test_directory_groups_decide_role_and_tenant_at_each_sign_in(directory, client):
    assert sign_in(client, "alice", "alice-directory-pass")
    assert role_of("alice") == (Role.TENANT_ADMIN, "aurora")
    assert client.get("/reservations/").status_code == 200  # signed in, as the tenant's admin
    client.logout()
    assert sign_in(client, "carol", "carol-directory-pass") and role_of("carol") == (Role.OPERATOR, None)
    client.logout()
    assert sign_in(client, "dave", "dave-directory-pass") and role_of("dave") == (Role.AUDITOR, None)
    client.logout()

    # refused: a wrong password; groups that map to nothing; admin of two tenants at once
    assert not sign_in(client, "alice", "not-her-password")
    assert not sign_in(client, "erin", "erin-directory-pass")
    assert not Membership.objects.filter(user__username="erin").exists()
    assert not sign_in(client, "frank", "frank-directory-pass")
    assert not Membership.objects.filter(user__username="frank").exists()

    # the directory changes: alice leaves the admins for the users; her next sign-in follows it
    directory.modify(f"cn=aurora-admins,{GROUPS}", [(ldap.MOD_DELETE, "member", [f"uid=alice,{PEOPLE}".encode()])])
    directory.modify(f"cn=aurora-users,{GROUPS}", [(ldap.MOD_ADD, "member", [f"uid=alice,{PEOPLE}".encode()])])
    from django.conf import settings

    settings.CONSOLE_LDAP_ROLES = {**ROLES, f"cn=aurora-users,{GROUPS}": "tenant-member:aurora"}
    assert sign_in(client, "alice", "alice-directory-pass")
    assert role_of("alice") == (Role.TENANT_MEMBER, "aurora")
    changes = AuditEntry.objects.filter(action__in=["member.create", "member.update"], object_repr__startswith="alice")
    assert [e.after["role"] for e in changes.order_by("pk")] == ["tenant-admin", "tenant-member"]
    assert all(e.actor_label == "directory" for e in changes)


def test_local_accounts_sign_in_when_the_directory_is_down(directory, client, make_user):
    make_user("break-glass", Role.OPERATOR, password="a-local-passphrase-1")
    assert sign_in(client, "break-glass", "a-local-passphrase-1")  # with the directory up
    client.logout()
    directory.stop()
    assert not sign_in(client, "alice", "alice-directory-pass")  # the directory is down: no 500
    assert sign_in(client, "break-glass", "a-local-passphrase-1")


def test_the_strongest_role_wins_and_a_bad_mapping_says_what_is_wrong():
    from console.tenancy.sso import DirectoryRefused, role_for

    mapping = {"CN=Ops,DC=x": "operator", "cn=a,dc=x": "tenant-admin:aurora", "cn=m,dc=x": "tenant-member:borealis"}
    assert role_for(["cn=a,dc=x", "cn=ops,dc=x"], mapping) == ("operator", None)  # DNs in any case
    assert role_for(["cn=m,dc=x", "cn=a,dc=x"], mapping) == ("tenant-admin", "aurora")
    with pytest.raises(DirectoryRefused, match="no group"):
        role_for(["cn=other,dc=x"], mapping)
    with pytest.raises(ValueError, match="unknown role 'admin'"):
        role_for(["cn=a,dc=x"], {"cn=a,dc=x": "admin"})
    with pytest.raises(ValueError, match="tenant roles name a tenant"):
        role_for(["cn=a,dc=x"], {"cn=a,dc=x": "tenant-admin"})


def test_the_environment_turns_the_directory_on():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {
        **os.environ,
        "CONSOLE_LDAP_URL": "ldap://ldap.example.org",
        "CONSOLE_LDAP_USER_BASE": PEOPLE,
        "CONSOLE_LDAP_GROUP_BASE": GROUPS,
        "CONSOLE_LDAP_ROLES": json.dumps(ROLES),
    }
    code = (
        "import json; from django.conf import settings; print(json.dumps([settings.AUTHENTICATION_BACKENDS, "
        "settings.AUTH_LDAP_SERVER_URI, settings.AUTH_LDAP_USER_SEARCH.base_dn, settings.CONSOLE_LDAP_ROLES]))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    backends, url, base, roles = json.loads(done.stdout.strip().splitlines()[-1])
    assert backends[0].startswith("axes.") and backends[1] == "console.tenancy.directory.DirectoryBackend"
    assert backends[2] == "django.contrib.auth.backends.ModelBackend"  # local accounts after the directory
    assert (url, base, roles) == ("ldap://ldap.example.org", PEOPLE, ROLES)
