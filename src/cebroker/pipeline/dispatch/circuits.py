"""A circuit per subscription's sink: a sink that is down gets probes, not the backlog.

The rules (what counts, when a circuit opens, how probes are spaced) are in
:mod:`~.circuit`. This part applies them:

* **Open.** Attempts stop: deliveries already in the lane's memory queue are let go unsent
  (they stay in the log as they are, their attempts not counted) and nothing is loaded or
  handed over for the subscription. Attempts that were in flight end on their own; a failure
  that finds the circuit open (or opens it) leaves its delivery due at once instead of
  rescheduling it on its own backoff, so the due times of the waiting deliveries do not matter
  while the circuit decides. Nothing is written per pending delivery while the circuit is open.
* **Probe.** When the next probe is due and nothing of the subscription is in flight, the
  earliest due delivery is read from the log and sent, alone, through the lane (its rate limit
  applies). The circuit store grants the probe (one at a time, across broker instances).
* **Close.** The first answer from the sink that is not a counting failure closes the circuit
  (a success, or a final refusal of one event: the sink is up); the loader then loads the whole
  backlog in due order and the lane delivers it at the subscription's concurrency and rate
  limit.
* **Time to live.** While open, deliveries still become dead letters once their ``ttl`` has
  passed, with a reason naming since when the sink has been unavailable: a sweep per open
  circuit, run when the oldest pending delivery runs out of time (one read of the backlog per
  batch dead-lettered), not per delivery or per probe.

One log line when a circuit opens and one when it closes; the ``cebroker_circuit_open`` gauge
follows the state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from ceprotocols.errors import DeliveryError

from cebroker.clock import Clock, wait_or_sleep
from cebroker.pipeline.brokerevents import BrokerEvents
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.circuit import OPEN_AFTER, SinkCircuit, counts, expiry_reason, probe_delay
from cebroker.pipeline.dispatch.deadletters import DeadLetterForwarder
from cebroker.pipeline.dispatch.lane import Item
from cebroker.pipeline.dispatch.lanes import Lanes
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.retry import GiveUp
from cebroker.pipeline.dispatch.setup import DeliverySetups
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.pipeline.redaction import redact_userinfo
from cebroker.storage.circuits import Circuit, CircuitStore
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import DeliveryLog, Limits, Pending
from cebroker.subscription import Subscription

log = logging.getLogger("cebroker.pipeline")

#: Longest sleep of the probe loop: a read or write that failed is tried again after it.
RECHECK = 1.0
#: Seconds a probe's lease outlasts its timeout (another instance takes over after that).
LEASE_MARGIN = 5.0
#: Deliveries dead-lettered per write of a time-to-live sweep.
SWEEP_BATCH = 500


class Circuits:
    """The circuits of every subscription; ``run`` sends the probes and sweeps expired deliveries.

    ``schedule`` tells the loader that deliveries of a subscription wait in the log (at a time,
    0 for now); ``probe_max_delay`` is the broker's probe cap. With ``claims`` (a shared log's)
    a probe's delivery is claimed within the limits of every instance, and given back if unused.
    """

    def __init__(
        self,
        *,
        store: CircuitStore,
        journal: DeliveryLog,
        lanes: Lanes,
        subscriptions: Mapping[str, Subscription],
        setups: DeliverySetups,
        metrics: PipelineMetrics,
        clock: Clock,
        backlog: Backlog,
        forwarder: DeadLetterForwarder,
        schedule: Callable[[str, float], None],
        probe_max_delay: float,
        events: BrokerEvents | None = None,
        claims: Claims | None = None,
    ) -> None:
        self._events = events
        self._setups = setups
        self._store = store
        self._log = journal
        self._claims = claims
        self._lanes = lanes
        self._subscriptions = subscriptions
        self._metrics = metrics
        self._clock = clock
        self._backlog = backlog
        self._forwarder = forwarder
        self._schedule = schedule
        self._probe_max_delay = probe_max_delay
        #: Only subscriptions with a failure streak or an open circuit have an entry.
        self._sinks: dict[str, SinkCircuit] = {}
        self._wake = asyncio.Event()
        #: Bumped by every transition made here (see :meth:`follow`).
        self._changes = 0

    # -- what the other parts ask (cheap: on every delivery) --------------------------------------

    def closed(self, subscription: str) -> bool:
        """Whether the deliveries of ``subscription`` may be attempted."""
        sink = self._sinks.get(subscription)
        return sink is None or sink.open is None

    def admits(self, subscription: str, delivery_id: int) -> bool:
        """Whether this delivery may be attempted now: the circuit is closed, or it is the probe."""
        sink = self._sinks.get(subscription)
        return sink is None or sink.open is None or sink.probe == delivery_id

    # -- outcomes -----------------------------------------------------------------------------------

    def counting(self, subscription: str) -> bool:
        """Whether the circuit of ``subscription`` has anything to hear of an answer (a streak
        of failures, or it is open): most have not, and :meth:`answered` need not be awaited."""
        return subscription in self._sinks

    async def answered(self, subscription: str) -> None:
        """The sink answered an attempt (it confirmed it, or refused the event for good)."""
        sink = self._sinks.get(subscription)
        if sink is None:
            return
        if sink.open is None:
            del self._sinks[subscription]  # the streak is broken
            return
        await self._close(subscription, sink, "its sink answered")

    async def failed(
        self, subscription: str, delivery_id: int, policy: DeliveryPolicy, error: DeliveryError
    ) -> bool:
        """Count a failed attempt; whether the circuit is open after it (the delivery is then
        due again at once rather than on its own backoff)."""
        if not counts(error):
            await self.answered(subscription)
            return False
        sink = self._sinks.setdefault(subscription, SinkCircuit())
        if sink.open is not None:
            if sink.probe == delivery_id:
                await self._probe_failed(subscription, sink, policy, error)
            return True
        sink.streak += 1
        if sink.streak < OPEN_AFTER:
            return False
        await self._open(subscription, sink, policy, error)
        return True

    def released(self, subscription: str, delivery_id: int) -> None:
        """A delivery of ``subscription`` left its lane (its outcome is recorded, or it was let go)."""
        sink = self._sinks.get(subscription)
        if sink is None or sink.open is None:
            return
        if sink.probe == delivery_id:  # ended without an outcome (its write failed, or it was let go)
            sink.probe = None
            sink.open = dataclasses.replace(sink.open, next_probe_at=self._clock.now() + RECHECK)
        self._wake.set()

    async def replaced(self, subscription: Subscription) -> None:
        """The subscription was replaced: if its circuit is open for another sink, close it (the
        new sink has not failed anything yet)."""
        sink = self._sinks.get(subscription.id)
        if sink is None or sink.open is None or sink.target == (subscription.protocol, subscription.sink):
            return
        await self._close(subscription.id, sink, "the subscription's sink was replaced")

    def forget(self, subscription: str) -> None:
        """The subscription was deleted: drop its circuit (stored or not)."""
        sink = self._sinks.pop(subscription, None)
        if sink is not None and sink.open is not None:
            self._metrics.circuit_open.labels(self._metrics.label(subscription)).dec()

    async def discard_stored(self, subscription: str) -> None:
        """Remove the stored circuit of a deleted subscription."""
        try:
            await self._store.close(subscription)
        except Exception:
            log_failure("closing the circuit of deleted subscription %s failed", subscription)

    # -- transitions --------------------------------------------------------------------------------

    async def _open(
        self, subscription: str, sink: SinkCircuit, policy: DeliveryPolicy, error: DeliveryError
    ) -> None:
        now = self._clock.now()
        delay = probe_delay(policy, 0, error.retry_after, self._cap(policy))
        # In memory first: attempts finishing meanwhile must find the circuit open.
        self._changes += 1
        local = sink.open = Circuit(subscription, now, now + delay, 0, str(error))
        sink.sweep_at = now
        current = self._subscriptions.get(subscription)
        sink.target = None if current is None else (current.protocol, current.sink)
        self._metrics.circuit_open.labels(self._metrics.label(subscription)).inc()
        log.warning(
            "circuit of subscription %s opened after %d failed attempts in a row (last error: %s); "
            "its backlog waits, the sink gets one probe at a time",
            subscription,
            sink.streak,
            error,
        )
        try:
            stored = await self._store.open(subscription, at=now, next_probe_at=now + delay, error=str(error))
        except Exception:
            log_failure("storing the open circuit of %s failed", subscription)
        else:
            if sink.open is local:  # else it closed meanwhile
                sink.open = stored  # an instance that opened it first keeps its time
        self._emit("circuit.opened", subscription, sink.open or local, error=str(error))
        self._wake.set()

    async def _probe_failed(
        self, subscription: str, sink: SinkCircuit, policy: DeliveryPolicy, error: DeliveryError
    ) -> None:
        if sink.open is None:
            return
        now = self._clock.now()
        self._changes += 1
        failed = sink.open.failed_probes + 1
        next_at = now + probe_delay(policy, failed, error.retry_after, self._cap(policy))
        local = sink.open = dataclasses.replace(
            sink.open, next_probe_at=next_at, failed_probes=failed, last_error=str(error), probe_until=None
        )
        sink.probe = None
        try:
            stored = await self._store.probe_failed(subscription, next_probe_at=next_at, error=str(error))
        except Exception:
            log_failure("recording a failed probe of %s failed", subscription)
        else:
            if stored is None:  # another instance closed it meanwhile
                if sink.open is local:
                    self._closed(subscription, sink, "another broker instance's probe got through")
            elif sink.open is local:
                sink.open = stored
        self._wake.set()

    async def _close(self, subscription: str, sink: SinkCircuit, why: str) -> None:
        self._closed(subscription, sink, why)
        try:
            await self._store.close(subscription)
        except Exception:
            log_failure("storing the closed circuit of %s failed", subscription)

    def _closed(self, subscription: str, sink: SinkCircuit, why: str) -> None:
        """Close in memory: the whole backlog may go now."""
        self._changes += 1
        opened = sink.open
        if self._sinks.get(subscription) is sink:
            del self._sinks[subscription]
        if opened is None:
            return
        sink.open = None
        self._metrics.circuit_open.labels(self._metrics.label(subscription)).dec()
        self._emit("circuit.closed", subscription, opened, reason=why)
        log.info(
            "circuit of subscription %s closed: %s after %.1fs unavailable (%d failed probes); "
            "its backlog flows again",
            subscription,
            why,
            max(0.0, self._clock.now() - opened.opened_at),
            opened.failed_probes,
        )
        self._schedule(subscription, 0.0)

    def _emit(self, kind: str, subscription: str, circuit: Circuit, **more: str) -> None:
        """The broker event of a transition; its id derives from the circuit's opening time
        (the one every instance shares), so instances that see the same transition emit it once."""
        if self._events is None:
            return
        current = self._subscriptions.get(subscription)
        data: dict[str, object] = {
            "subscription": subscription,
            "sink": redact_userinfo(current.sink) if current is not None else None,
            "openedAt": datetime.fromtimestamp(circuit.opened_at, UTC).isoformat().replace("+00:00", "Z"),
            **more,
        }
        self._events.emit(
            kind,
            data,
            tenant=current.tenant if current is not None else None,
            key=f"{subscription}/{circuit.opened_at!r}",
        )

    # -- restart ------------------------------------------------------------------------------------

    async def restore(self) -> None:
        """Take up the circuits left open by the last run (or by other instances)."""
        for subscription, circuit in (await self._store.circuits()).items():
            if subscription not in self._subscriptions:
                await self.discard_stored(subscription)
                continue
            current = self._subscriptions[subscription]
            self._sinks[subscription] = SinkCircuit(
                open=circuit, sweep_at=self._clock.now(), target=(current.protocol, current.sink)
            )
            self._metrics.circuit_open.labels(self._metrics.label(subscription)).inc()
            log.info(
                "circuit of subscription %s is open (since the last run; last error: %s)",
                subscription,
                circuit.last_error,
            )

    async def follow(self, every: float) -> None:
        """With a store shared by several instances: every ``every`` seconds, take up the
        circuits the others opened or closed (this instance would otherwise notice only after
        failures of its own, or at its next probe); forever."""
        while True:
            await self._clock.sleep(every)
            changes = self._changes
            try:
                stored = await self._store.circuits()
            except Exception:
                log_failure("reading the open circuits failed")
                continue
            if changes != self._changes:
                continue  # a transition of this instance crossed the read: look next time
            for subscription, known in list(self._sinks.items()):
                if known.open is not None and known.probe is None and subscription not in stored:
                    self._closed(subscription, known, "another broker instance's probe got through")
            for subscription, circuit in stored.items():
                current = self._subscriptions.get(subscription)
                sink = self._sinks.get(subscription)
                if current is None or (sink is not None and sink.probe is not None):
                    continue
                if sink is None or sink.open is None:
                    self._sinks[subscription] = SinkCircuit(
                        open=circuit, sweep_at=self._clock.now(), target=(current.protocol, current.sink)
                    )
                    self._metrics.circuit_open.labels(self._metrics.label(subscription)).inc()
                    log.warning(
                        "circuit of subscription %s opened by another broker instance (last error: %s)",
                        subscription,
                        circuit.last_error,
                    )
                    self._wake.set()
                else:
                    sink.open = circuit

    # -- the loop: probes and time-to-live sweeps ---------------------------------------------------

    async def run(self) -> None:
        """Probe and sweep the open circuits when due, then sleep until the next is; forever."""
        while True:
            self._wake.clear()
            wake_at = self._clock.now() + RECHECK
            for subscription, sink in list(self._sinks.items()):
                if sink.open is None or sink.probe is not None:
                    continue
                subscription_now = self._subscriptions.get(subscription)
                lane = self._lanes.find(subscription)
                if subscription_now is None or (lane is not None and lane.inflight):
                    continue  # deleted, or attempts still end: a release wakes this loop
                policy = self._setups.of(subscription_now).policy
                if sink.sweep_at <= self._clock.now():
                    await self._sweep(subscription, sink, policy)
                if (
                    sink.open is not None
                    and sink.probe is None
                    and sink.open.next_probe_at <= self._clock.now()
                ):
                    await self._probe(subscription_now, sink, policy)
                if sink.open is not None and sink.probe is None:
                    wake_at = min(wake_at, sink.sweep_at, sink.open.next_probe_at)
            await wait_or_sleep(self._wake, max(0.0, wake_at - self._clock.now()), self._clock)

    async def _probe(self, probed: Subscription, sink: SinkCircuit, policy: DeliveryPolicy) -> None:
        subscription = probed.id
        now = self._clock.now()
        try:
            if self._claims is not None:  # claimed for this instance, within the limits of all
                rows, later = await self._log.due(
                    subscription, 1, Limits(policy.concurrency, policy.ratelimit)
                )
            else:
                rows, later = await self._log.due(subscription, 1)
        except Exception:
            log_failure("reading a probe for %s failed", subscription)
            return
        if sink.open is None or sink.probe is not None or self._sinks.get(subscription) is not sink:
            await self._give_back(*rows)
            return  # it changed while the log was read
        if not rows:
            # Nothing due to probe with: look again when the next delivery falls due, or after
            # the probe cap (a delivery that comes in meanwhile waits for that).
            wait = later if later is not None else now + self._cap(policy)
            sink.open = dataclasses.replace(sink.open, next_probe_at=max(wait, now + 0.001))
            return
        try:
            stored, granted = await self._store.claim_probe(
                subscription, now=now, until=now + policy.timeout + LEASE_MARGIN
            )
        except Exception:
            log_failure("claiming a probe of %s failed", subscription)
            return
        if sink.open is None or sink.probe is not None or self._sinks.get(subscription) is not sink:
            await self._give_back(rows[0])
            return
        if stored is None:
            await self._give_back(rows[0])
            self._closed(subscription, sink, "another broker instance's probe got through")
            return
        sink.open = stored
        row = rows[0]
        if not granted:  # another instance probes, or its next probe is later than ours
            await self._give_back(row)
            return
        lane = self._lanes.get(self._subscriptions.get(subscription) or probed)
        if row.id in lane.inflight:
            return
        sink.probe = row.id
        self._metrics.probes.labels(self._metrics.label(subscription)).inc()
        lane.push(Item.from_row(row))
        self._lanes.start_workers(lane)

    async def _give_back(self, *rows: Pending) -> None:
        """A shared log claimed ``rows`` for a probe that does not go: give the claims back."""
        if rows and self._claims is not None:
            try:
                await self._claims.release(rows)
            except Exception:
                log_failure("giving back a probe's claim failed")

    async def _sweep(self, subscription: str, sink: SinkCircuit, policy: DeliveryPolicy) -> None:
        circuit = sink.open
        if circuit is None:
            return
        now = self._clock.now()
        reason = expiry_reason(circuit, policy.ttl)
        try:
            letters, oldest = await self._log.expire(subscription, now - policy.ttl, reason, SWEEP_BATCH)
        except Exception:
            log_failure("dead-lettering expired deliveries of %s failed", subscription)
            sink.sweep_at = now + RECHECK
            return
        if letters:
            label = self._metrics.label(subscription)
            self._metrics.deliveries.labels(label, "deadlettered").inc(len(letters))
            self._metrics.dead_letters.labels(label).inc(len(letters))
            self._backlog.settled(len(letters))
            for letter in letters:
                outcome = GiveUp(letter.attempts, reason, None, None)
                self._forwarder.forward(letter.event, subscription, policy, outcome)
        if len(letters) == SWEEP_BATCH:
            sink.sweep_at = now  # more may have run out: go on at once
        elif oldest is None:
            sink.sweep_at = now + policy.ttl  # nothing pending: a delivery coming in expires later
        else:
            sink.sweep_at = oldest + policy.ttl

    def _cap(self, policy: DeliveryPolicy) -> float:
        return policy.probemaxdelay if policy.probemaxdelay is not None else self._probe_max_delay
