from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "console.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.telemetry import agents, isolation, power, sites, validation_tasks  # noqa: F401 (agents: its task)

        isolation.connect()
        validation_tasks.connect()
        power.connect()
        sites.connect()
