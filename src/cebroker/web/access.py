"""The principal of a call, as the access middleware (:mod:`cebroker.auth.middleware`) left it."""

from __future__ import annotations

from starlette.requests import Request

from cebroker.errors import Unauthorized
from cebroker.principal import Principal

#: The key of the principal in the request's state.
PRINCIPAL = "principal"


def principal_of(request: Request) -> Principal:
    """Who makes this call.

    Raises:
        Unauthorized: the call reached a route without passing the access middleware (a public
            route reading a principal is a mistake, refused rather than guessed).
    """
    principal = request.scope.get("state", {}).get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise Unauthorized(
            "this call carries no authenticated principal", challenge='Bearer realm="cebroker"'
        )
    return principal
