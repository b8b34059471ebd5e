"""``manage.py rotate_secrets``: every stored secret re-encrypted under the current keys.

After ``SECRET_KEY`` is rotated (the old one kept in ``SECRET_KEY_FALLBACKS``) or a key setting
(``CONSOLE_BMC_KEY``, ``CONSOLE_FABRIC_KEY``, ``CONSOLE_WEBHOOK_KEY``) is set for the first time,
the stored secrets are still under the old keys; this rewrites them, row by row under a lock, so
the fallback can then be dropped. Audited once with the counts; the secrets are never logged.
"""

from __future__ import annotations

from django.db import transaction

from console.fabric.models import FabricKeys
from console.notify.models import Webhook
from console.notify.signing import reencrypt_secret
from console.power.models import Bmc
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.crypto import box


def rotate(actor: Actor) -> dict[str, int]:
    """Re-encrypt BMC passwords, fabric keys and webhook secrets; returns how many of each."""
    bmc, fabric = box("bmc"), box("fabric")
    done = {"bmc_passwords": 0, "fabric_keys": 0, "webhook_secrets": 0}
    with transaction.atomic():
        for row in Bmc.objects.select_for_update().exclude(password_encrypted=""):
            row.password_encrypted = bmc.reencrypt(row.password_encrypted)
            row.save(update_fields=["password_encrypted"])
            done["bmc_passwords"] += 1
        for keys in FabricKeys.objects.select_for_update():
            for field in ("m_key_encrypted", "sm_key_encrypted", "sa_key_encrypted"):
                setattr(keys, field, fabric.reencrypt(getattr(keys, field)))
            keys.save(update_fields=["m_key_encrypted", "sm_key_encrypted", "sa_key_encrypted"])
            done["fabric_keys"] += 1
        for hook in Webhook.objects.select_for_update():
            hook.secret_encrypted = reencrypt_secret(hook.secret_encrypted)
            hook.save(update_fields=["secret_encrypted"])
            done["webhook_secrets"] += 1
        audit.record(actor, "console.secrets_rotated", object_type="console", object_id="secrets", after=done)
    return done
