"""Credentials to principal: ``Authorization: Bearer <API key or OIDC token>``.

A bearer value shaped like a JWT goes to the OIDC verifier when one is configured; anything
else is looked up among the API keys. Without either, authentication is off and every call is
made by :data:`~cebroker.principal.LOCAL` (the broker then listens on loopback only).
"""

from __future__ import annotations

import logging
import re

from cebroker.auth.keys import ApiKeyRing
from cebroker.auth.oidc import InvalidToken, IssuerUnavailable, OidcVerifier
from cebroker.errors import Overloaded, Unauthorized
from cebroker.principal import LOCAL, Principal

log = logging.getLogger("cebroker.auth")

REALM = "cebroker"
#: The challenge of a call that carried no credentials.
CHALLENGE = f'Bearer realm="{REALM}"'
_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


def _invalid(reason: str) -> Unauthorized:
    description = reason.replace('"', "'")
    return Unauthorized(
        f"the credentials were not accepted: {reason}",
        challenge=f'{CHALLENGE}, error="invalid_token", error_description="{description}"',
    )


class Authenticator:
    """Checks the ``Authorization`` header of a call.

    Args:
        keys: the API keys, if configured.
        oidc: the OIDC verifier, if configured.
    """

    def __init__(self, *, keys: ApiKeyRing | None = None, oidc: OidcVerifier | None = None) -> None:
        self.keys = keys
        self.oidc = oidc

    @property
    def enabled(self) -> bool:
        """Whether calls need credentials."""
        return self.keys is not None or self.oidc is not None

    async def authenticate(self, authorization: str | None, *, shared_access_key: bool = False) -> Principal:
        """The principal behind ``authorization`` (the header's value). ``shared_access_key``:
        ``SharedAccessKey <API key>`` is accepted too, as ``Bearer <API key>`` (the Event Grid
        compatibility routes, whose clients send their key so; never an OIDC token).

        Raises:
            Unauthorized: no credentials, a malformed header, or credentials not accepted.
            Overloaded: (503) the OIDC issuer's keys cannot be fetched right now.
        """
        if not self.enabled:
            return LOCAL
        if not authorization:
            raise Unauthorized(
                "this call needs credentials: Authorization: Bearer <key or token>", challenge=CHALLENGE
            )
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if shared_access_key and scheme.lower() == "sharedaccesskey" and credentials:
            principal = self.keys.find(credentials) if self.keys is not None else None
            if principal is None:
                raise _invalid("unknown API key")
            return principal
        if scheme.lower() != "bearer" or not credentials:
            raise Unauthorized(
                "credentials are sent as Authorization: Bearer <key or token>", challenge=CHALLENGE
            )
        if self.oidc is not None and _JWT.fullmatch(credentials):
            try:
                return await self.oidc.verify(credentials)
            except InvalidToken as exc:
                raise _invalid(str(exc)) from None
            except IssuerUnavailable as exc:
                # The verifier logs each failed fetch once; a call refused meanwhile is no news.
                log.debug("cannot verify an OIDC token: %s", exc)
                raise Overloaded(
                    "the token issuer cannot be reached to check the token", retry_after=exc.retry_after
                ) from None
        if self.keys is not None:
            principal = self.keys.find(credentials)
            if principal is not None:
                return principal
        raise _invalid("unknown API key" if self.keys is not None else "not a token of the configured issuer")

    def known(self, authorization: str | None) -> Principal | None:
        """The principal :meth:`authenticate` finds for ``authorization`` without waiting on
        anything (no credentials configured: the local principal; a ``Bearer`` API key of the
        ring), else None, whether the credentials are refused or need the OIDC issuer:
        :meth:`authenticate` then decides."""
        if not self.enabled:
            return LOCAL
        if not authorization or self.keys is None:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        credentials = credentials.strip()
        if scheme.lower() != "bearer" or not credentials:
            return None
        if self.oidc is not None and _JWT.fullmatch(credentials):
            return None
        return self.keys.find(credentials)

    async def aclose(self) -> None:
        """Release the OIDC verifier's connections."""
        if self.oidc is not None:
            await self.oidc.aclose()
