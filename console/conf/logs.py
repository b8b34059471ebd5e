"""Logging settings from the environment: one plain stream, ``LOG_LEVEL`` (default INFO), and the
noisy loggers (the beat's ticks, each task's received/succeeded lines, uvicorn's access lines)
only with ``LOG_LEVEL=DEBUG``. Imported by console.settings."""

from __future__ import annotations

import os

LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO").upper()
NOISY_LOGGERS = ("celery.beat", "celery.app.trace", "celery.worker.strategy", "uvicorn.access")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Quiet by default, problems always printed: the beat's ticks and every task's
        # received/succeeded lines (about 80 a minute) and uvicorn's access lines, unless
        # LOG_LEVEL=DEBUG asks for everything.
        **{name: {"level": "WARNING"} for name in NOISY_LOGGERS if LOG_LEVEL != "DEBUG"},
    },
}
