"""Every task beat publishes exists and can be sent: its soft time limit is below its hard one
(Celery refuses to publish it otherwise, and beat then logs an error every period: the isolation
audit's schedule did exactly that before this test)."""

from __future__ import annotations

from django.conf import settings

from console.celery import app


def test_every_scheduled_task_exists_with_limits_celery_accepts():
    assert settings.CELERY_BEAT_SCHEDULE, "beat has a schedule"
    app.loader.import_default_modules()  # what a worker does at start: every app's tasks
    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        task = app.tasks.get(entry["task"])
        assert task is not None, f"{name}: no task {entry['task']}"
        hard = task.time_limit if task.time_limit is not None else app.conf.task_time_limit
        soft = task.soft_time_limit if task.soft_time_limit is not None else app.conf.task_soft_time_limit
        if hard is not None and soft is not None:
            assert soft <= hard, f"{name}: soft time limit {soft} s over the hard {hard} s"
