"""Resolvers for the network-policy tests: names mapped to any address, and DNS rebinding.

They stand in for DNS only; every connection in these tests is a real socket.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

from ceprotocols.egress import IPAddress


class MapResolver:
    """Answers each name from a table; an unknown name does not resolve. Records every call."""

    def __init__(self, answers: dict[str, Sequence[str]]) -> None:
        self.answers = {
            name: [ipaddress.ip_address(a) for a in addresses] for name, addresses in answers.items()
        }
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int, /) -> Sequence[IPAddress]:
        self.calls.append(host)
        try:
            return self.answers[host]
        except KeyError:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not in the test's table") from None


class RebindingResolver:
    """DNS rebinding: the first lookup of a name answers ``first``, every later one ``then``."""

    def __init__(self, name: str, first: str, then: str) -> None:
        self.name = name
        self.first = ipaddress.ip_address(first)
        self.then = ipaddress.ip_address(then)
        self.calls = 0

    async def __call__(self, host: str, port: int, /) -> Sequence[IPAddress]:
        if host != self.name:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not {self.name}")
        self.calls += 1
        return [self.first if self.calls == 1 else self.then]


class CountingListener:
    """A listening socket on 127.0.0.1 that nobody serves: ``connections()`` counts the
    connections that reached it. A completed TCP handshake waits in the accept queue, so a
    non-blocking accept sees it at once: no waiting is needed to know that none arrived."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.setblocking(False)
        self.port: int = self._sock.getsockname()[1]
        self._count = 0

    def connections(self) -> int:
        """How many connections arrived so far (each is accepted and closed)."""
        while True:
            try:
                peer, _ = self._sock.accept()
            except BlockingIOError:
                return self._count
            peer.close()
            self._count += 1

    def close(self) -> None:
        self._sock.close()
