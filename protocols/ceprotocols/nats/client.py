"""Opening nats-py connections for senders and receivers, with credentials and reconnection."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import nats.aio.client
from nats.aio.client import Client, Server
from nats.errors import AuthorizationError
from nats.errors import Error as NatsError

from ceprotocols.credentials import AccessToken, Credential, Plain
from ceprotocols.egress import ConnectGuard
from ceprotocols.egress.addresses import parse_address
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


#: Seconds between reconnect attempts to one server.
_RECONNECT_WAIT = 0.5

ServerChooser = Callable[[list[Server], dict[str, Any]], tuple[Server | None, float]]


async def checked_servers(endpoint: Endpoint, guard: ConnectGuard) -> tuple[list[str], str | None]:
    """The server list with every host resolved and checked, and the TLS name to verify.

    Each host becomes the addresses it was checked at, so that nats-py connects (and
    reconnects) to those and never resolves the name again; with TLS, the name is kept for the
    certificate check and SNI (nats-py's ``tls_hostname``). nats-py takes one such name for all
    servers, so a ``tls://`` sink listing several different names keeps the names (checked
    here, resolved again by nats-py: the window docs/protocols.md describes).

    Raises:
        DestinationRefused: a host is, or resolves to, an address the policy refuses.
        TargetUnreachable: a host does not resolve.
    """
    scheme = "tls" if endpoint.tls else "nats"
    resolved = [
        (host, port, await guard.addresses(host, port, role="NATS server")) for host, port in endpoint.hosts
    ]
    names = {host for host, _port, _addresses in resolved if parse_address(host) is None}
    if endpoint.tls and len(names) > 1:
        return server_urls(endpoint), None
    servers = [
        f"{scheme}://[{a}]:{port}" if a.version == 6 else f"{scheme}://{a}:{port}"
        for _host, port, addresses in resolved
        for a in addresses
    ]
    return servers, (next(iter(names)) if endpoint.tls and names else None)


def only_among(servers: list[str]) -> ServerChooser:
    """nats-py's reconnect choice restricted to ``servers``: never a server the cluster
    announced (INFO ``connect_urls``), whose address nobody checked."""
    allowed = [url.split("://", 1)[1] for url in servers]

    def choose(pool: list[Server], info: dict[str, Any]) -> tuple[Server | None, float]:
        ours = [server for server in pool if server.uri.netloc in allowed]
        if not ours:
            return None, _RECONNECT_WAIT
        chosen = min(ours, key=lambda server: server.reconnects)
        return chosen, (_RECONNECT_WAIT if chosen.reconnects else 0.0)

    return choose


class StrictHeaderClient(Client):
    """A nats-py client that keeps header values it cannot decode as UTF-8 recognisable.

    nats-py decodes header values with ``errors="replace"``, so invalid UTF-8 would silently
    become U+FFFD. Here each undecodable byte becomes a lone surrogate instead (``surrogateescape``),
    which the binding's strict header decoding then refuses: invalid input is refused, not
    altered. (This relies on nats-py's own header parser, the one it uses by default.)
    """

    @staticmethod
    def _parse_header_lines(raw: bytes) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in raw.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if not line or not sep:
                continue
            try:
                key = name.strip().decode("ascii")
            except UnicodeDecodeError:
                continue  # as nats-py: a name that is not ASCII cannot be looked up anyway
            if any(c.isspace() for c in key):
                continue
            out[key] = value.strip().decode("utf-8", "surrogateescape")
        return out


async def connect(
    endpoint: Endpoint,
    credential: Credential | None,
    within: float,
    guard: ConnectGuard | None = None,
    *,
    strict_headers: bool = False,
) -> Client:
    """A connected client that reconnects forever after it first connected; TargetUnreachable
    when no server answers, DeliveryRejected when the server refuses the credentials.
    ``strict_headers`` keeps undecodable header values recognisable (receivers).

    With a restricted ``guard`` the servers are resolved and checked first
    (:func:`checked_servers`), and reconnects stay among them (:func:`only_among`); a refused
    address raises DestinationRefused before anything is connected.
    """
    options: dict[str, Any] = {}
    servers = server_urls(endpoint)
    if guard is not None and guard.restricted:
        servers, tls_name = await checked_servers(endpoint, guard)
        if tls_name is not None:
            options["tls_hostname"] = tls_name
        options["reconnect_to_server_handler"] = only_among(servers)
    if isinstance(credential, Plain):
        options.update(user=credential.identifier, password=credential.secret)
    elif isinstance(credential, AccessToken):
        options["token"] = credential.token
    seen: list[Exception] = []

    async def on_error(error: Exception) -> None:
        seen.append(error)
        await _log_error(error)

    # (nats.aio.client by its full name: a missing library fails here even when parts of it
    # were imported before)
    client = StrictHeaderClient() if strict_headers else nats.aio.client.Client()
    try:
        await client.connect(
            servers=servers,
            connect_timeout=max(1, int(within)),
            allow_reconnect=True,
            # nats-py applies this limit to the first connect too: "forever" would never fail an
            # unreachable sink. Try once more, then, once connected, reconnect without limit.
            max_reconnect_attempts=1,
            error_cb=on_error,
            # (Client.connect annotates this as an int; it takes fractions of a second)
            **{"reconnect_time_wait": _RECONNECT_WAIT, **options},
        )
        client.options["max_reconnect_attempts"] = -1
        return client
    except (NatsError, OSError, TimeoutError) as exc:
        text = f"NATS {','.join(servers)}: {type(exc).__name__} {exc}"
        # nats-py ends with "no servers" after the server refused us; the reason came to error_cb.
        if any(isinstance(e, AuthorizationError) or "authorization" in str(e).lower() for e in [*seen, exc]):
            raise DeliveryRejected(
                f"{text} (authorization refused)", status="authorization", retryable=False
            ) from exc
        raise TargetUnreachable(text) from exc
