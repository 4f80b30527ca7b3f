"""The broker advertises itself in its own registry.

Two endpoints are kept in place on every write (recreated if deleted, corrected if edited):

* ``<id>.subscriptions``: ``usage: ["subscriber"]``, protocol ``HTTP``, pointing at the
  broker's ``/subscriptions`` (the CloudEvents Subscriptions API), with the extension
  attributes ``subscriptiondialects`` (filter dialects) and ``subscriptionprotocols``
  (delivery protocols), and ``subscriptionurl``;
* ``<id>.events``: ``usage: ["producer"]``, protocol ``HTTP``, pointing at ``/events``.

Both list every message group of the registry in ``messagegroups``: the broker carries any
event, and each group's definitions describe events it carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cefilters.dialects import DIALECTS
from ceprotocols import SENDERS

from cebroker.registry.model import GROUP_TYPES
from cebroker.registry.writes import Writer

#: The Subscriptions API filter dialects the broker implements (the filter library's registry).
DEFAULT_DIALECTS = tuple(DIALECTS)
#: Subscription ``protocol`` values the broker delivers with (the sender registry).
DEFAULT_PROTOCOLS = tuple(SENDERS)


@dataclass(frozen=True, slots=True)
class Advertiser:
    """Keeps the broker's two endpoints in the registry (a write hook)."""

    base_url: str
    endpoint_id: str = "cebroker"
    dialects: Sequence[str] = DEFAULT_DIALECTS
    protocols: Sequence[str] = DEFAULT_PROTOCOLS

    @property
    def subscriber_id(self) -> str:
        return f"{self.endpoint_id}.subscriptions"

    @property
    def ingress_id(self) -> str:
        return f"{self.endpoint_id}.events"

    def desired(self, groups: list[str]) -> dict[str, dict[str, Any]]:
        """The two endpoints' attributes, linked to the message groups ``groups`` (xids)."""
        base = self.base_url.rstrip("/")
        common = {"protocol": "HTTP", "envelope": "CloudEvents/1.0", "messagegroups": groups}
        return {
            self.subscriber_id: {
                "description": "Subscription manager of this broker (CloudEvents Subscriptions API)",
                "usage": ["subscriber"],
                **common,
                "protocoloptions": {"endpoints": [{"uri": f"{base}/subscriptions"}], "method": "POST"},
                "subscriptionurl": f"{base}/subscriptions",
                "subscriptiondialects": list(self.dialects),
                "subscriptionprotocols": list(self.protocols),
            },
            self.ingress_id: {
                "description": "Event ingress of this broker: POST CloudEvents here",
                "usage": ["producer"],
                **common,
                "protocoloptions": {"endpoints": [{"uri": f"{base}/events"}], "method": "POST"},
            },
        }

    def __call__(self, writer: Writer) -> None:
        """Bring the two endpoints in line with the registry's message groups."""
        rows = writer.rows
        groups = [row.xid for row in rows.children("/", "messagegroups")]
        endpoints = GROUP_TYPES["endpoints"]
        for eid, attrs in self.desired(groups).items():
            row = rows.get(f"/endpoints/{eid}")
            current = {k: v for k, v in (row.attrs if row else {}).items() if k not in _BOOKKEEPING}
            if current != attrs:
                writer.upsert_group(endpoints, eid, {**attrs, "epoch": None}, patch=False)


_BOOKKEEPING = frozenset({"epoch", "createdat", "modifiedat"})
