"""An in-memory sender for pipeline tests that do not test a protocol.

:class:`MemorySender` is a :class:`ceprotocols.sender.Sender` (and ``BatchSender``) that keeps
each event it is given, per sink path, instead of sending it: no socket, no server, no
encoding. A test broker gets it for its HTTP subscriptions through the same factory type the
protocol registry uses (``make_broker(senders=memory.senders)``, see
``cebroker.app.build_components``); the broker's matching, queues, retries, dead letters and
storage are the real ones. A subscription's sink is ``f"{memory.url}/path"``, a loopback address
the broker accepts and never connects to.

It is only reachable from tests: the broker takes replacement senders from the code that builds
it, never from settings or from a subscription, so a broker run by ``cebroker serve`` cannot
deliver into memory. Tests of HTTP delivery itself (headers, content modes, status codes,
handshakes, connections) use the recording HTTP sink (:mod:`support.sinks`) instead.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ceprotocols.egress import NetworkPolicy, Resolver, system_resolver
from ceprotocols.errors import DeliveryError
from ceprotocols.registry import SenderFactory
from ceprotocols.sender import BatchSender, Destination, Event, Sender
from ceprotocols.tracecontext import TraceContext

from support.waiting import wait_for


class MemorySender:
    """Keeps every event delivered to it, per sink path, in order of delivery.

    Attributes:
        url: the base of the sinks (``f"{url}/path"``): loopback, never connected to.
        scripts: per path, errors to raise at the next deliveries (each used once, in order).
        default: per path, the error to raise once its script is used up (else it delivers).
        batches: per path, the size of each batch delivered (``deliver_batch`` calls).
    """

    url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.scripts: dict[str, list[DeliveryError]] = {}
        self.default: dict[str, DeliveryError] = {}
        self.batches: dict[str, list[int]] = {}
        self._delivered: dict[str, list[dict[str, Any]]] = {}
        # The broker delivers on its own thread; the test reads on the main one.
        self._lock = threading.Lock()

    @property
    def senders(self) -> dict[str, SenderFactory]:
        """The broker's sender factories that put this sender in the HTTP sender's place."""
        return {"HTTP": self.factory}

    def factory(self, *, policy: NetworkPolicy | None = None, resolver: Resolver = system_resolver) -> Sender:
        """A :class:`~ceprotocols.registry.SenderFactory`: this sender (it connects nowhere, so
        there is no destination for the policy to check)."""
        return self

    def _take(self, path: str, events: Sequence[Event]) -> None:
        with self._lock:
            script = self.scripts.get(path)
            error = script.pop(0) if script else self.default.get(path)
            if error is None:
                self._delivered.setdefault(path, []).extend(dict(event) for event in events)
        if error is not None:
            raise error

    async def deliver(
        self, event: Event, destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Keep ``event`` under its sink's path, or raise the error scripted for that path."""
        self._take(urlsplit(destination.sink).path, [event])

    async def deliver_batch(
        self, events: Sequence[Event], destination: Destination, *, trace: TraceContext | None = None
    ) -> None:
        """Keep ``events`` (all or, with a scripted error, none of them) under the sink's path."""
        path = urlsplit(destination.sink).path
        self._take(path, events)
        with self._lock:
            self.batches.setdefault(path, []).append(len(events))

    async def aclose(self) -> None:
        """Nothing to close."""

    def events(self, path: str) -> list[dict[str, Any]]:
        """The events delivered to ``path`` so far, in order."""
        with self._lock:
            return list(self._delivered.get(path, ()))

    def ids(self, path: str) -> list[str]:
        """The ids of the events delivered to ``path`` so far, in order."""
        return [str(event["id"]) for event in self.events(path)]

    def wait(self, path: str, count: int, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Block until ``path`` has been given at least ``count`` events; returns them all."""
        return wait_for(
            lambda: self.events(path), lambda got: len(got) >= count, timeout, f"{count} events on {path}"
        )


if TYPE_CHECKING:  # the contracts it stands in for, checked by mypy
    _sender: Sender = MemorySender()
    _batch: BatchSender = MemorySender()
    _factory: SenderFactory = MemorySender().factory
