from django.apps import AppConfig


class PowerConfig(AppConfig):
    """Node BMCs, power actions and their history."""

    name = "console.power"
    label = "power"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from console.power import receivers, routing

        receivers.connect()
        routing.connect()
