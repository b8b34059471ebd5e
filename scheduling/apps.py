from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    label = "scheduling"
    verbose_name = "GPU pools, quotas and reservations"
    default_auto_field = "django.db.models.BigAutoField"
