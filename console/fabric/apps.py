from django.apps import AppConfig


class FabricConfig(AppConfig):
    name = "console.fabric"
    label = "fabric"
    verbose_name = "Fabric operations"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from console.fabric import routing
        from console.fabric.models import Fabric, Site

        # the fabric → queue cache of this process: a moved fabric or renamed site routes anew
        for model in (Fabric, Site):
            post_save.connect(routing.forget, sender=model, dispatch_uid=f"routing.forget.save.{model.__name__}")
            post_delete.connect(routing.forget, sender=model, dispatch_uid=f"routing.forget.delete.{model.__name__}")
