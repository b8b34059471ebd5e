"""Login lockout and throttling: a username is locked for the address its failures came from
(django-axes, refused even with the right password until an operator unlocks it or the cool-off
passes); an address with many failures is throttled, never locked: a right password of another
user still signs in from it. All audited."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from console.tenancy.models import AuditEntry, Role

pytestmark = pytest.mark.django_db


def _login(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def test_sixty_wrong_passwords_lock_the_user_until_an_operator_unlocks(make_user, tenant_a, operator, settings):
    # given a user and an attacker who tries 60 wrong passwords from one address
    make_user("victim", Role.TENANT_MEMBER, tenant_a, password="right-horse-battery")
    attacker = Client(REMOTE_ADDR="198.51.100.10")
    answers = [_login(attacker, "victim", f"wrong-{i}").status_code for i in range(60)]

    # then the answers turn to 429 at the limit, and the right password is refused from there
    limit = settings.AXES_FAILURE_LIMIT
    assert answers[: limit - 1] == [200] * (limit - 1)
    assert set(answers[limit - 1 :]) == {429}
    refused = _login(attacker, "victim", "right-horse-battery")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert b'data-testid="locked-out"' in refused.content
    assert "_auth_user_id" not in attacker.session
    # but not from the owner's own address: someone else's failures lock nobody out
    owner = Client(REMOTE_ADDR="203.0.113.5")
    assert _login(owner, "victim", "right-horse-battery").status_code == 302
    owner.logout()

    # and the lockout is audited once, and the operators' page shows it
    lockouts = AuditEntry.objects.filter(action="login.lockout")
    assert [e.after["username"] for e in lockouts if e.after["username"] == "victim"] == ["victim"]
    ops = Client()
    ops.force_login(operator)
    page = ops.get("/logins/locked/")
    assert b'data-kind="username" data-value="victim"' in page.content

    # when an operator unlocks it
    response = ops.post("/logins/locked/unlock/", {"kind": "username", "value": "victim"})
    assert response.status_code == 302

    # then the right password works again from there, and the unlock is audited with the operator's name
    assert _login(attacker, "victim", "right-horse-battery").status_code == 302
    unlock = AuditEntry.objects.get(action="login.unlock")
    assert unlock.actor_label == "op" and unlock.after["username"] == "victim"
    assert b'data-value="victim"' not in ops.get("/logins/locked/").content


def test_one_address_guessing_many_usernames_is_throttled_not_locked(make_user, tenant_a, operator, settings):
    settings.CONSOLE_LOGIN_ADDRESS_LIMIT = 3  # each failure hashes a password: keep the test short
    make_user("carol", Role.TENANT_MEMBER, tenant_a, password="right-horse-battery")
    attacker = Client(REMOTE_ADDR="198.51.100.11")
    answers = [_login(attacker, f"user-{i}", "guess").status_code for i in range(5)]
    # the address's wrong guesses turn to 429 with Retry-After once it reached the limit
    assert answers == [200, 200, 429, 429, 429]
    throttled = _login(attacker, "user-9", "guess")
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0
    assert b'data-testid="throttled"' in throttled.content
    # a real account's right password still signs in from it (a shared proxy, a jump host)
    assert _login(attacker, "carol", "right-horse-battery").status_code == 302
    assert AuditEntry.objects.filter(action="login.throttle", after__ip_address="198.51.100.11").count() == 1
    # the operators see the address as throttled (and no username: each failed once)
    ops = Client()
    ops.force_login(operator)
    page = ops.get("/logins/locked/").content.decode()
    assert 'data-kind="ip_address" data-value="198.51.100.11"' in page and "(throttled)" in page
    assert 'data-kind="username"' not in page


def test_a_strangers_failures_never_lock_a_colleague_out(make_user, tenant_a, settings):
    """Ten failures for a name that does not exist, from the office's one address, then alice
    (behind the same proxy) signs in with her password: measured as the bug, now refused."""
    make_user("alice", Role.TENANT_ADMIN, tenant_a, password="right-horse-battery")
    office = Client(REMOTE_ADDR="192.0.2.44")
    for i in range(settings.AXES_FAILURE_LIMIT):
        _login(office, "no-such-user", f"guess-{i}")
    assert _login(office, "no-such-user", "guess").status_code == 429  # that name is locked there
    assert _login(office, "alice", "right-horse-battery").status_code == 302


def test_a_lockout_lifts_by_itself_after_the_cool_off(make_user, tenant_a, settings):
    settings.AXES_FAILURE_LIMIT = 3  # each failure hashes a password: keep the test short
    settings.AXES_COOLOFF_TIME = 1.5 / 3600  # 1.5 s, in hours
    make_user("dave", Role.TENANT_MEMBER, tenant_a, password="right-horse-battery")
    client = Client(REMOTE_ADDR="198.51.100.12")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "dave", "wrong")
    assert _login(client, "dave", "right-horse-battery").status_code == 429
    deadline = time.monotonic() + 10
    status = 429
    while status == 429 and time.monotonic() < deadline:
        time.sleep(0.2)
        status = _login(client, "dave", "right-horse-battery").status_code
    assert status == 302


def test_only_operators_unlock(make_user, tenant_a, auditor, settings):
    settings.AXES_FAILURE_LIMIT = 3  # each failure hashes a password: keep the test short
    make_user("erin", Role.TENANT_MEMBER, tenant_a, password="right-horse-battery")
    client = Client(REMOTE_ADDR="198.51.100.13")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _login(client, "erin", "wrong")
    viewer = Client()
    viewer.force_login(auditor)
    page = viewer.get("/logins/locked/")
    assert b'data-value="erin"' in page.content and b'data-testid="unlock"' not in page.content
    assert viewer.post("/logins/locked/unlock/", {"kind": "username", "value": "erin"}).status_code == 403
    assert _login(client, "erin", "right-horse-battery").status_code == 429
    assert not AuditEntry.objects.filter(action="login.unlock").exists()


def test_tenants_do_not_see_the_locked_logins_page(admin_a):
    client = Client()
    client.force_login(admin_a)
    assert client.get("/logins/locked/").status_code == 404
