"""Names to addresses, checked against a :class:`NetworkPolicy`: at subscription time
(:func:`check_destination`) and right before connecting (:class:`ConnectGuard`).

The resolver is injectable (:class:`Resolver`), so that tests can map any name to any address
and play DNS rebinding; the default asks the system (``getaddrinfo``) from the event loop.
A name is refused when **any** of its addresses is: the answer a client connects to is up to the
resolver's order, and a name that also points inside is an attempt to reach it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol
from urllib.parse import urlsplit

from yarl import URL

from ceprotocols.egress.addresses import IPAddress, NetworkPolicy, describe, parse_address, spoken
from ceprotocols.endpoint import EndpointError, parse_endpoint
from ceprotocols.errors import DestinationRefused, TargetUnreachable

__all__ = ["ConnectGuard", "Resolver", "check_destination", "destination_hosts", "system_resolver"]

#: Default port per sink scheme, for resolving (the port does not change the verdict).
_PORTS: Final = {
    "http": 80,
    "https": 443,
    "mqtt": 1883,
    "mqtts": 8883,
    "ws": 80,
    "wss": 443,
    "amqp": 5672,
    "amqps": 5671,
    "kafka": 9092,
    "kafkas": 9093,
    "nats": 4222,
    "tls": 4222,
}


class Resolver(Protocol):
    """Resolves a host name to the addresses a client would connect to.

    Raises ``OSError`` (``socket.gaierror``) when the name does not resolve.
    """

    async def __call__(self, host: str, port: int, /) -> Sequence[IPAddress]: ...


async def system_resolver(host: str, port: int, /) -> Sequence[IPAddress]:
    """The system's answer (``getaddrinfo`` in the event loop's executor), distinct, in order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: dict[IPAddress, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        address = parse_address(str(sockaddr[0]))
        if address is not None:
            found[address] = None
    return list(found)


def destination_hosts(url_or_host: str) -> list[tuple[str, int]]:
    """Every ``(host, port)`` a sink URL (or a bare host) names, as the senders parse it.

    ``http(s)`` URLs are read by yarl, as the HTTP transport reads them; the other schemes by the
    senders' own endpoint parser (which accepts ``host:port`` lists for Kafka and NATS).

    Raises:
        ValueError: the text names no host.
    """
    text = url_or_host.strip()
    if "://" not in text:
        if not text:
            raise ValueError("no host given")
        return [(text, 0)]
    scheme = urlsplit(text, allow_fragments=False).scheme.lower()
    if scheme in ("http", "https"):
        url = URL(text)
        if not url.raw_host:
            raise ValueError(f"{text!r} has no host")
        return [(url.raw_host, url.port or _PORTS[scheme])]
    try:
        endpoint = parse_endpoint(text, schemes={scheme: _PORTS.get(scheme, 1)})
    except EndpointError as exc:
        raise ValueError(str(exc)) from None
    return list(endpoint.hosts)


async def check_destination(
    url_or_host: str, policy: NetworkPolicy, resolver: Resolver = system_resolver
) -> str | None:
    """Why the broker must not connect to ``url_or_host``, or ``None`` when it may.

    For the subscription-time check: each host of the sink (a URL of any sink scheme, or a bare
    host) is either an address checked as it is, or a name resolved with ``resolver`` whose
    every address is checked. The reason names the address and its class: ``evil.example
    resolves to 10.1.2.3, a private address`` or ``169.254.169.254 is a link-local address
    (cloud instance metadata)``. A name that does not resolve is not refused here (it reaches
    nothing; the check at connect time sees whatever it resolves to then); text that names no
    host is. The resolver is not given a deadline: wrap the call in one.
    """
    if not policy.restricted:
        return None
    try:
        hosts = destination_hosts(url_or_host)
    except ValueError as exc:
        return f"no host to check: {exc}"
    for host, port in hosts:
        literal = parse_address(host)
        if literal is not None:
            reason = policy.check_address(literal)
            if reason is not None:
                return reason
            continue
        try:
            addresses = await resolver(host, port)
        except OSError:
            continue
        reason = _refusal(policy, host, addresses)
        if reason is not None:
            return reason
    return None


def _refusal(policy: NetworkPolicy, host: str, addresses: Sequence[IPAddress]) -> str | None:
    for address in addresses:
        kind = policy.refused_class(address)
        if kind is not None:
            return f"{host} resolves to {spoken(address)}, {describe(address, kind)}"
    return None


@dataclass(frozen=True, slots=True)
class ConnectGuard:
    """The check a sender makes right before it connects, on the addresses it will use.

    Attributes:
        policy: the network policy.
        resolver: how names become addresses.
    """

    policy: NetworkPolicy
    resolver: Resolver = system_resolver

    @property
    def restricted(self) -> bool:
        """Whether anything is checked (``False`` for the unrestricted policy)."""
        return self.policy.restricted

    async def addresses(self, host: str, port: int, *, role: str = "sink") -> tuple[IPAddress, ...]:
        """The addresses to connect to for ``host``, every one of them accepted by the policy.

        ``role`` names the destination in messages (``sink``, ``token endpoint``, ``broker``).

        Raises:
            DestinationRefused: ``host`` is, or resolves to, a refused address (final: the
                delivery is dead-lettered with this reason).
            TargetUnreachable: ``host`` does not resolve (a later attempt may succeed).
        """
        literal = parse_address(host)
        if literal is not None:
            reason = self.policy.check_address(literal)
            if reason is not None:
                raise DestinationRefused(f"{role} {reason}")
            return (literal,)
        try:
            found = tuple(await self.resolver(host, port))
        except OSError as exc:
            raise TargetUnreachable(f"{role} {host} does not resolve: {exc}") from exc
        if not found:
            raise TargetUnreachable(f"{role} {host} resolves to no address")
        reason = _refusal(self.policy, host, found)
        if reason is not None:
            raise DestinationRefused(f"{role} {reason}")
        return found
