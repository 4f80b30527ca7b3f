"""One confluent-kafka Producer bridged to asyncio.

A daemon thread serves the producer's callbacks (``poll``); the delivery reports one ``poll``
served are handed to the owning loop together (one wake-up for a produce request's worth of
records, not one each), where each resolves the asyncio future of its record. librdkafka
reconnects by itself; the error callback remembers whether the brokers are down so that a record
that times out is reported as TargetUnreachable rather than a plain timeout, and whether they
refused our credential or denied us the cluster or topic: librdkafka reports a refused SASL login
only there (the queued records then fail with ``_MSG_TIMED_OUT``), and retrying a wrong password
cannot succeed, so those records are a final DeliveryRejected naming the refusal. A later
successful delivery forgets both.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from ceprotocols.egress import ConnectGuard
from ceprotocols.endpoint import redact_text
from ceprotocols.errors import DeliveryError, DeliveryRejected, DeliveryTimeout, TargetUnreachable
from ceprotocols.kafka.binding import KafkaRecord

_CONNECTIVITY = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE})
_REFUSALS = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)
_TIMEOUTS = frozenset({KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT})

#: Seconds the brokers a cluster advertises are trusted before they are checked again.
BROKER_CHECK_INTERVAL = 30.0


def is_refusal(error: KafkaError) -> bool:
    """Whether ``error`` says the cluster refused our credential or denied us access."""
    return error.code() in _REFUSALS


def _refused(where: str, refusal: KafkaError, text: str) -> DeliveryRejected:
    cause = f"{refusal.name()} {refusal.str()}"
    return DeliveryRejected(
        f"{where}: refused by the cluster: {cause} ({text})", status=refusal.name(), retryable=False
    )


def translate(error: KafkaError, where: str, refusal: KafkaError | None = None) -> DeliveryError:
    """The DeliveryError for a librdkafka error.

    ``refusal`` is the authentication or authorization error the producer's error callback last
    saw, if any: a record that then times out or finds no broker failed because of it, so it is
    a final DeliveryRejected naming that cause instead of a retryable timeout. The message leaves
    out the user information of any URL in ``where``.
    """
    code = error.code()
    where = redact_text(where)
    text = f"{where}: {error.name()} {error.str()}"
    if code in _REFUSALS:
        return DeliveryRejected(text, status=error.name(), retryable=False)
    if refusal is not None and (code in _TIMEOUTS or code in _CONNECTIVITY):
        return _refused(where, refusal, f"{error.name()} {error.str()}")
    if code in _TIMEOUTS:
        return DeliveryTimeout(text)
    if code in _CONNECTIVITY:
        return TargetUnreachable(text, status=error.name())
    retryable = bool(error.retriable()) or code == KafkaError._QUEUE_FULL
    return DeliveryRejected(text, status=error.name(), retryable=retryable)


class KafkaProducer:
    """A producer whose ``produce`` awaits the record's delivery report."""

    def __init__(self, config: dict[str, Any], where: str) -> None:
        self.where = where
        self._loop = asyncio.get_running_loop()
        self._down_since: float | None = None
        self._refusal: KafkaError | None = None
        self._producer = Producer({**config, "error_cb": self._on_error})
        self._brokers_checked: float | None = None
        self._checking = asyncio.Lock()
        self._running = True
        #: (future, error) of the delivery reports of the poll under way (poll thread only).
        self._reports: list[tuple[asyncio.Future[None], KafkaError | None]] = []
        #: (deadline, future, within) of the records produced, oldest first, and the one timer
        #: that expires them (see :meth:`produce`): settled ones leave from the front, so a record
        #: still waiting there keeps those settled behind it listed until it settles or expires
        #: (at most a deadline's worth of records).
        self._deadlines: deque[tuple[float, asyncio.Future[None], float]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._thread = threading.Thread(target=self._serve, name="kafka-producer", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while self._running:
            self._producer.poll(0.1)
            if self._reports:
                reports, self._reports = self._reports, []
                self._loop.call_soon_threadsafe(self._settle_all, reports)

    def _on_error(self, error: KafkaError) -> None:  # librdkafka's thread
        if is_refusal(error):
            self._refusal = error
        elif error.code() in _CONNECTIVITY:
            self._down_since = self._down_since or time.monotonic()

    def brokers_due(self) -> bool:
        """Whether the advertised brokers have not been checked for :data:`BROKER_CHECK_INTERVAL`."""
        checked = self._brokers_checked
        return checked is None or time.monotonic() - checked > BROKER_CHECK_INTERVAL

    async def check_brokers(self, guard: ConnectGuard, topic: str, within: float) -> None:
        """Check every broker the cluster advertises against the guard's policy.

        librdkafka connects to the brokers named in the cluster metadata (the advertised
        listeners) by itself, resolving their names itself; this fetches the metadata and
        checks each name's addresses, so that a cluster advertising an internal address is
        refused before a record is produced to it. See docs/protocols.md for what it cannot
        close.

        Raises:
            DestinationRefused: a broker is, or resolves to, a refused address.
            DeliveryError: the metadata could not be fetched.
        """
        async with self._checking:
            if not self.brokers_due():
                return
            try:
                metadata = await asyncio.to_thread(self._producer.list_topics, topic, within)
            except KafkaException as exc:
                raise translate(exc.args[0], self.where, self._refusal) from exc
            for broker in metadata.brokers.values():
                await guard.addresses(broker.host, broker.port, role=f"{self.where}: broker {broker.id}")
            self._brokers_checked = time.monotonic()

    async def produce(self, topic: str, record: KafkaRecord, within: float) -> None:
        """Produce and return once the delivery report confirms the record."""
        future: asyncio.Future[None] = self._loop.create_future()

        def report(error: KafkaError | None, message: Message) -> None:  # librdkafka's callback
            if threading.get_ident() == self._thread.ident:  # within _serve's poll: handed on after it
                self._reports.append((future, error))
            else:  # within close's flush, on another thread
                self._loop.call_soon_threadsafe(self._settle_all, [(future, error)])

        try:
            self._producer.produce(
                topic, value=record.value, key=record.key, headers=list(record.headers), on_delivery=report
            )
        except BufferError as exc:
            raise DeliveryRejected(
                f"{self.where}: local queue full", status="queue-full", retryable=True
            ) from exc
        except KafkaException as exc:
            raise translate(exc.args[0], self.where, self._refusal) from exc
        # One timer for every record of the producer instead of one each (or asyncio.wait_for's
        # task-side machinery): librdkafka itself reports a record it could not deliver within
        # message.timeout.ms, this is the backstop.
        deadline = self._loop.time() + within
        self._deadlines.append((deadline, future, within))
        timer = self._timer
        if timer is None or deadline < timer.when():  # (a shorter timeout than those waiting)
            if timer is not None:
                timer.cancel()
            self._timer = self._loop.call_at(deadline, self._expire_due)
        try:
            await future
        except DeliveryTimeout as exc:
            raise self._timeout_error(str(exc)) from exc

    def _expire_due(self) -> None:
        """The timer: fail every unsettled record whose deadline has passed, then wait for the
        earliest deadline left. Records of one producer may have different deadlines (their
        destinations' timeouts), so every record still waiting is looked at; the timer fires
        about once per deadline's length, when the oldest record is due."""
        self._timer = None
        now = self._loop.time()
        waiting = self._deadlines
        while waiting and waiting[0][1].done():
            waiting.popleft()
        earliest: float | None = None
        if waiting:
            kept: deque[tuple[float, asyncio.Future[None], float]] = deque()
            for entry in waiting:
                deadline, future, within = entry
                if future.done():
                    continue
                if deadline <= now:
                    future.set_exception(self._timeout_error(f"no delivery report within {within}s"))
                    continue
                kept.append(entry)
                earliest = deadline if earliest is None else min(earliest, deadline)
            self._deadlines = kept
        if earliest is not None:
            self._timer = self._loop.call_at(earliest, self._expire_due)

    def _timeout_error(self, text: str) -> DeliveryError:
        if self._refusal is not None:
            return _refused(self.where, self._refusal, text)
        if self._down_since is not None:
            return TargetUnreachable(f"{self.where}: brokers unreachable ({text})")
        return DeliveryTimeout(f"{self.where}: {text}")

    def _settle_all(self, reports: list[tuple[asyncio.Future[None], KafkaError | None]]) -> None:
        for future, error in reports:
            self._settle(future, error)
        waiting = self._deadlines  # reports come about in produce order: drop the settled front
        while waiting and waiting[0][1].done():
            waiting.popleft()

    def _settle(self, future: asyncio.Future[None], error: KafkaError | None) -> None:
        if future.done():  # expired or cancelled meanwhile
            return
        if error is None:
            self._down_since = None
            self._refusal = None
            future.set_result(None)
        else:
            future.set_exception(translate(error, self.where, self._refusal))

    async def close(self) -> None:
        """Flush what is queued (briefly) and stop the callback thread."""
        await asyncio.to_thread(self._producer.flush, 2.0)
        # Records the flush left unreported keep their deadlines: the timer fails them then, as
        # it would have without the close. With none waiting it has nothing left to do.
        if self._timer is not None and all(future.done() for _, future, _ in self._deadlines):
            self._timer.cancel()
            self._timer = None
        self._running = False
        await asyncio.to_thread(self._thread.join, 2.0)
