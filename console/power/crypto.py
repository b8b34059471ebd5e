"""BMC credentials encrypted at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a key from
``settings.CONSOLE_BMC_KEY`` (a Fernet key, from the environment) or, when that is unset, one
derived from ``SECRET_KEY`` with HKDF-SHA256 (its own ``info`` label, so the derived key is good
for nothing else). Rotating SECRET_KEY without CONSOLE_BMC_KEY makes stored passwords unreadable:
set them again (``PUT /api/nodes/<id>/bmc/``)."""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_INFO = b"ibconsole bmc credentials v1"


class CredentialError(RuntimeError):
    """A stored secret cannot be decrypted with the configured key."""


@lru_cache(maxsize=4)
def _fernet(configured: str, secret_key: str) -> Fernet:
    if configured:
        return Fernet(configured.encode())
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def _current() -> Fernet:
    return _fernet(getattr(settings, "CONSOLE_BMC_KEY", ""), settings.SECRET_KEY)


def encrypt(plain: str) -> str:
    """A Fernet token (ASCII) for ``plain``; empty stays empty."""
    return _current().encrypt(plain.encode()).decode() if plain else ""


def decrypt(token: str) -> str:
    """The plaintext of :func:`encrypt`'s ``token``."""
    if not token:
        return ""
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise CredentialError("the BMC password cannot be decrypted with the configured key") from exc
