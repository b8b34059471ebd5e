"""Notifications: per-tenant webhooks (signed, retried through Celery, logged per attempt) and
e-mail to members who opt in, for reservation events emitted by the layers above."""
