"""The broker's own events described in its registry (docs/broker-events.md): with
``--broker-events on``, the message group ``dev.cebroker`` holds a message definition per broker
event type, with the JSON Schema of its data, so ``/export`` describes them and
``--event-validation enforce`` checks them. A write hook: the group is created on the first write
(the registry's start) and recreated by any later write if it was deleted; edits are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from cebroker.broker_events import GROUP, message_definitions
from cebroker.registry.model import GROUP_TYPES
from cebroker.registry.writes import Writer


@dataclass(frozen=True, slots=True)
class BrokerEventDefinitions:
    """Keeps the ``dev.cebroker`` message group in the registry (a write hook)."""

    def __call__(self, writer: Writer) -> None:
        """Create the group with its definitions when it is missing."""
        if writer.rows.get(f"/messagegroups/{GROUP}") is not None:
            return
        body = {
            "description": "Events the broker publishes about itself (dev.cebroker.*)",
            "envelope": "CloudEvents/1.0",
            "messages": message_definitions(),
        }
        writer.upsert_group(GROUP_TYPES["messagegroups"], GROUP, body, patch=False)
