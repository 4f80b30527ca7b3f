"""A paho-mqtt client that connects only to addresses a :class:`ConnectGuard` accepted.

paho opens its TCP connection in ``Client._create_socket_connection`` (resolving the host name
itself), then wraps that socket in TLS and the WebSocket handshake using the host *name*. This
subclass replaces only the first step: it resolves the name through the guard, checks every
address, and connects to an accepted one, so TLS (SNI, certificate check) and the WebSocket
``Host`` header keep the name while the packets go to the address that was checked. paho calls it
on every connect and reconnect (in a worker thread, see
:class:`~ceprotocols.mqtt.network.LoopNetwork`), so a name that starts resolving to a refused
address is refused at the next reconnect, before any byte is sent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from typing import Any

import paho.mqtt.client as paho

from ceprotocols.egress import ConnectGuard
from ceprotocols.errors import DestinationRefused, TargetUnreachable

__all__ = ["CheckedClient"]


class CheckedClient(paho.Client):
    """A ``paho.Client`` whose TCP connections go to guard-checked addresses only.

    ``_create_socket_connection`` raises :class:`DestinationRefused` (not an ``OSError``, so that
    the reconnect loop stops instead of trying again) when the broker's address is refused.
    """

    def __init__(
        self, *args: Any, guard: ConnectGuard, loop: asyncio.AbstractEventLoop, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._guard = guard
        self._owner_loop = loop

    def _create_socket_connection(self) -> socket.socket:
        # Runs in a worker thread; the guard's resolver is a coroutine of the owning loop.
        pending = asyncio.run_coroutine_threadsafe(
            self._guard.addresses(self.host, self.port, role="MQTT broker"), self._owner_loop
        )
        try:
            addresses = pending.result(timeout=self.connect_timeout)
        except TargetUnreachable as exc:  # does not resolve: paho's reconnect loop tries again
            raise OSError(str(exc)) from exc
        except concurrent.futures.TimeoutError as exc:
            pending.cancel()
            raise OSError(f"resolving MQTT broker {self.host} took too long") from exc
        except DestinationRefused:
            raise
        failure: OSError | None = None
        for address in addresses:
            try:
                return socket.create_connection((str(address), self.port), timeout=self.connect_timeout)
            except OSError as exc:
                failure = exc
        raise failure or OSError(f"MQTT broker {self.host} has no address")
