from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "console.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.tenancy import signals  # noqa: F401  (Celery correlation-id hooks, lockout audit)
