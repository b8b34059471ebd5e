"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256, the ``cryptography`` package) under a key
from the environment, or, when none is set, one derived from ``SECRET_KEY`` with HKDF-SHA256 and
a label of its own (so a derived key is good for one kind of secret only). Used for BMC
passwords (``console.power``) and the fabrics' management keys (``console.fabric``)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken
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
    """Encrypts and decrypts one kind of secret (``what`` names it in errors)."""

    configured_key: str
    secret_key: str
    label: bytes
    what: str

    def encrypt(self, plain: str) -> str:
        """A Fernet token (ASCII) for ``plain``; empty stays empty."""
        return (
            _fernet(self.configured_key, self.secret_key, self.label).encrypt(plain.encode()).decode() if plain else ""
        )

    def decrypt(self, token: str) -> str:
        """The plaintext of :meth:`encrypt`'s ``token``."""
        if not token:
            return ""
        try:
            return _fernet(self.configured_key, self.secret_key, self.label).decrypt(token.encode()).decode()
        except InvalidToken as exc:
            raise CredentialError(f"the {self.what} cannot be decrypted with the configured key") from exc
