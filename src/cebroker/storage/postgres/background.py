"""One background loop of the PostgreSQL storage (the listener, the vacuum): started once,
cancelled and awaited when the storage closes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine


class Background:
    """The task of ``run()``, named ``name``, while started."""

    def __init__(self, name: str, run: Callable[[], Coroutine[object, object, None]]) -> None:
        self._name = name
        self._run = run
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop, unless it runs."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        """Cancel the loop and wait until it has ended."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
