"""The aiohttp resolver of a restricted HTTP transport: names resolved, then checked.

aiohttp connects to the addresses its resolver returns and keeps the URL's host name for TLS
(SNI and the certificate check), so checking here checks the very addresses connected to: a
name that resolves to a refused address at connect time (DNS rebinding) is never reached.
aiohttp does not call the resolver for an IP-literal host; the transport checks those itself.
"""

from __future__ import annotations

import errno
import socket

from aiohttp.abc import AbstractResolver, ResolveResult

from ceprotocols.egress import ConnectGuard
from ceprotocols.errors import DestinationRefused, TargetUnreachable

__all__ = ["CheckedResolver", "RefusedAddress"]

_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class RefusedAddress(OSError):
    """A refusal on its way through aiohttp, which passes only ``OSError`` from a resolver on
    (as ``ClientConnectorDNSError.os_error``); the transport turns it back into a refusal."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EACCES, reason)
        self.reason = reason


class CheckedResolver(AbstractResolver):
    """Resolves through the guard's resolver and returns the addresses only if all are accepted."""

    def __init__(self, guard: ConnectGuard) -> None:
        self._guard = guard

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The accepted addresses of ``host`` (of ``family`` unless it is ``AF_UNSPEC``).

        Raises:
            RefusedAddress: ``host`` resolves to an address the policy refuses.
            OSError: ``host`` does not resolve.
        """
        try:
            addresses = await self._guard.addresses(host, port, role="host")
        except DestinationRefused as exc:
            raise RefusedAddress(str(exc)) from None
        except TargetUnreachable as exc:
            raise OSError(errno.EHOSTUNREACH, str(exc)) from None
        results: list[ResolveResult] = []
        for address in addresses:
            found = socket.AF_INET if address.version == 4 else socket.AF_INET6
            if family not in (socket.AF_UNSPEC, found):
                continue
            results.append(
                {
                    "hostname": host,
                    "host": str(address),
                    "port": port,
                    "family": found,
                    "proto": 0,
                    "flags": _FLAGS,
                }
            )
        if not results:
            raise OSError(errno.EHOSTUNREACH, f"host {host} has no address of the requested family")
        return results

    async def close(self) -> None:
        """Nothing to release: the guard's resolver holds no resources of this resolver's."""
