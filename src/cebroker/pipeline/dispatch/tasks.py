"""Background tasks a part starts and must cancel when it stops."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine


class Tasks:
    """A set of running tasks: each leaves the set when it ends; :meth:`cancel` ends the rest.

    The set also keeps a reference to every task, so that none is collected while it runs.
    """

    def __init__(self) -> None:
        self._running: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[object, object, None], name: str | None = None) -> None:
        """Run ``coro`` as a task of this set."""
        task = asyncio.create_task(coro, name=name)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def settle(self, within: float) -> None:
        """Wait until every running task has ended, or ``within`` seconds have passed."""
        if self._running and within > 0:
            await asyncio.wait(list(self._running), timeout=within)

    async def cancel(self) -> None:
        """Cancel every running task and wait until each has ended."""
        tasks = list(self._running)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
