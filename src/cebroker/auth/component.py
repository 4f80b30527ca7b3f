"""The access control of a broker, built from its settings, with a lifecycle.

Built before the server starts, so a bad API keys file stops ``cebroker serve`` with the
reason (:class:`~cebroker.errors.ConfigurationError`). Started with the other parts: it then
re-reads the API keys on ``SIGHUP`` (when the event loop runs in the main thread, as under
``cebroker serve``; the file is also re-read when it changes).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Sequence

from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from cebroker.auth.authenticator import Authenticator
from cebroker.auth.keys import ApiKeyRing, file_mode_warning
from cebroker.auth.middleware import AccessMiddleware
from cebroker.auth.oidc import OidcVerifier
from cebroker.settings import Settings

log = logging.getLogger("cebroker.auth")


class AccessComponent:
    """Authentication, authorization and audit as a part of the broker (no routes of its own)."""

    def __init__(self, settings: Settings) -> None:
        keys = ApiKeyRing(settings.api_keys) if settings.api_keys is not None else None
        if settings.api_keys is not None and (warning := file_mode_warning(settings.api_keys)):
            log.warning("API keys: %s", warning)
        oidc = None
        if settings.oidc_issuer is not None and settings.oidc_audience is not None:
            oidc = OidcVerifier(
                settings.oidc_issuer, settings.oidc_audience, tenant_claim=settings.oidc_tenant_claim
            )
        self.authenticator = Authenticator(keys=keys, oidc=oidc)
        self.metrics_public = settings.metrics_public
        self._hangup: asyncio.AbstractEventLoop | None = None

    def middleware(self) -> Middleware:
        """The middleware to put in front of every route."""
        return Middleware(
            AccessMiddleware, authenticator=self.authenticator, metrics_public=self.metrics_public
        )

    def routes(self) -> Sequence[BaseRoute]:
        """None: it guards the other parts' routes."""
        return ()

    async def start(self) -> None:
        """Re-read the API keys on SIGHUP (only possible from the main thread)."""
        keys = self.authenticator.keys
        if keys is None or threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGHUP, keys.reload)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (another platform)
            return
        self._hangup = loop

    async def stop(self) -> None:
        """Stop listening for SIGHUP; close the issuer connections."""
        if self._hangup is not None:
            self._hangup.remove_signal_handler(signal.SIGHUP)
            self._hangup = None
        await self.authenticator.aclose()
