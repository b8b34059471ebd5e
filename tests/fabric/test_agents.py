"""Agent credentials and state without a lab: tokens shown once and stored hashed, only
operators create and revoke them, a silent agent raises an alarm that clears when it is heard
again, and a fabric without a connected agent makes a push wait (a transient error) instead of
failing it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric.agents import rpc, services
from console.fabric.models import Fabric, FabricAgent
from console.telemetry.agents import watch
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor
from console.tenancy.errors import Forbidden
from console.tenancy.models import AuditEntry, Principal, Role
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture
def fabric(prod_fabric) -> Fabric:
    return prod_fabric


def test_a_token_is_shown_once_stored_hashed_and_resolves_until_revoked(fabric, tenant_a):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    assert made.token.startswith("ibca_") and made.token.split("_", 2)[2] not in made.agent.secret_hash
    assert services.resolve_agent(made.token).pk == made.agent.pk
    with pytest.raises(services.AgentRefused):
        services.resolve_agent(made.token[:-2] + "xx")
    with pytest.raises(Forbidden):
        services.create_agent(ACTOR, Principal(None, Role.TENANT_ADMIN, tenant_a.pk), fabric, name="x")
    services.revoke_agent(ACTOR, OPERATOR, made.agent)
    with pytest.raises(services.AgentRefused, match="revoked"):
        services.resolve_agent(made.token)
    assert [e.action for e in AuditEntry.objects.filter(action__startswith="agent.").order_by("pk")] == [
        "agent.create",
        "agent.revoke",
    ]
    assert "secret_hash" not in AuditEntry.objects.get(action="agent.create").after


def test_a_silent_agent_raises_an_alarm_cleared_when_it_is_heard_again(fabric, settings):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    services.heartbeat(made.agent.pk, {"state": "MASTER", "priority": 0, "guid": "0x0002c90300000001"})
    watch()
    assert not FabricEvent.objects.filter(kind="agent_silent").exists()
    old = timezone.now() - dt.timedelta(seconds=settings.AGENT_SILENT_AFTER_S + 1)
    FabricAgent.objects.filter(pk=made.agent.pk).update(last_seen=old)
    watch()
    watch()  # idempotent
    event = FabricEvent.objects.get(kind="agent_silent")
    assert event.severity == "critical" and "smhost1" in event.message and event.status == "open"
    services.heartbeat(made.agent.pk, {"state": "MASTER"})
    watch()
    event.refresh_from_db()
    assert event.status == "resolved"


def test_without_a_connected_agent_a_call_waits_as_a_transient_error(fabric):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    with pytest.raises(rpc.AgentLost, match="none connected"):
        rpc.call(fabric, "sminfo", {})
    services.heartbeat(made.agent.pk, {"state": "MASTER"})  # the database says connected, no socket is
    with pytest.raises(rpc.AgentLost, match="did not take sminfo"):
        rpc.call(fabric, "sminfo", {})


def test_an_sm_that_stops_answering_is_an_alarm_and_its_return_reconciles_the_fabric(
    fabric, django_capture_on_commit_callbacks, monkeypatch
):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    services.heartbeat(made.agent.pk, {"state": "MASTER"})
    services.heartbeat(made.agent.pk, {"state": "NO ANSWER"})  # OpenSM killed, the agent alive
    watch()
    event = FabricEvent.objects.get(kind="sm_state", subject="sm-smhost1")
    assert event.severity == "critical" and "does not answer" in event.message
    published: list[int] = []
    monkeypatch.setattr("console.fabric.enqueue.publish_reconcile", published.append)
    with django_capture_on_commit_callbacks(execute=True):
        services.heartbeat(made.agent.pk, {"state": "MASTER"})  # back
    assert published == [fabric.pk]
    with django_capture_on_commit_callbacks(execute=True):
        services.heartbeat(made.agent.pk, {"state": "MASTER"})  # still up: nothing more
    assert published == [fabric.pk]
    watch()
    event.refresh_from_db()
    assert event.status == "resolved"


def test_the_end_of_a_socket_the_agent_already_replaced_leaves_it_connected(fabric):
    # kill -9 and a restart: the new socket says hello before the server notices the old one's end
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    services.hello(made.agent, fabric=fabric.name, host="sm1", version="1", channel="old")
    services.hello(made.agent, fabric=fabric.name, host="sm1", version="1", channel="new")
    services.disconnected(made.agent.pk, "old")
    assert FabricAgent.objects.get(pk=made.agent.pk).connected
    assert rpc.agent_for(fabric).pk == made.agent.pk
    services.disconnected(made.agent.pk, "new")
    assert not FabricAgent.objects.get(pk=made.agent.pk).connected


def test_what_a_push_waits_for_is_said_per_fabric(fabric, su1_revision):  # noqa: F811 (fixture)
    direct = Fabric.objects.create(name="opensm-here", driver="opensm", revision=su1_revision)
    lab = Fabric.objects.create(name="lab", driver="lab", revision=su1_revision)
    assert services.waiting_for_sm([fabric.pk, direct.pk]) == {fabric.pk: "waiting for the subnet manager's agent"}
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    services.heartbeat(made.agent.pk, {"state": "NO ANSWER"})
    assert services.waiting_for_sm([fabric.pk]) == {fabric.pk: "waiting for the subnet manager on smhost1"}
    services.heartbeat(made.agent.pk, {"state": "MASTER"})
    assert services.waiting_for_sm([fabric.pk]) == {}
    # a lab's SM host is reached through its agent too
    assert services.waiting_for_sm([lab.pk]) == {lab.pk: "waiting for the subnet manager's agent"}


def test_the_cli_makes_lists_and_revokes_an_agent_with_the_token_shown_once(fabric):
    import io
    import json

    from django.core.management import call_command

    out = io.StringIO()
    call_command("fabric", "agent", "create", "--fabric", fabric.name, "--name", "smhost1", "--json", stdout=out)
    made = json.loads(out.getvalue())
    assert made["name"] == "smhost1" and services.resolve_agent(made["token"]).pk == made["id"]
    out = io.StringIO()
    call_command("fabric", "agent", "list", "--fabric", fabric.name, "--json", stdout=out)
    (listed,) = json.loads(out.getvalue())["agents"]
    assert listed["name"] == "smhost1" and "token" not in listed and listed["connected"] is False
    call_command("fabric", "agent", "revoke", "--fabric", fabric.name, "--name", "smhost1", stdout=io.StringIO())
    with pytest.raises(services.AgentRefused, match="revoked"):
        services.resolve_agent(made["token"])
    out = io.StringIO()
    call_command("fabric", "agent", "list", "--fabric", fabric.name, stdout=out)
    assert "smhost1" in out.getvalue() and "revoked" in out.getvalue()


def test_an_opensm_restarted_between_two_heartbeats_reconciles_the_fabric(
    fabric, django_capture_on_commit_callbacks, monkeypatch
):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    published: list[int] = []
    monkeypatch.setattr("console.fabric.enqueue.publish_reconcile", published.append)
    with django_capture_on_commit_callbacks(execute=True):
        services.heartbeat(made.agent.pk, {"state": "MASTER", "activity": 400})
        services.heartbeat(made.agent.pk, {"state": "MASTER", "activity": 900})  # running on
    assert published == []
    with django_capture_on_commit_callbacks(execute=True):
        services.heartbeat(made.agent.pk, {"state": "MASTER", "activity": 35})  # started again
    assert published == [fabric.pk]
    assert FabricAgent.objects.get(pk=made.agent.pk).sm_activity == 35


def test_a_takeover_is_what_the_agent_saw_not_a_master_back_from_its_own_restart(fabric):
    made = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost1")
    pk = made.agent.pk
    services.heartbeat(pk, {"state": "MASTER", "took_over": False})
    # its own OpenSM restarted (a new sm_key): DISCOVERING, then MASTER again: no takeover
    services.heartbeat(pk, {"state": "DISCOVERING", "took_over": False})
    services.heartbeat(pk, {"state": "MASTER", "took_over": False})
    assert FabricAgent.objects.get(pk=pk).master_since is None
    # a standby that became master says so
    services.heartbeat(pk, {"state": "STANDBY", "took_over": False})
    services.heartbeat(pk, {"state": "DISCOVERING", "took_over": False})
    services.heartbeat(pk, {"state": "MASTER", "took_over": True})
    assert FabricAgent.objects.get(pk=pk).master_since is not None
    # an older agent (no flag): any return to MASTER from another state counts, as before
    other = services.create_agent(ACTOR, OPERATOR, fabric, name="smhost2").agent.pk
    services.heartbeat(other, {"state": "STANDBY"})
    services.heartbeat(other, {"state": "MASTER"})
    assert FabricAgent.objects.get(pk=other).master_since is not None
