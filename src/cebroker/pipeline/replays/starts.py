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

from cebroker.storage.archive import EventArchive, Replay, ReplayRequest
from cebroker.subscription import Subscription

#: Derives the id of a subscription's start replay from the subscription's id.
_NAMESPACE = uuid.UUID("5f0c3c52-4be3-4b8e-9f49-2d1b7c9e3a61")
#: The end of a start replay's time range: its bound is the events accepted before it.
UNBOUNDED = 1e18


def start_id(subscription: str) -> str:
    """The id of the start replay of ``subscription``."""
    return str(uuid.uuid5(_NAMESPACE, subscription))


async def begin(archive: EventArchive, subscription: Subscription) -> Replay | None:
    """Create the subscription's start replay if its ``startfrom`` asks for one (and the archive
    is on); an existing one is returned as it is."""
    since = subscription.delivery.startfrom
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
