"""Whether the storage accepts writes, as last observed, and its recovery probe.

Every backend reports each :class:`~cebroker.storage.errors.StorageUnavailable` it raises and
each write that succeeds. The first failure of an episode is logged once, as a warning naming
the cause (no traceback: the cause is the environment, not a bug); ``readyz`` answers 503 naming
it; while the episode lasts a background task probes the storage with a tiny write, so recovery
is noticed without waiting for traffic. The first successful write ends the episode with an info
line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from cebroker.storage.errors import StorageUnavailable

log = logging.getLogger("cebroker.storage")

#: Seconds between recovery probes while the storage is unavailable.
PROBE_INTERVAL = 1.0


class StorageHealth:
    """The storage's state as last observed; every method runs on the event loop."""

    def __init__(self, name: str) -> None:
        self.name = name
        #: Why the storage is unavailable, or None while it works.
        self.cause: str | None = None
        self._since = 0.0
        self._episode = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: Called with the cause when an episode starts, and with None when it ends.
        self._observers: list[Callable[[str | None], None]] = []

    def observe(self, observer: Callable[[str | None], None]) -> None:
        """Call ``observer(cause)`` when the storage becomes unavailable, ``observer(None)`` when
        it is available again (on the event loop; it must not block)."""
        self._observers.append(observer)

    def _tell(self, cause: str | None) -> None:
        for observer in list(self._observers):
            try:
                observer(cause)
            except Exception:
                log.exception("a storage health observer failed")

    @property
    def ok(self) -> bool:
        """True unless the last storage call failed and no write has succeeded since."""
        return self.cause is None

    def failed(self, error: StorageUnavailable) -> None:
        """A storage call failed: start an episode (logged once) or continue the current one."""
        if self.cause is None:
            self._since = time.monotonic()
            log.warning("%s: %s; requests that need it answer 503 until it recovers", self.name, error)
            self._episode.set()
            self.cause = error.cause
            self._tell(error.cause)
        self.cause = error.cause

    def succeeded(self) -> None:
        """A write committed: end the current episode, if any."""
        if self.cause is None:
            return
        log.info(
            "%s: storage available again after %.1f s (was: %s)",
            self.name,
            time.monotonic() - self._since,
            self.cause,
        )
        self.cause = None
        self._episode.clear()
        self._tell(None)

    def watch(self, probe: Callable[[], Awaitable[None]], interval: float = PROBE_INTERVAL) -> None:
        """Run ``probe`` (a tiny write) every ``interval`` seconds while an episode lasts."""
        if self._task is None:
            self._task = asyncio.create_task(self._probe_loop(probe, interval), name="cebroker-storage-probe")

    async def stop(self) -> None:
        """Stop probing."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _probe_loop(self, probe: Callable[[], Awaitable[None]], interval: float) -> None:
        while True:
            await self._episode.wait()
            await asyncio.sleep(interval)
            if self.cause is None:
                continue
            # The probe goes through the backend's normal write path, which reports its outcome
            # here (failed or succeeded) itself; an unavailable storage is what is expected.
            with contextlib.suppress(StorageUnavailable):
                await probe()
