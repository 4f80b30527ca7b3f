"""A subscription's transformation applied to a delivery on its way to the sender.

Evaluated once per attempt on the stored event (:func:`cebroker.pipeline.transform.prepare`,
the function every preview calls too, through ``transform``). A dropped delivery is settled as
done, counted with the outcome ``dropped``; a failed transformation makes the delivery a dead
letter at once with the reason and position: no retry (the same event fails the same way),
nothing counted toward the sink's circuit, and the subscription goes on. Dead letters, the
archive and replays keep the stored event.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ceprotocols.sender import Destination

from cebroker.pipeline.dispatch.lane import Item, Lane
from cebroker.pipeline.dispatch.outcomes import SKIPPED, DeadLetter, Skipped
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.transform import Dropped, Failed, OutputCheck, Transforms, prepare
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")


class Transformer:
    """Applies transformations for the attempts; what they drop or fail is an outcome."""

    def __init__(self, *, metrics: PipelineMetrics, check: OutputCheck | None = None) -> None:
        self._transforms = Transforms()
        self._check = check
        self._metrics = metrics

    def apply(
        self,
        lane: Lane,
        item: Item,
        subscription: Subscription,
        policy: DeliveryPolicy,
        destination: Destination,
        *,
        batch: bool = False,
    ) -> tuple[Mapping[str, Any], Destination] | Skipped | DeadLetter:
        """What to send for ``item`` and where, or the outcome when nothing is sent: dropped
        (:class:`~.outcomes.Skipped`) or failed (a :class:`~.outcomes.DeadLetter`)."""
        compiled = self._transforms.of(subscription)
        if compiled is None:
            return item.event, destination
        outcome = (
            compiled
            if isinstance(compiled, Failed)
            else prepare(compiled, item.event, destination, batch=batch, check=self._check)
        )
        if isinstance(outcome, tuple):  # an outgoing event with nothing to warn about
            return outcome[0], outcome[1]
        if isinstance(outcome, Dropped):
            return SKIPPED
        if isinstance(outcome, Failed):
            return DeadLetter(policy, GiveUp(item.row.attempts + 1, outcome.message, None, None))
        if outcome.warnings:
            self._metrics.validation_warnings.inc()
            log.warning(
                "subscription %s: a transformed event differs from its definition: %s",
                lane.id,
                "; ".join(outcome.warnings),
            )
        return outcome.event, outcome.destination
