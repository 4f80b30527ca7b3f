"""The delivery policy under the name the dispatch parts know it by: the subscription's typed
``config`` (:mod:`cebroker.subscription_settings.delivery`)."""

from cebroker.subscription_settings.delivery import (
    BACKOFFS,
    MAX_BATCH_DELAY,
    MAX_BATCH_EVENTS,
    MAX_CONCURRENCY,
    ORDERINGS,
    POLICY_KEYS,
    DeliveryPolicy,
    parse_policy,
)

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
