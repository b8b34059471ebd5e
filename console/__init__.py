"""The InfiniBand console Django project: settings, URLs, ASGI/WSGI entry points and Celery app."""

from console.celery import app as celery_app

__all__ = ["celery_app"]
