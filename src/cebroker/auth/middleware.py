"""The ASGI middleware in front of every route: who calls, may they, and the audit line.

For each HTTP call it looks up the scope the route needs (:mod:`cebroker.auth.scopes`),
authenticates the caller unless the route is public, refuses with 401 (no or bad
credentials, ``WWW-Authenticate: Bearer``) or 403 (a missing scope, named) before the route
runs (so a refused call reads no body and changes nothing), and otherwise hands the principal
to the route in ``scope["state"]["principal"]`` (read with
:func:`cebroker.web.access.principal_of`). Management writes are logged to the audit log with
their outcome, refused ones included.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cebroker.auth import audit
from cebroker.auth.authenticator import Authenticator
from cebroker.auth.scopes import ANY, EVENT_GRID_PREFIX, PUBLIC, audited, required_scope
from cebroker.errors import BrokerError, Forbidden
from cebroker.principal import Principal
from cebroker.web.access import PRINCIPAL
from cebroker.web.problem import problem_from_error


class AccessMiddleware:
    """Authentication, authorization and audit for every HTTP call of ``app``.

    Args:
        authenticator: turns the ``Authorization`` header into a principal.
        metrics_public: serve ``/metrics`` without credentials.
    """

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator, metrics_public: bool = False) -> None:
        self.app = app
        self.authenticator = authenticator
        self.metrics_public = metrics_public
        # The rules of the hottest call, looked up once rather than per call.
        self._known = {("POST", "/events"): (required_scope("POST", "/events"), audited("POST", "/events"))}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method: str = scope["method"]
        path: str = scope["path"]
        known = self._known.get((method, path))
        if known is not None:
            needed, logged = known
        else:
            needed = required_scope(method, path)
            if path == "/metrics" and self.metrics_public:
                needed = PUBLIC
            logged = audited(method, path)
        if needed == PUBLIC:
            await self.app(scope, receive, send)
            return
        principal: Principal | None = None
        try:
            authenticator = self.authenticator
            # Without credentials configured every call is the local principal: no header to find.
            authorization = _header(scope, b"authorization") if authenticator.enabled else None
            principal = await authenticator.authenticate(
                authorization, shared_access_key=path.startswith(EVENT_GRID_PREFIX)
            )
            if needed != ANY and not principal.may(needed):
                raise Forbidden(
                    f"this call needs the scope {needed!r}, which {principal.id} lacks", scope=needed
                )
        except BrokerError as exc:
            if logged:
                audit.record(principal, method, path, exc.status)
            await problem_from_error(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        if not logged:
            await self.app(scope, receive, send)
            return
        answered: dict[str, object] = {"status": 500}

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
                for name, value in message.get("headers", ()):
                    if name.lower() == b"location":
                        answered["location"] = value.decode("latin-1")
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            status = answered["status"]
            location = answered.get("location")
            audit.record(
                principal,
                method,
                path,
                status if isinstance(status, int) else 500,
                location=location if isinstance(location, str) else None,
            )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None
