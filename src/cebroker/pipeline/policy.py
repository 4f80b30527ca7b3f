"""The delivery policy under the names the dispatch parts know it by: a subscription's typed
``config`` (:mod:`cebroker.subscription_settings.delivery`), which every realized subscription
holds as ``delivery``."""

from cebroker.subscription_settings.delivery import (
    BACKOFFS,
    MAX_BATCH_DELAY,
    MAX_BATCH_EVENTS,
    MAX_CONCURRENCY,
    ORDERINGS,
    POLICY_KEYS,
    DeliverySettings,
    parse_delivery_settings,
)

#: What a delivery follows: its subscription's :class:`DeliverySettings`.
DeliveryPolicy = DeliverySettings
#: Parses a ``config`` (:func:`parse_delivery_settings`).
parse_policy = parse_delivery_settings

__all__ = [
    "BACKOFFS",
    "MAX_BATCH_DELAY",
    "MAX_BATCH_EVENTS",
    "MAX_CONCURRENCY",
    "ORDERINGS",
    "POLICY_KEYS",
    "DeliveryPolicy",
    "parse_policy",
]
