"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256, the ``cryptography`` package) under a key
from the environment, or, when none is set, one derived from ``SECRET_KEY`` with HKDF-SHA256 and
a label of its own (so a derived key is good for one kind of secret only). Used for BMC
passwords (``console.power``), the fabrics' management keys (``console.fabric``) and webhook
secrets (``console.notify``): :func:`box` gives each kind's.

Rotating ``SECRET_KEY`` the Django way keeps them readable: the old key goes into
``SECRET_KEY_FALLBACKS``, whose derived keys decrypt (never encrypt); ``manage.py rotate_secrets``
re-encrypts every stored secret under the current keys, after which the fallback can go."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF


class CredentialError(RuntimeError):
    """A stored secret cannot be decrypted with the configured key."""


@lru_cache(maxsize=8)
def _fernet(configured: str, secret_key: str, label: bytes) -> Fernet:
    if configured:
        return Fernet(configured.encode())
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


@dataclass(frozen=True)
class SecretBox:
    """Encrypts and decrypts one kind of secret (``what`` names it in errors). ``fallbacks``
    (earlier SECRET_KEYs) and ``legacy`` (Fernet keys of an older scheme) only decrypt."""

    configured_key: str
    secret_key: str
    label: bytes
    what: str
    fallbacks: tuple[str, ...] = ()
    legacy: tuple[bytes, ...] = ()

    def encrypt(self, plain: str) -> str:
        """A Fernet token (ASCII) for ``plain``; empty stays empty."""
        return (
            _fernet(self.configured_key, self.secret_key, self.label).encrypt(plain.encode()).decode() if plain else ""
        )

    def decrypt(self, token: str) -> str:
        """The plaintext of :meth:`encrypt`'s ``token``."""
        if not token:
            return ""
        keys = [_fernet(self.configured_key, self.secret_key, self.label)]
        keys += [_fernet("", old, self.label) for old in self.fallbacks if not self.configured_key]
        keys += [Fernet(key) for key in self.legacy]
        try:
            return MultiFernet(keys).decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise CredentialError(
                f"the {self.what} cannot be decrypted with the configured key (a rotated SECRET_KEY "
                "belongs in SECRET_KEY_FALLBACKS until `manage.py rotate_secrets` has run)"
            ) from exc

    def reencrypt(self, token: str) -> str:
        """``token`` under the current key (what rotate-secrets writes back)."""
        return self.encrypt(self.decrypt(token))


#: Kind of secret → (its setting, its label for a key derived from SECRET_KEY, its name in errors).
KINDS = {
    "bmc": ("CONSOLE_BMC_KEY", b"ibconsole bmc credentials v1", "BMC password"),
    "fabric": ("CONSOLE_FABRIC_KEY", b"ibconsole fabric keys v1", "fabric key"),
    "webhook": ("CONSOLE_WEBHOOK_KEY", b"ibconsole webhook secrets v1", "webhook secret"),
}


def box(kind: str, *, legacy: tuple[bytes, ...] = ()) -> SecretBox:
    """The box of one kind of secret under the settings now (keys, SECRET_KEY and its fallbacks)."""
    from django.conf import settings

    setting, label, what = KINDS[kind]
    fallbacks = tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ())
    return SecretBox(getattr(settings, setting, "") or "", settings.SECRET_KEY, label, what, fallbacks, legacy)
