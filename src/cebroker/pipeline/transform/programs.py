"""The compiled transformation of every subscription that has one, compiled once per revision."""

from __future__ import annotations

from typing import Final

from cebroker.pipeline.transform.apply import Failed
from cebroker.pipeline.transform.spec import CONFIG_KEY, Transformation, TransformSpecError, parse_transform
from cebroker.subscription import Subscription

#: Subscriptions whose compiled transformation is kept (past it the cache starts over).
CACHE_LIMIT: Final = 10_000


class Transforms:
    """Compiles ``config.transform`` of a subscription revision on first use and keeps it."""

    def __init__(self) -> None:
        self._compiled: dict[str, tuple[Subscription, Transformation | Failed | None]] = {}

    def of(self, subscription: Subscription) -> Transformation | Failed | None:
        """The subscription's transformation; ``None`` without one; :class:`Failed` when the
        stored one does not compile (it did when it was saved: only a stored record written
        under other limits gets here, and each of its deliveries fails with the reason)."""
        hit = self._compiled.get(subscription.id)
        if hit is not None and hit[0] is subscription:
            return hit[1]
        value = compile_of(subscription)
        if len(self._compiled) >= CACHE_LIMIT:
            self._compiled.clear()
        self._compiled[subscription.id] = (subscription, value)
        return value


def compile_of(subscription: Subscription) -> Transformation | Failed | None:
    """Compile the subscription's ``config.transform`` (see :meth:`Transforms.of`)."""
    spec = subscription.config.get(CONFIG_KEY)
    if spec is None:
        return None
    try:
        return parse_transform(spec)
    except TransformSpecError as error:
        return Failed(f"config.transform {error.message}")
