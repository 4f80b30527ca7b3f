"""Which archived events a replay delivers, decided as live matching decides.

A replay delivers the events its subscription matches (``source``, ``types``, ``filters``) and,
if the replay has one, its extra filter too. Both go into a :class:`cefilters.SubscriptionIndex`
of one entry, the same index and compiled filters that match every ingested event: a replay
never disagrees with what live delivery would have done. The extra filter is one more element
of the ``filters`` array, which the Subscriptions API defines as "all must match"; so is the
receive policy of the subscription's tenant (``--tenant-policies``), as in live matching: a
replay never delivers what the tenant may not receive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from cefilters import BudgetObserver, SubscriptionIndex

from cebroker.pipeline.ordering import partition_key
from cebroker.storage.archive import Archived
from cebroker.subscription import Subscription


class ReplayFilter:
    """The events of ``subscription`` a replay delivers, and their ordering groups.

    ``replay`` names the replay (its deliveries of one partition key form a group of their own,
    apart from live deliveries); ``extra`` is the replay's extra filter, already validated;
    ``receive`` the tenant's receive policy (:meth:`cebroker.pipeline.matcher.Matcher.receive_filter`).

    Raises:
        cefilters.FilterError: a filter the index refuses (validated earlier, so a bug).
    """

    def __init__(
        self,
        subscription: Subscription,
        replay: str,
        extra: Mapping[str, Any] | None = None,
        *,
        receive: Mapping[str, Any] | None = None,
        observer: BudgetObserver | None = None,
    ) -> None:
        self.subscription = subscription
        self._replay = replay
        self._ordered = subscription.delivery.ordering
        self._index: SubscriptionIndex[int] = SubscriptionIndex(observer=observer)
        filters = [*subscription.filters, *(f for f in (extra, receive) if f is not None)]
        self._index.add(
            0,
            filters,
            source=subscription.source,
            types=list(subscription.types) if subscription.types is not None else None,
        )

    def matches(self, event: Mapping[str, Any]) -> bool:
        """Whether the replay delivers ``event``."""
        return bool(self._index.match(event))

    def group(self, event: Mapping[str, Any]) -> str | None:
        """The ordering group of the event's replayed delivery (None: unordered)."""
        if not self._ordered:
            return None
        key = partition_key(event)
        return None if key is None else f"{self._replay} {key}"

    def pick(self, events: Sequence[Archived]) -> list[tuple[int, str | None]]:
        """``(seq, group)`` of the events to deliver, in the order given (the archive's ``Pick``)."""
        picked: list[tuple[int, str | None]] = []
        for archived in events:
            event = orjson.loads(archived.body)
            if self.matches(event):
                picked.append((archived.seq, self.group(event)))
        return picked

    def count(self, events: Sequence[Archived]) -> int:
        """How many of ``events`` the replay delivers."""
        return sum(1 for archived in events if self.matches(orjson.loads(archived.body)))
