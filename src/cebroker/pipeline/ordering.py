"""Ordered delivery: which ordering group an event's delivery belongs to.

A subscription with ``config.ordering: "partitionkey"`` receives the events that carry the same
``partitionkey`` extension (the CloudEvents Partitioning extension) one after the other, in
acceptance order; the delivery log enforces it through ordering groups
(:mod:`cebroker.storage.deliveries`). Events without the attribute are not ordered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The extension attribute whose value orders a subscription's deliveries.
PARTITION_KEY = "partitionkey"


def partition_key(event: Mapping[str, Any]) -> str | None:
    """The event's ``partitionkey`` in its canonical string form, or None if it has none (the
    broker accepts strings, booleans and integers as extension values)."""
    value = event.get(PARTITION_KEY)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
