"""A large ibnetdiscover import is a job a worker runs, never parsed in the web request: the API
answers 202 with the job (its phase and percent), the page follows it, the CLI says its phases;
a small one is still imported at once (201)."""

from __future__ import annotations

import datetime as dt
import functools
import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal
from designer import import_jobs, services
from designer.exports import export
from designer.models import Design, ImportJob
from designer.plan import plan

pytestmark = pytest.mark.django_db

SU1 = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
#: every import in these tests above this size is a job (the default, 256 KiB, is a few SUs)
SMALL = 20_000


@functools.cache
def dump(gpus: int = 256) -> str:
    return export(plan(SU1 | {"gpus": gpus}).graph, "ibnetdiscover")[0]


@pytest.fixture
def api(operator, client_for):
    return client_for(operator)


@pytest.fixture
def small_inline(settings):
    settings.CONSOLE_IMPORT_INLINE_BYTES = SMALL


def test_a_large_dump_is_answered_at_once_with_a_job_and_parsed_by_no_request(api, small_inline):
    # a dump that does not parse: imported in the request it would be a 400 naming the line
    garbage = "Switch 64 garbage\n" + "# padding\n" * 3_000
    answer = api.post("/api/designs/import/", {"name": "late", "text": garbage}, format="json")
    assert answer.status_code == 202, answer.content[:300]
    job = answer.json()
    assert job["state"] == "queued" and job["percent"] == 0 and job["design"] is None
    assert job["size_bytes"] == len(garbage.strip().encode())  # the API trims the text
    assert answer["Location"] == job["url"] == f"/api/designs/imports/{job['id']}/"
    assert not Design.objects.filter(name="late").exists()
    assert api.get(job["url"]).json()["state"] == "queued"
    # the worker's side fails it with the parser's words and the field, as a 400 would
    import_jobs.run(job["id"])
    failed = api.get(job["url"]).json()
    assert failed["state"] == "failed" and "line 1" in failed["error"] and "text" in failed["field_errors"]
    assert ImportJob.objects.get(pk=job["id"]).text == ""  # the input is not kept
    assert AuditEntry.objects.filter(action="design.import_queued", object_id=str(job["id"])).count() == 1


def test_a_small_dump_is_still_imported_in_the_request(api):
    text = dump()
    assert len(text.encode()) < 256 * 1024  # the default inline size
    answer = api.post("/api/designs/import/", {"name": "small", "text": text}, format="json")
    assert answer.status_code == 201 and answer.json()["summary"]["switches"]["total"] == 12
    assert not ImportJob.objects.exists()


def test_the_job_imports_what_an_inline_import_would(api, small_inline):
    text = dump()
    job = api.post("/api/designs/import/", {"name": "later", "text": text}, format="json").json()
    done = import_jobs.run(job["id"])
    assert done is not None and done.state == "done" and done.percent == 100 and done.text == ""
    body = api.get(job["url"]).json()
    design = api.get(f"/api/designs/{body['design']}/").json()
    assert design["name"] == "later" and design["summary"]["switches"]["total"] == 12
    assert design["summary"]["import"]["hosts"] == 32 and design["summary"]["cables"]["total"] == 512
    assert import_jobs.run(job["id"]).state == "done"  # a redelivered message changes nothing
    assert Design.objects.filter(name="later").count() == 1


def test_the_phases_are_said_in_order(operator):
    heard: list[tuple[str, int]] = []
    services.import_ibnetdiscover(
        Actor.for_user(operator),
        Principal.of(operator),
        name="phased",
        text=dump(),
        progress=lambda step, percent: heard.append((step, percent)),
    )
    assert [step for step, _ in heard] == [
        "parsing the dump",
        "naming nodes and switches",
        "inferring tiers, rails and scalable units",
        "building the graph",
        "validating",
        "saving the design",
    ]
    percents = [p for _, p in heard]
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] < 100


def test_names_are_checked_when_the_job_is_asked_for(api, small_inline):
    api.post("/api/designs/import/", {"name": "taken", "text": dump()}, format="json")
    assert Design.objects.filter(name="taken").count() == 0  # queued, not imported
    again = api.post("/api/designs/import/", {"name": "taken", "text": dump()}, format="json")
    assert again.status_code == 409 and "already running" in again.json()["detail"]
    Design.objects.create(name="existing", topology="imported")
    clash = api.post("/api/designs/import/", {"name": "existing", "text": dump()}, format="json")
    assert clash.status_code == 409 and clash.json()["fields"] == {"name": ["taken"]}


def test_who_may_follow_and_ask_for_an_import_job(api, small_inline, client_for, auditor, member_a, admin_a):
    job = api.post("/api/designs/import/", {"name": "rights", "text": dump()}, format="json").json()
    assert client_for(auditor).get(job["url"]).status_code == 200
    refused = client_for(auditor).post("/api/designs/import/", {"name": "aud", "text": dump()}, format="json")
    assert refused.status_code == 403
    for tenant in (member_a, admin_a):
        assert client_for(tenant).get(job["url"]).status_code in (403, 404)
        asked = client_for(tenant).post("/api/designs/import/", {"name": "t", "text": dump()}, format="json")
        assert asked.status_code in (403, 404)
    assert ImportJob.objects.count() == 1
    assert api.get("/api/designs/imports/999999/").status_code == 404


