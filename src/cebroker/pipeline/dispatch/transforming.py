"""A subscription's transformation applied to a delivery on its way to the sender.

Evaluated once per attempt on the stored event (:func:`cebroker.pipeline.transform.transform`,
the function every preview calls too). A dropped delivery is settled as done, counted with the
outcome ``dropped``; a failed transformation makes the delivery a dead letter at once with the
reason and position: no retry (the same event fails the same way), nothing counted toward the
sink's circuit, and the subscription goes on. Dead letters, the archive and replays keep the
stored event.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ceprotocols.sender import Destination

from cebroker.pipeline.dispatch.completions import Completions
from cebroker.pipeline.dispatch.failures import Failures
from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.transform import Dropped, Failed, OutputCheck, Transforms, transform
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")


class Transformer:
    """Applies transformations for the attempts and settles what they drop or fail."""

    def __init__(
        self,
        *,
        completions: Completions,
        failures: Failures,
        metrics: PipelineMetrics,
        check: OutputCheck | None = None,
    ) -> None:
        self._transforms = Transforms()
        self._check = check
        self._completions = completions
        self._failures = failures
        self._metrics = metrics

    async def apply(
        self,
        lane: Lane,
        item: Item,
        subscription: Subscription,
        policy: DeliveryPolicy,
        destination: Destination,
        *,
        batch: bool = False,
    ) -> tuple[Mapping[str, Any], Destination] | None:
        """What to send for ``item`` and where; ``None`` when it was settled here (dropped or
        dead-lettered)."""
        compiled = self._transforms.of(subscription)
        if compiled is None:
            return item.event, destination
        outcome = (
            compiled
            if isinstance(compiled, Failed)
            else transform(compiled, item.event, destination, batch=batch, check=self._check)
        )
        if isinstance(outcome, Dropped):
            self._metrics.deliveries.labels(self._metrics.label(lane.id), "dropped").inc()
            self._completions.delivered(lane, item)
            return None
        if isinstance(outcome, Failed):
            reason = outcome.message
            await self._failures.give_up(
                lane, item, policy, GiveUp(item.row.attempts + 1, reason, None, None)
            )
            return None
        if outcome.warnings:
            self._metrics.validation_warnings.inc()
            log.warning(
                "subscription %s: a transformed event differs from its definition: %s",
                lane.id,
                "; ".join(outcome.warnings),
            )
        return outcome.event, outcome.destination
