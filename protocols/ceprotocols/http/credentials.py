"""Sink credentials (Subscriptions API, ``sinkcredential``) turned into ``Authorization`` values.

* ``PLAIN``: HTTP Basic with ``identifier`` (or ``identity``) and ``secret``.
* ``ACCESSTOKEN``: ``<accesstokentype> <accesstoken>``; once ``accesstokenexpiresutc`` has
  passed the credential is treated as failed (nothing can renew it).
* ``REFRESHTOKEN``: the access token is used until it expires, then a new one is obtained with
  the OAuth 2.0 ``refresh_token`` grant (RFC 6749 section 6) at ``refreshtokenendpoint`` (or
  ``refreshtokenurl``), cached per credential, and refreshed again on expiry or when the sink
  answers 401.

Field spellings are resolved by :func:`ceprotocols.credentials.canonical_credential`.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from ceprotocols import jsontext
from ceprotocols.credentials import canonical_credential
from ceprotocols.errors import DeliveryRejected
from ceprotocols.http.transport import HttpTransport, HttpTransportError, delivery_error

# Refresh a little before the announced expiry so a token does not lapse in flight.
_EXPIRY_MARGIN = 5.0
#: Seconds a token endpoint has to answer.
_REFRESH_TIMEOUT = 10.0
_FORM_HEADERS = {"content-type": "application/x-www-form-urlencoded", "accept": "application/json"}


@dataclass(slots=True)
class _Token:
    value: str
    kind: str
    expires_at: float | None
    refresh_token: str


def _expiry(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise DeliveryRejected(
            f"sinkcredential accesstokenexpiresutc is not a timestamp: {value!r}", retryable=False
        ) from exc


def _scheme(kind: Any) -> str:
    text = str(kind or "bearer")
    return "Bearer" if text.lower() == "bearer" else text


class CredentialResolver:
    """Computes the ``Authorization`` header for a credential; caches refreshed tokens."""

    def __init__(self, transport: HttpTransport) -> None:
        self._transport = transport
        self._tokens: dict[tuple[str, str], _Token] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def authorization(self, credential: Mapping[str, Any] | None) -> str | None:
        """The header value for ``credential`` (None when there is none).

        Raises :class:`DeliveryRejected` (not retryable) for an expired access token, an unknown
        credential type or a refresh the token endpoint refused.
        """
        if not credential:
            return None
        credential = canonical_credential(credential)
        kind = str(credential.get("credentialtype", "")).upper()
        if kind == "PLAIN":
            raw = f"{credential.get('identifier', '')}:{credential.get('secret', '')}".encode()
            return "Basic " + base64.b64encode(raw).decode()
        if kind == "ACCESSTOKEN":
            expires = _expiry(credential.get("accesstokenexpiresutc"))
            if expires is not None and expires <= time.time():
                raise DeliveryRejected("sink access token has expired", retryable=False, status="expired")
            return f"{_scheme(credential.get('accesstokentype'))} {credential.get('accesstoken', '')}"
        if kind == "REFRESHTOKEN":
            token = await self._refreshable(credential)
            return f"{token.kind} {token.value}"
        raise DeliveryRejected(f"unsupported sink credential type {kind!r}", retryable=False)

    def invalidate(self, credential: Mapping[str, Any] | None) -> bool:
        """Forget the cached access token (after a 401); True when a refresh may help."""
        if not credential or str(credential.get("credentialtype", "")).upper() != "REFRESHTOKEN":
            return False
        credential = canonical_credential(credential)
        key = self._key(credential)
        token = self._tokens.get(key)
        if token is None:
            token = self._initial(credential)
        token.expires_at = 0.0
        self._tokens[key] = token
        return True

    @staticmethod
    def _key(credential: Mapping[str, Any]) -> tuple[str, str]:
        """Cache key of a canonical credential: one token per endpoint and refresh token."""
        url = str(credential.get("refreshtokenendpoint") or "")
        return url, str(credential.get("refreshtoken", ""))

    @staticmethod
    def _initial(credential: Mapping[str, Any]) -> _Token:
        return _Token(
            value=str(credential.get("accesstoken") or ""),
            kind=_scheme(credential.get("accesstokentype")),
            expires_at=(
                _expiry(credential.get("accesstokenexpiresutc")) if credential.get("accesstoken") else 0.0
            ),
            refresh_token=str(credential.get("refreshtoken", "")),
        )

    async def _refreshable(self, credential: Mapping[str, Any]) -> _Token:
        key = self._key(credential)
        token = self._tokens.get(key)
        if token is None:
            token = self._tokens[key] = self._initial(credential)
        if self._fresh(token):
            return token
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one refresh per credential, however many deliveries wait for it
            token = self._tokens[key]
            if not self._fresh(token):
                token = await self._refresh(key[0], token)
                self._tokens[key] = token
        return token

    @staticmethod
    def _fresh(token: _Token) -> bool:
        if not token.value:
            return False
        return token.expires_at is None or token.expires_at - _EXPIRY_MARGIN > time.time()

    async def _refresh(self, url: str, token: _Token) -> _Token:
        if not url:
            raise DeliveryRejected("REFRESHTOKEN credential without refreshtokenendpoint", retryable=False)
        form = urlencode({"grant_type": "refresh_token", "refresh_token": token.refresh_token}).encode()
        try:
            response = await self._transport.request(
                "POST", url, _FORM_HEADERS, form, deadline=_REFRESH_TIMEOUT
            )
        except HttpTransportError as exc:
            raise delivery_error(exc, "token refresh") from exc
        if response.status != 200:
            transient = response.status >= 500 or response.status in (408, 429)
            raise DeliveryRejected(
                f"token endpoint answered {response.status}",
                retryable=transient,
                status=response.status,
                body=response.text[:1024],
            )
        try:
            doc = jsontext.loads(response.body)
            value = str(doc["access_token"])
        except (ValueError, KeyError, TypeError) as exc:
            raise DeliveryRejected("token endpoint answered without access_token", retryable=False) from exc
        lifetime = doc.get("expires_in")
        expires = time.time() + float(lifetime) if isinstance(lifetime, int | float) else None
        return _Token(
            value=value,
            kind=_scheme(doc.get("token_type") or token.kind),
            expires_at=expires,
            # RFC 6749 6: the server may rotate the refresh token; keep using the newest one.
            refresh_token=str(doc.get("refresh_token") or token.refresh_token),
        )
