"""Pull delivery's service: long-poll receive and per-token settlement of PULL subscriptions.

The routes (:mod:`cebroker.pipeline.routes.pull`) and the Event Grid face call :class:`Puller`.
A waiting receive holds no thread and no database connection: it waits on an
:class:`asyncio.Event` per subscription, set when this instance's ingest committed deliveries
for it, or when a shared log told of deliveries due elsewhere (a release on another instance,
another instance's ingest); it also looks again every :data:`RECHECK` seconds, for locks that
ended and releases whose delay passed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from ceprotocols.sender import Destination

from cebroker.pipeline.dispatch.lane import REPLAY_ATTRIBUTE
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.transform import Dropped, Failed, OutputCheck, Transforms, transform
from cebroker.storage.pull import Locked, LockStats, PullLog, TokenResult
from cebroker.subscription import PULL, Subscription
from cebroker.subscription_settings.protocols import PullSettings

#: Seconds between two looks of a waiting receive when nobody wakes it.
RECHECK = 1.0


@dataclass(frozen=True, slots=True)
class Received:
    """An event handed to a consumer: its lock token, delivery count, lock end and the event."""

    token: str
    count: int
    locked_until: float
    event: Mapping[str, Any]


class Waiters:
    """Per subscription, the event waiting receives sleep on."""

    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self.waiting = 0

    def notify(self, subscription: str | None) -> None:
        """Deliveries of ``subscription`` (None: of any) may be there: wake its receives."""
        targets = self._events.values() if subscription is None else [self._events.get(subscription)]
        for event in list(targets):
            if event is not None:
                event.set()

    async def wait(self, subscription: str, longest: float) -> None:
        """Return when woken for ``subscription`` or after ``longest`` seconds."""
        event = self._events.setdefault(subscription, asyncio.Event())
        self.waiting += 1
        try:
            await asyncio.wait_for(event.wait(), longest)
        except TimeoutError:
            pass
        finally:
            self.waiting -= 1
            if event.is_set():  # every waiter woke: the next wait starts unset
                event.clear()


def _settings(subscription: Subscription) -> PullSettings:
    """The settings of a PULL subscription (the routes hand over no other kind)."""
    settings = subscription.protocol_settings
    if not isinstance(settings, PullSettings):
        raise TypeError(f"subscription {subscription.id} is not a PULL subscription")
    return settings


class Puller:
    """Receive (with a long poll) and settle a PULL subscription's deliveries."""

    def __init__(
        self,
        log: PullLog,
        metrics: PipelineMetrics,
        *,
        check: OutputCheck | None = None,
        settled: Callable[[], None] = lambda: None,
    ) -> None:
        # ``settled``: deliveries left the log (a replay waiting for room may queue more).
        self._settled = settled
        self._log = log
        self._metrics = metrics
        self._check = check
        self._transforms = Transforms()
        self.waiters = Waiters()

    async def receive(self, subscription: Subscription, limit: int, wait: float) -> list[Received]:
        """Up to ``limit`` events, waiting up to ``wait`` seconds for the first."""
        started = time.monotonic()
        deadline = started + wait
        settings = _settings(subscription)
        lock = float(settings.lockduration)
        most = settings.maxdeliverycount
        while True:
            locked = await self._log.receive(subscription.id, limit, lock, most)
            left = deadline - time.monotonic()
            if locked or left <= 0:
                break
            self._metrics.pull_waiting.inc()
            try:
                await self.waiters.wait(subscription.id, min(left, RECHECK))
            finally:
                self._metrics.pull_waiting.dec()
        self._metrics.pull_wait.observe(time.monotonic() - started)
        received = await self._transformed(subscription, [_received(item) for item in locked])
        self._metrics.pull_received.inc(len(received))
        return received

    async def _transformed(self, subscription: Subscription, items: list[Received]) -> list[Received]:
        """The events as the subscription's transformation makes them (the function the push
        path and every preview call): a dropped one is acknowledged here, a failed one
        dead-lettered with the reason, as on the push path; the others are handed out."""
        compiled = self._transforms.of(subscription)
        if compiled is None or not items:
            return items
        destination = Destination(protocol=PULL, sink="", settings=subscription.protocolsettings)
        out: list[Received] = []
        dropped: list[str] = []
        failed: dict[str, list[str]] = {}
        for item in items:
            outcome = (
                compiled
                if isinstance(compiled, Failed)
                else transform(compiled, item.event, destination, check=self._check)
            )
            if isinstance(outcome, Dropped):
                dropped.append(item.token)
            elif isinstance(outcome, Failed):
                failed.setdefault(outcome.message, []).append(item.token)
            else:
                out.append(dataclasses.replace(item, event=outcome.event))
        if dropped:
            await self._log.acknowledge(subscription.id, dropped)
        for reason, tokens in failed.items():
            await self._log.reject(subscription.id, tokens, reason)
        if dropped or failed:
            self._settled()
        return out

    async def acknowledge(self, subscription: Subscription, tokens: Sequence[str]) -> list[TokenResult]:
        """Complete the locked deliveries."""
        results = await self._log.acknowledge(subscription.id, tokens)
        self._metrics.pull_settled.labels("acknowledged").inc(_ok(results, self._metrics))
        self._settled()
        return results

    async def release(
        self, subscription: Subscription, tokens: Sequence[str], delay: float | None
    ) -> list[TokenResult]:
        """Give the deliveries back, due after ``delay`` (None: the subscription's release delay)."""
        chosen = float(_settings(subscription).releasedelay) if delay is None else delay
        results = await self._log.release(subscription.id, tokens, chosen)
        self._metrics.pull_settled.labels("released").inc(_ok(results, self._metrics))
        if chosen <= 0:
            self.waiters.notify(subscription.id)
        return results

    async def reject(
        self, subscription: Subscription, tokens: Sequence[str], reason: str
    ) -> list[TokenResult]:
        """Dead-letter the deliveries with ``reason``."""
        results = await self._log.reject(subscription.id, tokens, reason)
        self._metrics.pull_settled.labels("rejected").inc(_ok(results, self._metrics))
        self._settled()
        return results

    async def renew(self, subscription: Subscription, tokens: Sequence[str]) -> list[TokenResult]:
        """Extend the locks by the subscription's lock duration from now."""
        lock = float(_settings(subscription).lockduration)
        results = await self._log.renew(subscription.id, tokens, lock)
        self._metrics.pull_settled.labels("renewed").inc(_ok(results, self._metrics))
        return results

    async def locks(self, subscription: Subscription) -> LockStats:
        """Backlog, locked deliveries and the oldest lock's start."""
        return await self._log.locks(subscription.id)


def _ok(results: Sequence[TokenResult], metrics: PipelineMetrics) -> int:
    """How many tokens succeeded (the failures are counted by reason)."""
    for result in results:
        if result.error is not None:
            metrics.pull_failed.labels(result.error).inc()
    return sum(1 for r in results if r.error is None)


def _received(item: Locked) -> Received:
    """The locked delivery as handed out; a replayed one marked with its replay, as on push."""
    event = orjson.loads(item.body)
    if item.replay is not None:
        event[REPLAY_ATTRIBUTE] = item.replay
    return Received(item.token, item.count, item.locked_until, event)
