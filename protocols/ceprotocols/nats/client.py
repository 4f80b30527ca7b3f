"""Opening nats-py connections for senders and receivers, with credentials and reconnection."""

from __future__ import annotations

import logging
from typing import Any

import nats
from nats.aio.client import Client
from nats.errors import AuthorizationError
from nats.errors import Error as NatsError

from ceprotocols.credentials import AccessToken, Credential, Plain
from ceprotocols.endpoint import Endpoint
from ceprotocols.errors import DeliveryRejected, TargetUnreachable

log = logging.getLogger("ceprotocols.nats")


async def _log_error(error: Exception) -> None:
    # nats-py reports every failed reconnect attempt here; they are expected while a server is down.
    log.debug("NATS connection error: %s", error)


def server_urls(endpoint: Endpoint) -> list[str]:
    """The server list for nats-py (``tls://`` keeps TLS)."""
    scheme = "tls" if endpoint.tls else "nats"
    return [f"{scheme}://{host}:{port}" for host, port in endpoint.hosts]


async def connect(endpoint: Endpoint, credential: Credential | None, within: float) -> Client:
    """A connected client that reconnects forever after it first connected; TargetUnreachable
    when no server answers, DeliveryRejected when the server refuses the credentials."""
    options: dict[str, Any] = {}
    if isinstance(credential, Plain):
        options.update(user=credential.identifier, password=credential.secret)
    elif isinstance(credential, AccessToken):
        options["token"] = credential.token
    seen: list[Exception] = []

    async def on_error(error: Exception) -> None:
        seen.append(error)
        await _log_error(error)

    try:
        client = await nats.connect(
            servers=server_urls(endpoint),
            connect_timeout=max(1, int(within)),
            allow_reconnect=True,
            # nats-py applies this limit to the first connect too: "forever" would never fail an
            # unreachable sink. Try once more, then, once connected, reconnect without limit.
            max_reconnect_attempts=1,
            reconnect_time_wait=0.5,
            error_cb=on_error,
            **options,
        )
        client.options["max_reconnect_attempts"] = -1
        return client
    except (NatsError, OSError, TimeoutError) as exc:
        text = f"NATS {','.join(server_urls(endpoint))}: {type(exc).__name__} {exc}"
        # nats-py ends with "no servers" after the server refused us; the reason came to error_cb.
        if any(isinstance(e, AuthorizationError) or "authorization" in str(e).lower() for e in [*seen, exc]):
            raise DeliveryRejected(
                f"{text} (authorization refused)", status="authorization", retryable=False
            ) from exc
        raise TargetUnreachable(text) from exc
