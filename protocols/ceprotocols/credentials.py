"""Sink credentials (Subscriptions API ``sinkcredential``) for the non-HTTP protocols.

| protocol | ``PLAIN`` (identifier, secret)   | ``ACCESSTOKEN`` (accesstoken)           |
|----------|----------------------------------|-----------------------------------------|
| MQTT3/5  | CONNECT username / password      | CONNECT password (username = token type)|
| AMQP     | SASL PLAIN                       | not supported (rejected)                |
| KAFKA    | SASL PLAIN                       | SASL OAUTHBEARER with the given token   |
| NATS     | user / password                  | token                                   |

``REFRESHTOKEN`` is not supported by these protocols: a delivery with it is rejected (not retried).

Two fields have two spellings, and a stored credential keeps the one its client used:
``identifier`` / ``identity`` (PLAIN) and ``refreshtokenendpoint`` / ``refreshtokenurl``
(REFRESHTOKEN). Every reader goes through :func:`canonical_credential` so that it names one field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from ceprotocols.errors import DeliveryRejected

#: Alias -> canonical field name. The canonical names are the spec's prose (Subscriptions API
#: 3.2.3: ``identifier``, ``refreshtokenendpoint``); the aliases are the older ``identity`` and
#: ``refreshtokenurl``. Both spellings are accepted and stored as given.
CREDENTIAL_ALIASES: Mapping[str, str] = MappingProxyType(
    {"identity": "identifier", "refreshtokenurl": "refreshtokenendpoint"}
)

_ALIAS_NAMES = frozenset(CREDENTIAL_ALIASES)


def canonical_credential(credential: Mapping[str, Any]) -> Mapping[str, Any]:
    """``credential`` with every alias read under its canonical name.

    ``{"identity": "svc", ...}`` reads as ``{"identifier": "svc", ...}`` and
    ``{"refreshtokenurl": u, ...}`` as ``{"refreshtokenendpoint": u, ...}``; other fields pass
    through. Should both spellings be present (the API refuses that), the canonical one wins.
    The result is a read-only view: ``credential`` itself when no alias is present (the common
    case costs no copy on the delivery path), else a new mapping that refuses writes.
    """
    if _ALIAS_NAMES.isdisjoint(credential):
        return credential
    canonical = {CREDENTIAL_ALIASES.get(name, name): value for name, value in credential.items()}
    for alias, name in CREDENTIAL_ALIASES.items():
        if alias in credential and name in credential:
            canonical[name] = credential[name]
    return MappingProxyType(canonical)


@dataclass(frozen=True, slots=True)
class Plain:
    """A username and password."""

    identifier: str
    secret: str


@dataclass(frozen=True, slots=True)
class AccessToken:
    """A bearer-style token; ``expires`` is when it lapses, if known."""

    token: str
    token_type: str = "bearer"
    expires: datetime | None = None

    @property
    def expired(self) -> bool:
        """Whether the token is past its expiry."""
        return self.expires is not None and self.expires <= datetime.now(UTC)


Credential = Plain | AccessToken


def _rejected(message: str) -> DeliveryRejected:
    return DeliveryRejected(f"sinkcredential: {message}", retryable=False, status="credential")


def parse_credential(
    credential: Mapping[str, Any] | None, *, protocol: str, token_supported: bool = True
) -> Credential | None:
    """The typed credential, or DeliveryRejected (not retryable) when it is incomplete, expired or
    of a type ``protocol`` cannot use."""
    if not credential:
        return None
    credential = canonical_credential(credential)
    kind = str(credential.get("credentialtype", "")).upper()
    if kind == "PLAIN":
        identifier, secret = credential.get("identifier"), credential.get("secret")
        if not isinstance(identifier, str) or not isinstance(secret, str):
            raise _rejected("PLAIN needs string identifier (or identity) and secret")
        return Plain(identifier, secret)
    if kind == "ACCESSTOKEN":
        if not token_supported:
            raise _rejected(f"{protocol} has no access-token authentication; use PLAIN")
        token = credential.get("accesstoken")
        if not isinstance(token, str) or not token:
            raise _rejected("ACCESSTOKEN needs accesstoken")
        expires = credential.get("accesstokenexpiresutc")
        parsed = _parse_expiry(expires) if expires else None
        result = AccessToken(token, str(credential.get("accesstokentype") or "bearer"), parsed)
        if result.expired:
            raise _rejected("the access token has expired (accesstokenexpiresutc)")
        return result
    raise _rejected(f"credentialtype {kind or '(missing)'!r} is not supported for {protocol}")


def ensure_fresh(credential: Credential | None) -> None:
    """Raise DeliveryRejected (not retryable) if ``credential`` is an access token that has
    expired since it was parsed (prepared destinations are reused)."""
    if isinstance(credential, AccessToken) and credential.expired:
        raise _rejected("the access token has expired (accesstokenexpiresutc)")


def _parse_expiry(value: Any) -> datetime:
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise _rejected(f"accesstokenexpiresutc is not a timestamp: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
