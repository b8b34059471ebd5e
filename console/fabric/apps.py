from django.apps import AppConfig


class FabricConfig(AppConfig):
    name = "console.fabric"
    label = "fabric"
    verbose_name = "Fabric operations"
    default_auto_field = "django.db.models.BigAutoField"
