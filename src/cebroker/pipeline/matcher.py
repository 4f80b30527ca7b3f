"""The live view of subscriptions the pipeline matches against.

It follows the store's change feed, so a create, update or delete applies to every event
ingested after the API call returned, without polling. Matching goes through
``cefilters.SubscriptionIndex`` (cost set by the event, not the number of subscriptions).
Listeners run on the event loop (the store publishes there), as does matching, so the index
needs no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from cefilters import BudgetObserver, Explanation, FilterError, SubscriptionIndex

from cebroker.contracts import Event
from cebroker.pipeline.brokerevents import isolation_filter
from cebroker.storage.subscriptions import ChangeKind, SubscriptionChange
from cebroker.subscription import Subscription
from cebroker.tenant_policies import TenantPolicies

log = logging.getLogger("cebroker.pipeline")


class Matcher:
    """Subscriptions by id plus their filter index, and which of them order their deliveries.

    ``policies``: the tenants' receive policies, each conjoined with the own filters of every
    subscription of its tenant, inside the index (no second pass over the matches).
    """

    def __init__(
        self, policies: TenantPolicies | None = None, *, observer: BudgetObserver | None = None
    ) -> None:
        self._policies = policies or TenantPolicies()
        #: Told of every expression evaluation stopped by its budget (counted as no match).
        self.observer = observer
        self._index: SubscriptionIndex[str] = SubscriptionIndex(observer=observer)
        self.subscriptions: dict[str, Subscription] = {}
        #: Ids of the subscriptions with ``config.ordering: partitionkey``.
        self.ordered: set[str] = set()

    def load(self, subscriptions: Iterable[Subscription]) -> None:
        """Index every subscription (at start-up)."""
        for subscription in subscriptions:
            self._put(subscription)

    def apply(self, change: SubscriptionChange) -> None:
        """Follow one committed change of the store."""
        if change.kind is ChangeKind.DELETED:
            self.subscriptions.pop(change.subscription.id, None)
            self.ordered.discard(change.subscription.id)
            self._index.remove(change.subscription.id)
        else:
            self._put(change.subscription)

    def match(self, event: Event) -> tuple[str, ...]:
        """Ids of the subscriptions that accept ``event``."""
        return tuple(self._index.match(event))

    def explain(self, subscription: str, event: Event) -> Explanation:
        """Why ``subscription`` accepts ``event`` or not, by the index that matches every event.

        Raises:
            KeyError: the subscription is not indexed.
        """
        return self._index.explain(subscription, event)

    def receive_filter(self, subscription: Subscription) -> dict[str, Any] | None:
        """The receive policy of the subscription's tenant and the isolation of broker events,
        conjoined with its own filters (a replay applies it too)."""
        tenant = subscription.tenant
        policy = self._policies.receive_filter(tenant)
        if tenant is None:
            return policy
        # A tenant's subscriptions see only that tenant's broker events (docs/broker-events.md).
        isolation = isolation_filter(tenant)
        return isolation if policy is None else {"all": [policy, isolation]}

    def _put(self, subscription: Subscription) -> None:
        filters = list(subscription.filters)
        receive = self.receive_filter(subscription)
        if receive is not None:
            filters.append(receive)  # a filters array is a conjunction
        try:
            self._index.add(
                subscription.id,
                filters,
                source=subscription.source,
                types=list(subscription.types) if subscription.types is not None else None,
            )
        except (FilterError, TypeError):
            # The API validated the filters on create; reaching this is a bug worth shouting about,
            # and the subscription must not receive events it did not ask for.
            log.exception(
                "subscription %s has filters the index refuses; it receives nothing", subscription.id
            )
            self._index.remove(subscription.id)
        self.subscriptions[subscription.id] = subscription
        if subscription.delivery.ordering:
            self.ordered.add(subscription.id)
        else:
            self.ordered.discard(subscription.id)