def test_a_job_no_worker_finished_is_failed_when_read(api, small_inline):
    job = api.post("/api/designs/import/", {"name": "lost", "text": dump()}, format="json").json()
    old = timezone.now() - dt.timedelta(seconds=import_jobs.STALE_AFTER_S + 1)
    ImportJob.objects.filter(pk=job["id"]).update(created_at=old, state="running")
    body = api.get(job["url"]).json()
    assert body["state"] == "failed" and "no worker finished it" in body["error"]
    assert ImportJob.objects.get(pk=job["id"]).text == ""
    # the name is free again
    assert api.post("/api/designs/import/", {"name": "lost", "text": dump()}, format="json").status_code == 202


def test_the_import_page_follows_a_large_import(operator, client, small_inline):
    client.force_login(operator)
    posted = client.post("/designer/import/", {"name": "paged", "dump_text": dump()})
    assert posted.status_code == 302
    job = ImportJob.objects.get(name="paged")
    assert posted["Location"] == f"/designer/import/{job.pk}/"
    following = client.get(posted["Location"]).content.decode()
    assert f'data-follow-job="/api/designs/imports/{job.pk}/"' in following
    assert 'data-testid="import-job-state">queued<' in following
    import_jobs.run(job.pk)
    done = client.get(posted["Location"])  # the design's import result, at its own URL
    assert (
        done.status_code == 302
        and done["Location"] == f"/designer/{ImportJob.objects.get(pk=job.pk).design_id}/imported/"
    )
    page = client.get(done["Location"]).content.decode()
    assert "data-follow-job" not in page
    assert 'data-testid="import-switches">12<' in page and 'data-testid="import-hosts">32<' in page
    bad = client.post("/designer/import/", {"name": "paged-bad", "dump_text": "Switch 64 x\n" + "#\n" * SMALL})
    bad_job = ImportJob.objects.get(name="paged-bad")
    import_jobs.run(bad_job.pk)
    failed = client.get(bad["Location"]).content.decode()
    assert "failed" in failed and "line 1" in failed and "data-follow-job" not in failed


def test_the_cli_says_the_phases_of_a_large_dump_on_stderr(operator, small_inline, tmp_path, capsys):
    path = tmp_path / "fabric.topo"
    path.write_text(dump())
    call_command("design", "import", "--file", str(path), "--name", "cli-large", "--json")
    out, err = capsys.readouterr()
    assert '"design_id"' in out and "parsing the dump" not in out
    assert [line.split("% ", 1)[1] for line in err.splitlines()][:2] == [
        "parsing the dump",
        "naming nodes and switches",
    ]
    with pytest.raises((CommandError, SystemExit)):
        call_command("design", "import", "--file", str(tmp_path / "missing"), "--name", "x")


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_job_and_the_api_shows_its_phases(worker, operator, client_for, settings):
    settings.CONSOLE_IMPORT_INLINE_BYTES = SMALL
    text = dump(2048)  # about 2 MB: a second or two of work, phases long enough to be seen
    api = client_for(operator)
    job = api.post("/api/designs/import/", {"name": "worked", "text": text}, format="json").json()
    seen: list[tuple[str, str, int]] = []
    deadline = time.monotonic() + 120
    while (body := api.get(job["url"]).json())["state"] in ("queued", "running"):
        seen.append((body["state"], body["step"], body["percent"]))
        assert time.monotonic() < deadline, seen[-5:]
        time.sleep(0.02)
    assert body["state"] == "done", body
    running = [(step, percent) for state, step, percent in seen if state == "running"]
    assert running, seen  # followed while it ran
    assert [p for _, p in running] == sorted(p for _, p in running)
    design = Design.objects.get(pk=body["design"])
    assert design.revisions.get().summary["import"]["hcas"] == 2048


def test_the_import_page_is_a_page_and_its_result_has_a_url(operator, auditor, member_a, client):
    client.force_login(operator)
    form = client.get("/designer/import/")
    assert form.status_code == 200 and 'data-testid="import-form"' in form.content.decode()
    assert 'data-testid="designer-tabs"' in client.get("/designer/").content.decode()
    # a small dump: imported in the request, then the result's own URL (a reload posts nothing)
    posted = client.post("/designer/import/", {"name": "inline", "dump_text": dump()})
    design = Design.objects.get(name="inline")
    assert posted.status_code == 302 and posted["Location"] == f"/designer/{design.pk}/imported/"
    page = client.get(posted["Location"]).content.decode()
    # what needs a look first; the "no cable type" noise folded with its count (512 links)
    assert page.index('data-testid="import-result"') < page.index('data-testid="import-noise"')
    assert "512 notes that need no action (no-cable)" in page
    assert 'data-testid="import-warning">no-cable' not in page
    # bad input: the form again, with the error and what was typed
    bad = client.post("/designer/import/", {"name": "again", "dump_text": "Switch 64 garbage"})
    assert bad.status_code == 400 and "line 1" in bad.content.decode() and 'value="again"' in bad.content.decode()
    # a design that was not imported has no import result; other verbs are refused plainly
    planned = Design.objects.create(name="planned", topology="fat-tree")
    assert client.get(f"/designer/{planned.pk}/imported/").status_code == 404
    assert client.put("/designer/import/").status_code == 405
    # auditors read the page without the form; tenants do not see it
    client.force_login(auditor)
    assert 'data-testid="import-form"' not in client.get("/designer/import/").content.decode()
    client.force_login(member_a)
    assert client.get("/designer/import/").status_code == 404
