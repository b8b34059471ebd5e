"""SECRET_KEY rotated the Django way keeps every stored secret readable: BMC passwords, fabric
management keys and webhook secrets (including those stored under the webhooks' old scheme) decrypt
under SECRET_KEY_FALLBACKS, ``manage.py rotate_secrets`` re-encrypts them under the new key, after
which the fallback can go; a key that fits nothing is an error that says what to do."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from console.fabric import keys as fabric_keys
from console.fabric.models import FabricKeys
from console.notify.models import Webhook
from console.notify.signing import decrypt_secret, encrypt_secret
from console.power import crypto as bmc_crypto
from console.power.models import Bmc
from console.tenancy.crypto import CredentialError
from console.tenancy.models import AuditEntry
from scheduling.models import Node

pytestmark = pytest.mark.django_db

OLD, NEW = "old-secret-key-" + "o" * 40, "new-secret-key-" + "n" * 40


def legacy_webhook_token(secret: str, secret_key: str) -> str:
    """How webhook secrets were stored before: Fernet under sha256 of a label and SECRET_KEY."""
    key = hashlib.sha256(b"ibconsole.notify.webhook-secret:" + secret_key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(key)).encrypt(secret.encode()).decode()


def test_a_rotated_secret_key_keeps_every_stored_secret_readable(settings, prod_fabric, tenant_a):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    settings.CONSOLE_BMC_KEY = settings.CONSOLE_FABRIC_KEY = settings.CONSOLE_WEBHOOK_KEY = ""
    node = Node.objects.create(fabric=prod_fabric, name="gpu-1")
    bmc = Bmc.objects.create(
        node=node, address="https://bmc-1", username="root", password_encrypted=bmc_crypto.encrypt("calvin")
    )
    sm = fabric_keys.keys_for(prod_fabric)
    hook = Webhook.objects.create(
        tenant=tenant_a, name="new", url="https://example.com/h", secret_encrypted=encrypt_secret("whsec_new")
    )
    old_hook = Webhook.objects.create(
        tenant=tenant_a,
        name="old",
        url="https://example.com/o",
        secret_encrypted=legacy_webhook_token("whsec_old", OLD),
    )
    assert decrypt_secret(old_hook.secret_encrypted) == "whsec_old"  # the old scheme still reads

    # rotated without the fallback: an error that names the way out, not garbage
    settings.SECRET_KEY = NEW
    with pytest.raises(CredentialError, match="SECRET_KEY_FALLBACKS"):
        bmc_crypto.decrypt(bmc.password_encrypted)
    with pytest.raises(CredentialError):
        decrypt_secret(hook.secret_encrypted)

    # with the old key as a fallback everything reads, then rotate_secrets rewrites it all
    settings.SECRET_KEY_FALLBACKS = [OLD]
    assert bmc_crypto.decrypt(bmc.password_encrypted) == "calvin"
    assert fabric_keys.keys_for(prod_fabric) == sm
    out = io.StringIO()
    call_command("rotate_secrets", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"bmc_passwords": 1, "fabric_keys": 1, "webhook_secrets": 2}
    assert AuditEntry.objects.filter(action="console.secrets_rotated").count() == 1

    settings.SECRET_KEY_FALLBACKS = []  # the old key is gone for good
    bmc.refresh_from_db()
    assert bmc_crypto.decrypt(bmc.password_encrypted) == "calvin"
    assert fabric_keys.keys_for(prod_fabric) == sm
    assert {w.name: decrypt_secret(w.secret_encrypted) for w in Webhook.objects.all()} == {
        "new": "whsec_new",
        "old": "whsec_old",
    }
    stored = FabricKeys.objects.get(fabric=prod_fabric).m_key_encrypted
    assert "calvin" not in bmc.password_encrypted and f"{sm.m_key:x}" not in stored  # still encrypted
