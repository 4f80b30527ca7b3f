"""AES-256-GCM sealing of one secret value, with the key id stored beside it.

A sealed value is text: ``sealed:v1:<key id>:<base64url of nonce + ciphertext + tag>``. The
associated data binds it to the subscription and the field it belongs to, so a sealed value
copied to another subscription or field does not open. Text without the prefix is a value
stored in clear by an earlier release; it opens as itself (``cebroker secrets rotate`` seals
it).
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cebroker.sealing.keys import KeyRing

PREFIX = "sealed:v1:"
_NONCE = 12


class SealingError(Exception):
    """A sealed value that the key file cannot open; the message says why (never the value)."""


def is_sealed(text: str) -> bool:
    """Whether ``text`` is a sealed value (rather than one stored in clear)."""
    return text.startswith(PREFIX)


def sealed_key_id(text: str) -> str | None:
    """The id of the key that sealed ``text``, or None for a value in clear."""
    if not is_sealed(text):
        return None
    return text[len(PREFIX) :].partition(":")[0]


class Sealer:
    """Seals with the ring's first key; opens with any of its keys."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring
        self._kid, key = ring.current
        self._aead = AESGCM(key)

    def seal(self, plaintext: str, context: str) -> str:
        """``plaintext`` sealed for ``context`` (which subscription and field it belongs to)."""
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, plaintext.encode("utf-8"), context.encode("utf-8"))
        body = base64.urlsafe_b64encode(nonce + sealed).decode("ascii").rstrip("=")
        return f"{PREFIX}{self._kid}:{body}"

    def open(self, text: str, context: str) -> str:
        """The plaintext of a sealed value (a value in clear is returned as it is).

        Raises:
            SealingError: the key that sealed it is not in the ring, or the value does not
                open (damaged, or moved to another subscription or field).
        """
        if not is_sealed(text):
            return text
        kid, _, body = text[len(PREFIX) :].partition(":")
        key = self.ring.by_id(kid)
        if key is None:
            raise SealingError(
                f"{context} was sealed with the key {kid}, which {self.ring.source} does not hold"
                f" (it holds {', '.join(self.ring.ids)}): is this the key file of this database?"
            )
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plain = AESGCM(key).decrypt(raw[:_NONCE], raw[_NONCE:], context.encode("utf-8"))
        except (InvalidTag, ValueError, binascii.Error):
            raise SealingError(f"{context} does not open with the key {kid}: the value is damaged") from None
        return plain.decode("utf-8")

    def current_id(self) -> str:
        """The id of the key that seals."""
        return self._kid
