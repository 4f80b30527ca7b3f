"""Clean-up: what the log forgets (the :class:`Cleanup` contract)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Cleanup(Protocol):
    """Forgets a deleted subscription's rows and expired de-duplication keys.

    Errors: any call may raise :class:`cebroker.storage.errors.StorageUnavailable`; a call that
    raises removed nothing. ``forget`` survives power loss once it returns; ``purge_seen`` may
    be lost to a power cut (it runs again).
    """

    async def forget(self, subscription: str) -> int:
        """Remove everything kept for a deleted subscription; returns how many deliveries went."""
        ...

    async def purge_seen(self) -> int:
        """Forget de-duplication keys older than the window; returns how many."""
        ...
