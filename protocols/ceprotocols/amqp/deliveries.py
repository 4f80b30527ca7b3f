"""A sending link's deliveries through proton's C API, without a Python object per message.

proton's ``Link.delivery`` makes a Python ``Delivery`` for every message: a wrapper whose
attribute record and two ``Disposition`` objects cost several times the C calls themselves
(making, advancing and settling one: 8.4 µs against 1.5 µs, and about a fifth of an AMQP
delivery's CPU in the broker's drain). The sender asks a delivery four things and keeps it only
until it is settled, so it calls the functions of proton's C API (``pn_delivery`` and the like)
through ``cproton``, the binding proton's own classes are written on. A delivery here is the C
pointer; it is never used after :func:`settle` (proton then frees it once both sides have
settled), and its link outlives it (the connection fails every delivery it still holds before
letting a link or itself go).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NewType

import cproton
from proton import Sender

#: A delivery: proton's C pointer (``pn_delivery_t *``).
Handle = NewType("Handle", object)

_new: Callable[[object, str], Handle] = cproton.pn_delivery
_advance: Callable[[object], bool] = cproton.pn_link_advance

#: Whether the peer has settled the delivery.
settled: Callable[[Handle], bool] = cproton.pn_delivery_settled
#: The outcome the peer gave (``Delivery.ACCEPTED``, ``REJECTED``...; 0 for none).
remote_state: Callable[[Handle], int] = cproton.pn_delivery_remote_state
#: Settle the delivery on our side: after this it must not be used.
settle: Callable[[Handle], None] = cproton.pn_delivery_settle


def start(link: Sender, tag: str) -> Handle:
    """A new delivery on ``link`` (its current one: the bytes streamed next are its message)."""
    return _new(link._impl, tag)


def advance(link: Sender) -> None:
    """End the link's current delivery (its message is complete)."""
    _advance(link._impl)
