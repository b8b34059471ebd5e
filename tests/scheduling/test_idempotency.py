"""``Idempotency-Key`` on POST /api/reservations/ and the extend/release/cancel actions: a retry
gets the first answer and never a second reservation, also when the duplicates run at once
(real transactions on PostgreSQL); other principals' keys are theirs; keys expire."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from console.tenancy.models import IdempotencyKey
from console.tenancy.tasks import prune_idempotency_keys_task
from scheduling.models import Quota, Reservation
from tests.needs import needs
from tests.scheduling.conftest import at, give_quota

HEADER = "HTTP_IDEMPOTENCY_KEY"


@pytest.fixture
def api(pool, tenant_a, admin_a, client_for):
    give_quota(tenant_a, pool, 64)
    return client_for(admin_a)


def reserve(api, pool, key: str | None, gpus: int = 8):
    headers = {HEADER: key} if key is not None else {}
    body = {"pool": pool.pk, "gpus": gpus, "start": at(1).isoformat(), "duration_minutes": 60}
    return api.post("/api/reservations/", body, format="json", **headers)


@pytest.mark.django_db
def test_a_retry_with_the_same_key_gets_the_first_answer_and_no_second_reservation(api, pool):
    key = str(uuid.uuid4())
    body = {"pool": pool.pk, "gpus": 8, "start": at(1).isoformat(), "duration_minutes": 60}
    first = api.post("/api/reservations/", body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert first.status_code == 201, first.content
    # when the client retries (it never saw the answer)
    again = api.post("/api/reservations/", body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    # then it gets the same status and body, marked as a replay, and there is one reservation
    assert again.status_code == 201 and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true"
    assert Reservation.objects.count() == 1
    # and a new key is a new request
    assert (
        api.post("/api/reservations/", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())).status_code == 201
    )
    assert Reservation.objects.count() == 2


@pytest.mark.django_db
def test_a_refusal_is_replayed_too(api, pool):
    key = str(uuid.uuid4())
    refused = reserve(api, pool, key, gpus=96)  # over the quota of 64
    assert refused.status_code == 409 and refused.json()["code"] == "over_quota"
    again = reserve(api, pool, key, gpus=96)
    assert (again.status_code, again.json()) == (409, refused.json())
    assert Reservation.objects.count() == 1  # the one stored rejection


@pytest.mark.django_db
def test_the_same_key_with_a_different_body_is_422(api, pool):
    key = str(uuid.uuid4())
    assert reserve(api, pool, key, gpus=8).status_code == 201
    other = reserve(api, pool, key, gpus=16)
    assert other.status_code == 422
    assert other.json()["code"] == "idempotency_key_reused" and "Idempotency-Key" in other.json()["fields"]
    assert Reservation.objects.count() == 1


@pytest.mark.django_db
def test_an_error_answer_keeps_no_key_so_the_corrected_retry_runs(api, pool):
    key = str(uuid.uuid4())
    bad = api.post("/api/reservations/", {"pool": pool.pk, "gpus": 8}, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert bad.status_code == 400
    assert not IdempotencyKey.objects.exists()
    assert reserve(api, pool, key).status_code == 201


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["", "x" * 256, "with space", "naïve"])
def test_a_malformed_key_is_400(api, pool, key):
    response = reserve(api, pool, key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["fields"]
    assert not Reservation.objects.exists()


@pytest.mark.django_db
def test_keys_belong_to_their_principal(api, pool, tenant_b, admin_b, client_for):
    give_quota(tenant_b, pool, 64)
    key = "shared-key"
    mine = reserve(api, pool, key)
    theirs = reserve(client_for(admin_b), pool, key)
    # then tenant B's request ran on its own: its own reservation, never A's answer
    assert mine.status_code == theirs.status_code == 201
    assert theirs.json()["id"] != mine.json()["id"] and theirs.json()["tenant"] == tenant_b.pk
    assert Reservation.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("verb", ["extend", "release", "cancel"])
def test_the_actions_replay_their_first_answer(api, pool, verb):
    created = reserve(api, pool, None).json()
    path = f"/api/reservations/{created['id']}/{verb}/"
    body = {"end": at(5).isoformat()} if verb == "extend" else {}
    key = str(uuid.uuid4())
    first = api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert first.status_code == 200, first.content
    # a retry with the key replays (without it, a second release/cancel is an illegal transition)
    again = api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert (again.status_code, again.json()) == (200, first.json())
    assert again["Idempotent-Replayed"] == "true"
    if verb != "extend":
        assert api.post(path, body, format="json").status_code == 409


@pytest.mark.django_db
def test_keys_expire_and_are_pruned_by_a_beat_task(api, pool):
    key = str(uuid.uuid4())
    assert reserve(api, pool, key).status_code == 201
    # given the key is past its time to live
    IdempotencyKey.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    # then the same key runs afresh
    assert reserve(api, pool, key).status_code == 201
    assert Reservation.objects.count() == 2
    IdempotencyKey.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert prune_idempotency_keys_task.apply().get() == 1
    assert not IdempotencyKey.objects.exists()
    schedule = settings.CELERY_BEAT_SCHEDULE["tenancy-prune-idempotency-keys"]
    assert schedule["task"] == "tenancy.prune_idempotency_keys"


@pytest.mark.django_db
@override_settings(IDEMPOTENCY_KEY_TTL_HOURS=2)
def test_the_time_to_live_is_a_setting(api, pool):
    reserve(api, pool, "ttl")
    row = IdempotencyKey.objects.get()
    assert dt.timedelta(hours=1.9) < row.expires_at - row.created_at <= dt.timedelta(hours=2)


# ---------------------------------------------------------------- concurrent duplicates


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return int(cursor.fetchone()[0])


def poll(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class QuotaHeld:
    """Holds the tenant's quota row locked in a transaction of its own, so a reservation request
    that has claimed its key stops inside its transaction until ``release``."""

    def __init__(self, quota_pk: int) -> None:
        self.locked, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(quota_pk,))

    def _run(self, quota_pk: int) -> None:
        try:
            with transaction.atomic():
                Quota.objects.select_for_update().get(pk=quota_pk)
                self.locked.set()
                self.release.wait(60)
        finally:
            connection.close()

    def __enter__(self) -> QuotaHeld:
        self.thread.start()
        assert self.locked.wait(30)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.thread.join(30)


def post_in_thread(api, pool, key: str, answers: list) -> threading.Thread:
    def run() -> None:
        try:
            response = reserve(api, pool, key)
            answers.append((response.status_code, response.json(), response.get("Retry-After")))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.django_db(transaction=True)
@needs("postgresql")
def test_two_requests_with_one_key_at_once_make_one_reservation_and_get_the_same_answer(api, pool, tenant_a):
    key = str(uuid.uuid4())
    answers: list = []
    with QuotaHeld(Quota.objects.get(tenant=tenant_a, pool=pool).pk):
        threads = [post_in_thread(api, pool, key, answers) for _ in range(2)]
        # both are inside their transactions at once: one holds the key and waits for the quota
        # row, the other waits for the key
        poll(lambda: lock_waiters() >= 2, "both requests to wait on locks")
        assert answers == []
    for thread in threads:
        thread.join(60)
    assert len(answers) == 2
    (status_1, body_1, _), (status_2, body_2, _) = answers
    assert status_1 == status_2 == 201 and body_1 == body_2
    assert Reservation.objects.count() == 1


@pytest.mark.django_db(transaction=True)
@needs("postgresql")
@override_settings(IDEMPOTENCY_WAIT_S=0.3)
def test_a_duplicate_that_waits_too_long_gets_409_in_progress_with_retry_after(api, pool, tenant_a):
    key = str(uuid.uuid4())
    first: list = []
    with QuotaHeld(Quota.objects.get(tenant=tenant_a, pool=pool).pk):
        thread = post_in_thread(api, pool, key, first)
        poll(lambda: IdempotencyKey.objects.count() == 0 and lock_waiters() >= 1, "the first request to wait")
        # when the duplicate arrives while the first is still running
        duplicate = reserve(api, pool, key)
        assert duplicate.status_code == 409 and duplicate["Retry-After"] == "1"
        assert duplicate.json()["code"] == "idempotency_key_in_progress"
    thread.join(60)
    assert first and first[0][0] == 201
    # then the retry the client was told to make gets the first answer
    retry = reserve(api, pool, key)
    assert (retry.status_code, retry.json()) == (201, first[0][1])
    assert Reservation.objects.count() == 1
