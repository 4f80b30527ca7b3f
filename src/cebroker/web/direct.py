"""Requests the HTTP server's protocol hands to a route directly, past the ASGI app.

The ASGI path of one request costs more than a small event's whole ingest: the server builds a
task per request, and the request travels as ``receive``/``send`` messages through each layer
(request metrics, access, the endpoint), each a coroutine frame resumed on every step. A
:class:`DirectRoute` is offered the requests of its one method and path once their body is
complete, as the head's raw fields and the body's bytes, and answers them itself.

The contract keeps every answer what the app would have made of the request:

* a route *takes* a request (``take`` returns True) only when it can serve it alone with the
  answer the app would give; any other request it leaves alone (False), having changed
  nothing, and the server hands it to the app as if it had never been offered (its body is
  still there to read);
* a taken request is then answered exactly once: :meth:`Reply.answer`, or
  :meth:`Reply.decline` when serving it failed before anything changed (the app then serves it
  from the start and gives whatever answer it gives, an error included).

The server offers nothing that needs the app's handling of the connection: a request that
expects ``100 Continue``, a pipelined request, a body larger than :data:`BODY_HELD` (declared or
received so far: the app answers an oversized declaration at once), or any request while
access lines are written. A request whose connection is lost before its body is complete is
handed to the app too, which finds it incomplete and counts it as it counts any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

#: A head's fields as the server parsed them: lower-cased names, raw values, in order.
RawHeaders = Sequence[tuple[bytes, bytes]]

#: The largest body held back for a route (bytes): a larger one goes to the app as it streams in
#: (the server stops reading a connection whose unread body passes 64 KiB until the app reads).
BODY_HELD: Final = 64 * 1024


class Reply(Protocol):
    """How the route answers a request it took; exactly one call, once."""

    def answer(self, status: int, headers: RawHeaders, body: bytes) -> None:
        """Send the whole answer: ``headers`` must hold its ``content-length`` (the server adds
        its default headers, and ``connection: close`` when the connection ends after it)."""
        ...

    def decline(self) -> None:
        """Hand the request to the app after all (nothing was changed by the attempt)."""
        ...


class DirectRoute(Protocol):
    """A route the server's protocol calls for requests to :attr:`method` :attr:`path` (the
    request target exactly, with no query)."""

    @property
    def method(self) -> bytes:
        """The request method, e.g. ``b"POST"``."""
        ...

    @property
    def path(self) -> bytes:
        """The request target, e.g. ``b"/events"``."""
        ...

    def take(self, headers: RawHeaders, body: bytes, reply: Reply) -> bool:
        """Take the request (True: ``reply`` will be called) or leave it to the app (False)."""
        ...
