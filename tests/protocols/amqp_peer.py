"""An AMQP 1.0 peer for the outcomes RabbitMQ does not give on demand: proton's own container
(its reactor, on a thread of its own) listening on a free loopback port, settling each message
it receives as a plan says (accept, reject, release, modify, hold unsettled, close the
connection) or detaching each sending link with a condition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from proton import Condition, Endpoint, Event, SSLDomain
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector
from servers.base import free_port

Action = Literal["accept", "reject", "release", "modify", "hold", "close"]


class _Handler(MessagingHandler):
    def __init__(self, peer: AmqpPeer) -> None:
        super().__init__(prefetch=100, auto_accept=False)
        self.peer = peer

    def on_start(self, event: Event) -> None:
        domain = None
        if self.peer.tls is not None:  # (certificate, key)
            domain = SSLDomain(SSLDomain.MODE_SERVER)
            domain.set_credentials(str(self.peer.tls[0]), str(self.peer.tls[1]), None)
        event.container.listen(f"127.0.0.1:{self.peer.port}", ssl_domain=domain)
        event.container.selectable(self.peer.injector)
        self.peer.ready.set()

    def on_connection_bound(self, event: Event) -> None:
        if self.peer.idle_timeout is not None and event.transport is not None:
            event.transport.idle_timeout = self.peer.idle_timeout

    def on_link_opening(self, event: Event) -> None:
        self._refuse(event)

    def on_link_opened(self, event: Event) -> None:
        self._refuse(event)  # (when the container has opened the link already)

    def _refuse(self, event: Event) -> None:
        link = event.link
        if self.peer.detach_with is None or link is None or not link.is_receiver:
            return
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.open()  # (a refused link is attached, then detached with its reason)
            link.condition = Condition(self.peer.detach_with, "refused by the test peer")
            link.close()

    def on_message(self, event: Event) -> None:
        delivery = event.delivery
        assert delivery is not None  # (a message comes with its delivery)
        action = self.peer.plan(len(self.peer.received))
        self.peer.received.append(action)
        if action == "accept":
            self.accept(delivery)
        elif action == "reject":
            self.reject(delivery)
        elif action == "release":
            self.release(delivery, delivered=False)
        elif action == "modify":
            self.release(delivery, delivered=True)  # (proton sends ``modified`` then)
        elif action == "close" and event.connection is not None:
            event.connection.close()
        # "hold": never settled

    def on_stop_peer(self, event: Event) -> None:
        self.peer.injector.close()
        self.peer.container.stop()


class AmqpPeer:
    """``plan(n)`` is the action for the n-th message received (from 0); ``detach_with``, if
    given, is the condition every sending link is detached with right after its attach;
    ``idle_timeout``, if given, the seconds of silence after which the peer gives a connection up
    (announced in its ``open`` frame: the other side must send a frame at least that often);
    ``tls``, if given, the certificate and key files of a TLS listener (``amqps``)."""

    def __init__(
        self,
        plan: Callable[[int], Action],
        *,
        detach_with: str | None = None,
        idle_timeout: float | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.tls = tls
        self.plan = plan
        self.detach_with = detach_with
        self.idle_timeout = idle_timeout
        self.port = free_port()
        self.received: list[Action] = []
        self.ready = threading.Event()
        self.injector = EventInjector()
        self.container = Container(_Handler(self))
        self._thread = threading.Thread(target=self.container.run, daemon=True)

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def __enter__(self) -> AmqpPeer:
        self._thread.start()
        if not self.ready.wait(10):
            raise RuntimeError("the AMQP test peer did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.injector.trigger(ApplicationEvent("stop_peer"))
        self._thread.join(10)
