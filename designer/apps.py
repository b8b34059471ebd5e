from django.apps import AppConfig


class DesignerConfig(AppConfig):
    name = "designer"
    label = "designer"
    verbose_name = "Fabric designer"
    default_auto_field = "django.db.models.BigAutoField"
