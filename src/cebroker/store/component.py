"""The store as a :class:`cebroker.app.Component`: opened first, closed last."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute

from cebroker.store.base import SubscriptionStore


class StoreComponent:
    """Opens the subscription store at start-up and closes it at shutdown; serves no routes.

    It comes first in ``build_components`` so that every other part finds the store open.
    """

    def __init__(self, store: SubscriptionStore) -> None:
        self.store = store

    def routes(self) -> Sequence[BaseRoute]:
        """No routes: the store is reached through the parts that use it."""
        return ()

    async def start(self) -> None:
        """Open the store (creating the database on first start)."""
        await self.store.open()

    async def stop(self) -> None:
        """Close the store."""
        await self.store.close()
