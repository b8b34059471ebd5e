from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """GPU pools, quotas and reservations; registers scheduling's hooks with the fabric layer."""

    name = "scheduling"
    label = "scheduling"
    verbose_name = "GPU pools, quotas and reservations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register with :mod:`console.fabric.hooks`. Django runs ``ready()`` in every process
        (web, Celery worker, management commands, tests) before any task or request is served."""
        from scheduling import fabric_hooks  # models must be loaded first: ready() is the place

        fabric_hooks.register()
