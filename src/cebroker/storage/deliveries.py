"""The delivery log: the contracts every backend's log provides, bundled, and their records.

The delivery log holds what the pipeline must not lose: accepted events, one delivery entry
per (event, matched subscription), dead letters with their reason, per-subscription counts and
the de-duplication keys of recent events (per publishing tenant, source and id). It is made of
small contracts, one capability each, and each part of the pipeline is typed with the ones it
uses:

========================  =========================================  ==============================
contract                  module                                     what it holds
========================  =========================================  ==============================
:class:`Ingest`           :mod:`cebroker.storage.ingest`             ``append`` (events + deliveries)
:class:`DueQueue`         :mod:`cebroker.storage.queue`              ``due``, ``backlog``
:class:`Outcomes`         :mod:`cebroker.storage.outcomes`           ``complete``, ``drop``,
                                                                     ``reschedule``,
                                                                     ``dead_letter``, ``expire``
:class:`DeadLetters`      :mod:`cebroker.storage.deadletters`        ``dead_letters``, ``redrive``
:class:`DeliveryStats`    :mod:`cebroker.storage.stats`              ``pending``, ``status``,
                                                                     ``statuses``
                                                                     (:class:`SubscriptionCounts`)
:class:`RateBuckets`      :mod:`cebroker.storage.buckets`            ``take``
:class:`Cleanup`          :mod:`cebroker.storage.cleanup`            ``forget``, ``purge_seen``
:class:`Claims`           :mod:`cebroker.storage.claims`             ``instances``, ``holds``,
                                                                     ``release``, ``watch``,
                                                                     ``waiting`` (+ ``take``)
========================  =========================================  ==============================

:class:`DeliveryLog` is every contract but :class:`Claims`, which only a log that several
instances share provides (:attr:`cebroker.storage.Storage.claims`; None for SQLite). The
records are defined next to their contract and re-exported here.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from cebroker.storage.buckets import RateBuckets
from cebroker.storage.claims import Claims, DueListener
from cebroker.storage.cleanup import Cleanup
from cebroker.storage.deadletters import DeadLetter, DeadLetters
from cebroker.storage.ingest import Appended, Incoming, Ingest
from cebroker.storage.outcomes import Outcomes
from cebroker.storage.queue import HELD_AT, DueQueue, Limits, Pending
from cebroker.storage.stats import DeliveryStats, SubscriptionCounts

__all__ = [
    "HELD_AT",
    "Appended",
    "Claims",
    "Cleanup",
    "DeadLetter",
    "DeadLetters",
    "DeliveryLog",
    "DeliveryStats",
    "DueListener",
    "DueQueue",
    "Incoming",
    "Ingest",
    "Limits",
    "Outcomes",
    "Pending",
    "RateBuckets",
    "SubscriptionCounts",
]


@runtime_checkable
class DeliveryLog(Ingest, DueQueue, Outcomes, DeadLetters, DeliveryStats, RateBuckets, Cleanup, Protocol):
    """Durable events, deliveries, dead letters and counts: every contract a backend's log
    provides (a shared backend's log provides :class:`Claims` too); the storage bundle opens
    and closes it.

    Durability: ``append``, ``redrive`` and ``forget`` (whose success a client or upstream is
    told) survive power loss once they return. The dispatcher's bookkeeping (``complete``,
    ``drop``, ``reschedule``, ``dead_letter``, ``expire``, ``purge_seen``) may be lost to a power
    cut, not to a process crash: losing it only repeats work (a confirmed delivery is delivered
    again).

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a write that
    raises stored nothing. ``append`` may also raise :class:`cebroker.errors.Overloaded` when
    too many writes are waiting, and TypeError for an event that cannot be serialized as JSON
    (that call alone fails; concurrent calls are not affected).
    """
