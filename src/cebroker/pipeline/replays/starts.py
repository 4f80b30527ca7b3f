"""``config.startfrom``: a subscription that starts in the past.

``now`` (the default) starts with the events accepted after its creation; ``earliest`` or an RFC
3339 time also delivers the archived events accepted since then, as a replay created with the
subscription (its id is derived from the subscription's, so every instance that hears of the
creation, and a restart that finds it missing, create the same one once). That replay covers
exactly the events accepted before the subscription existed (see ``ReplayRequest.boundary``):
the later ones reach it live. A time before the oldest event held starts at the oldest held.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ceprotocols.eventform import is_timestamp

from cebroker.storage.archive import EventArchive, Replay, ReplayRequest
from cebroker.subscription import Subscription

#: Derives the id of a subscription's start replay from the subscription's id.
_NAMESPACE = uuid.UUID("5f0c3c52-4be3-4b8e-9f49-2d1b7c9e3a61")
#: The end of a start replay's time range: its bound is the events accepted before it.
UNBOUNDED = 1e18


def instant(text: str) -> float:
    """Epoch seconds of an RFC 3339 timestamp (checked with ``is_timestamp`` first; a leap
    second counts as the second before it).

    Raises:
        ValueError: not an RFC 3339 timestamp.
    """
    if not is_timestamp(text):
        raise ValueError(f"not an RFC 3339 timestamp: {text[:64]!r}")
    date, _, rest = text.replace("t", "T").replace("z", "Z").partition("T")
    if rest[6:8] == "60":
        rest = rest[:6] + "59" + rest[8:]
    return datetime.fromisoformat(f"{date}T{rest}").timestamp()


def start_of(config: Mapping[str, Any]) -> float | None:
    """Where a subscription's ``startfrom`` says to start (epoch seconds; 0 for ``earliest``),
    or None for ``now`` (and for a value the API would have refused)."""
    value = config.get("startfrom")
    if not isinstance(value, str) or value.lower() == "now":
        return None
    if value.lower() == "earliest":
        return 0.0
    try:
        return instant(value)
    except ValueError:
        return None


def start_id(subscription: str) -> str:
    """The id of the start replay of ``subscription``."""
    return str(uuid.uuid5(_NAMESPACE, subscription))


async def begin(archive: EventArchive, subscription: Subscription) -> Replay | None:
    """Create the subscription's start replay if its ``startfrom`` asks for one (and the archive
    is on); an existing one is returned as it is."""
    since = start_of(subscription.config)
    if since is None or archive.retention <= 0:
        return None
    request = ReplayRequest(
        id=start_id(subscription.id),
        subscription=subscription.id,
        since=since,
        until=UNBOUNDED,
        boundary=True,
    )
    return await archive.create_replay(request)
