"""The event pipeline as a :class:`cebroker.app.Component`: creation, wiring and lifecycle.

Start order (the storage is open already): follow the store's change feed, index every
subscription, then resume every pending delivery, then the replays (and the start replay of a
subscription created with ``config.startfrom`` whose creation was not followed by it) and the
archive's pruning. Routes: ``POST /events``, ``GET /metrics``, the per-subscription status,
dead-letter, replay and live-tail routes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from cefilters.cel import compile_cel
from ceprotocols.egress import NetworkPolicy, Resolver, system_resolver
from ceprotocols.registry import SenderFactory
from starlette.routing import BaseRoute

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.contracts import EventValidator, IngestResult, ValidationMode
from cebroker.network import sink_policy
from cebroker.pipeline.brokerevents import BrokerEvents
from cebroker.pipeline.dispatch import Dispatcher
from cebroker.pipeline.dispatch.outages import log_failure
from cebroker.pipeline.dispatch.replies import Replies
from cebroker.pipeline.ingest import EventIngestor
from cebroker.pipeline.matcher import Matcher
from cebroker.pipeline.metrics import PipelineMetrics
from cebroker.pipeline.pull import Puller
from cebroker.pipeline.redaction import redact_userinfo
from cebroker.pipeline.replays.pruner import Pruner
from cebroker.pipeline.replays.replayer import Replayer
from cebroker.pipeline.replays.starts import begin
from cebroker.pipeline.requestreply import ReplyWaiters
from cebroker.pipeline.routes.deliveries import DeliveriesApi
from cebroker.pipeline.routes.eventgrid import EventGridApi
from cebroker.pipeline.routes.events import EventsApi
from cebroker.pipeline.routes.explain import ExplainApi, Realize
from cebroker.pipeline.routes.metrics import MetricsApi
from cebroker.pipeline.routes.overview import OverviewApi
from cebroker.pipeline.routes.pull import PullApi
from cebroker.pipeline.routes.replays import ReplayCaps, ReplaysApi
from cebroker.pipeline.routes.tail import TailApi
from cebroker.pipeline.senders import SenderPool
from cebroker.pipeline.tail import TailHub
from cebroker.pipeline.transform import output_check
from cebroker.settings import Settings
from cebroker.storage.archive import EventArchive, Replay
from cebroker.storage.circuits import CircuitStore
from cebroker.storage.claims import Claims
from cebroker.storage.deliveries import DeliveryLog
from cebroker.storage.health import StorageHealth
from cebroker.storage.pull import PullLog
from cebroker.storage.replies import LocalReplyChannel, ReplyChannel
from cebroker.storage.subscriptions import ChangeKind, SubscriptionChange, SubscriptionStore
from cebroker.subscription import Subscription
from cebroker.telemetry import NO_TRACING, Tracing
from cebroker.tenant_policies import TenantPolicies, load_tenant_policies

log = logging.getLogger("cebroker.pipeline")

#: Seconds between sweeps of expired de-duplication keys.
SEEN_SWEEP = 60.0
#: Seconds before creating a start replay is tried again after the storage failed.
START_RETRY = 1.0


class PipelineComponent:
    """Ingress, durable log, matching and delivery. ``pipeline`` is the :class:`Ingestor`.

    ``clock`` is the time the dispatcher and the housekeeping read and sleep on; ``journal``
    must read the same clock (see :class:`~cebroker.storage.StorageOptions`). ``claims`` is the
    storage's :attr:`~cebroker.storage.Storage.claims`: given when other instances share the
    log (the dispatcher then claims its work and limits hold for all instances together).

    ``realize`` validates a subscription body as a create does; with it the component also serves
    the explain routes (a draft is validated by it). ``policy`` and
    ``resolver`` bound where the senders connect (default: the settings' policy,
    :func:`cebroker.network.sink_policy`, with the system's resolver). ``archive`` is the
    storage's event archive; without it (a pipeline run alone) there are no replays and no
    pruning. ``senders`` replaces the built-in senders of the protocols it names (see
    :class:`SenderPool`).
    """

    def __init__(
        self,
        settings: Settings,
        store: SubscriptionStore,
        journal: DeliveryLog,
        circuits: CircuitStore,
        *,
        archive: EventArchive | None = None,
        validator: EventValidator | None = None,
        clock: Clock = SYSTEM_CLOCK,
        realize: Realize | None = None,
        policy: NetworkPolicy | None = None,
        resolver: Resolver = system_resolver,
        policies: TenantPolicies | None = None,
        pull: PullLog | None = None,
        tracing: Tracing = NO_TRACING,
        metrics: PipelineMetrics | None = None,
        senders: Mapping[str, SenderFactory] | None = None,
        replies: ReplyChannel | None = None,
        health: StorageHealth | None = None,
        claims: Claims | None = None,
    ) -> None:
        self._store = store
        self.tracing = tracing
        self._clock = clock
        self.metrics = metrics if metrics is not None else PipelineMetrics()
        # Never unrestricted by omission: the settings' policies unless they are passed.
        tenant_policies = policies if policies is not None else load_tenant_policies(settings.tenant_policies)
        self.matcher = Matcher(tenant_policies, observer=self.metrics)
        # Load the CEL grammar now (a fraction of a second), not on the event loop when the
        # first ``cel`` filter is compiled by a request.
        compile_cel("true")
        self.log = journal
        origin = urlsplit(settings.public_url).hostname or settings.host
        self.senders = SenderPool(
            webhook_origin=origin,
            validate_webhooks=settings.webhook_validation,
            # With several instances the handshake's allowed rate holds for all of them together.
            buckets=claims,
            # Never unrestricted: the settings' own policy unless the composition root passes it.
            policy=policy if policy is not None else sink_policy(settings),
            resolver=resolver,
            factories=senders,
        )
        # Transformed events are checked against the registry as ingested ones are.
        check = output_check(validator, ValidationMode(settings.event_validation))
        # Pull delivery: PULL subscriptions' consumers receive from the log; the dispatcher
        # never pushes those deliveries, it wakes the receives waiting for them.
        self.puller = (
            Puller(pull, self.metrics, check=check, settled=self._replay_settled)
            if pull is not None
            else None
        )
        self._policies = tenant_policies
        #: Sink replies enter through the same ingest as any publish, as the subscription's tenant.
        #: The broker's own events, ingested as the broker (docs/broker-events.md).
        self.broker_events = BrokerEvents(
            self._publish_own,
            source=f"/cebroker/{urlsplit(settings.public_url).netloc or settings.host}",
            enabled=settings.broker_events,
            counter=self.metrics.broker_events,
        )
        if health is not None:
            health.observe(self._storage_changed)
        self.replies = Replies(
            self._publish_reply, max_hops=settings.reply_max_hops, limit=settings.max_event_size
        )
        self.dispatcher = Dispatcher(
            self.log,
            self.matcher,
            self.senders,
            self.metrics,
            circuits=circuits,
            clock=clock,
            probe_max_delay=settings.probe_max_delay,
            replay_settled=self._replay_settled,
            output_check=check,
            pulled=self.puller.waiters.notify if self.puller is not None else lambda _: None,
            tracing=tracing,
            replies=self.replies,
            broker_events=self.broker_events,
            claims=claims,
        )
        self.archive = archive
        self.replayer: Replayer | None = None
        self._pruner: Pruner | None = None
        if archive is not None:
            self.replayer = Replayer(
                archive,
                self.matcher.subscriptions,
                self._replayed,
                clock=clock,
                receive=self.matcher.receive_filter,
                observer=self.metrics,
                tracing=tracing,
                finished=self._replay_finished,
            )
            self._pruner = Pruner(
                archive,
                max_bytes=settings.retention_bytes,
                clock=clock,
                events=self.metrics.archive_events,
                size=self.metrics.archive_bytes,
                oldest=self.metrics.archive_oldest,
                pruned=self.metrics.archive_pruned,
            )
        self.tail = TailHub()
        # Requests waiting for replies hear of them on the storage's channel (every instance's).
        self.waiters = ReplyWaiters(replies or LocalReplyChannel(), max_wait=settings.reply_max_wait)
        self.ingestor = EventIngestor(
            self.log,
            store,
            self.matcher,
            self.dispatcher,
            self.metrics,
            max_backlog=settings.max_backlog,
            validator=validator,
            validation_mode=ValidationMode(settings.event_validation),
            tail=self.tail,
            tracing=tracing,
            waiters=self.waiters,
        )
        deliveries = DeliveriesApi(
            store, self.log, circuits, self.dispatcher, locks=pull.locks if pull is not None else None
        )
        #: ``POST /events``, which the app also serves through its fast lane.
        self.events = EventsApi(
            self.ingestor,
            self.metrics,
            max_event_size=settings.max_event_size,
            max_batch_size=settings.max_batch_size,
            policies=tenant_policies,
            waiters=self.waiters,
        )
        self._apis: list[
            EventsApi
            | MetricsApi
            | DeliveriesApi
            | TailApi
            | ExplainApi
            | OverviewApi
            | ReplaysApi
            | PullApi
            | EventGridApi
        ] = [
            self.events,
            MetricsApi(self.metrics),
            deliveries,
            TailApi(self.tail, self._store.get),
            OverviewApi(
                self.metrics, self.log, circuits, self.matcher, self.dispatcher, archive, self.replies
            ),
        ]
        if self.puller is not None:
            self._apis.append(PullApi(store, self.puller))
            self._apis.append(EventGridApi(self.events, store, self.puller))
        if archive is not None and self.replayer is not None:
            self._apis.append(
                ReplaysApi(
                    deliveries.lookup,
                    archive,
                    self.matcher.subscriptions,
                    self.dispatcher,
                    self.replayer,
                    base_url=settings.public_url,
                    clock=clock,
                    receive=self.matcher.receive_filter,
                    caps=ReplayCaps(
                        per_subscription=settings.max_replays_per_subscription,
                        per_tenant=settings.max_replays_per_tenant,
                    ),
                    check=check,
                    observer=self.metrics,
                )
            )
        if realize is not None:  # drafts are validated by the Subscriptions API's rules
            self._apis.append(
                ExplainApi(
                    self.matcher,
                    realize,
                    max_event_size=settings.max_event_size,
                    max_subscription_body=settings.max_subscription_body,
                    check=check,
                    policies=tenant_policies,
                )
            )
        self._unsubscribe: Callable[[], None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._shutdown_grace = settings.shutdown_grace
        #: When the grace ends (monotonic seconds), once told to stop; None until then.
        self._grace_ends: float | None = None

    async def _publish_reply(self, events: Sequence[dict[str, Any]], tenant: str | None) -> IngestResult:
        """Publish a sink's reply as ``tenant`` would (its publish policy applies; none: an
        admin's subscription, unrestricted)."""
        policies = self._policies
        permit = None
        if tenant is not None and tenant in policies.tenants:

            def permit(event: dict[str, Any]) -> bool:
                return policies.may_publish(tenant, event)

        # De-duplicated among the tenant's own publishes (a retried delivery's reply counts once).
        return await self.ingestor.accept(list(events), batch=len(events) > 1, permit=permit, tenant=tenant)

    def _storage_changed(self, cause: str | None) -> None:
        """The broker events of a storage outage (held until the storage takes them)."""
        if cause is not None:
            self.broker_events.emit("storage.unavailable", {"cause": cause}, tenant=None)
        else:
            self.broker_events.emit("storage.available", {}, tenant=None)

    async def _publish_own(self, events: Sequence[dict[str, Any]]) -> IngestResult:
        """Ingest the broker's own events (reserved types allowed, no publish policy)."""
        return await self.ingestor.accept(list(events), batch=True, own=True)

    def routes(self) -> Sequence[BaseRoute]:
        """Every route of the pipeline."""
        return [route for api in self._apis for route in api.routes()]

    def openapi(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The pipeline's paths and schemas of the broker's OpenAPI document."""
        from cebroker.pipeline import openapi, pull_openapi

        if self.puller is None:
            return openapi.PATHS, openapi.SCHEMAS
        return {**openapi.PATHS, **pull_openapi.PATHS}, {**openapi.SCHEMAS, **pull_openapi.SCHEMAS}

    async def start(self) -> None:
        """Load subscriptions, resume pending deliveries."""
        # Follow the feed before reading everything, so no change can fall in between.
        self._unsubscribe = self._store.changes.subscribe(self._on_change)
        self.matcher.load(await self._store.all())
        self.broker_events.start()
        await self.dispatcher.start()
        self._keep(self._sweep_seen())
        if self.replayer is not None and self._pruner is not None:
            for subscription in list(self.matcher.subscriptions.values()):
                if subscription.delivery.startfrom is not None:
                    self._keep(self._start(subscription))
            self._keep(self.replayer.run())
            self._keep(self._pruner.run())

    def stop_soon(self) -> None:
        """The process was told to stop (SIGTERM): start no further delivery; the grace for
        those under way counts from now, while the server finishes its requests."""
        if self._grace_ends is None:
            self._grace_ends = time.monotonic() + self._shutdown_grace
        self.dispatcher.stop_soon()

    async def stop(self) -> None:
        """Stop delivering: the attempts under way get what is left of the settings'
        ``shutdown_grace`` (from :meth:`stop_soon`, else from now) to finish; unconfirmed
        deliveries stay pending in the log."""
        self.tail.end_all()
        if self._unsubscribe is not None:
            self._unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        grace = self._shutdown_grace if self._grace_ends is None else self._grace_ends - time.monotonic()
        await self.dispatcher.stop(max(0.0, grace))
        await self.broker_events.stop()  # ingests what is queued (dead letters of the last attempts)
        await self.senders.aclose()

    def _on_change(self, change: SubscriptionChange) -> None:
        self.matcher.apply(change)
        sub = change.subscription
        # Every instance hears every change: the id names the change, so de-duplication keeps one.
        self.broker_events.emit(
            f"subscription.{change.kind.value.lower()}",
            {
                "subscription": sub.id,
                "revision": sub.revision,
                "protocol": sub.protocol,
                "sink": redact_userinfo(sub.sink),
            },
            tenant=sub.tenant,
            key=f"{sub.id}/{sub.revision}",
        )
        if change.kind is ChangeKind.DELETED:
            self.tail.end(change.subscription.id)
            self.replies.forget(change.subscription.id)
            self._keep(self.dispatcher.forget(change.subscription.id))
        elif change.kind is ChangeKind.UPDATED:
            self.dispatcher.replaced(change.subscription)
        elif change.kind is ChangeKind.CREATED and change.subscription.delivery.startfrom is not None:
            self._keep(self._start(change.subscription))

    async def _start(self, subscription: Subscription) -> None:
        """Create (or find) the start replay of ``subscription``; tried until it is made or the
        subscription is gone."""
        if self.archive is None or self.replayer is None:
            return
        # An ingest that matched part of its events before the subscription existed writes them
        # after this point when it pauses between slices: the boundary must come after it.
        await self.ingestor.matched()
        while subscription.id in self.matcher.subscriptions:
            try:
                replay = await begin(self.archive, subscription)
            except Exception:
                log_failure("subscription %s: creating its start replay failed", subscription.id)
                await self._clock.sleep(START_RETRY)
                continue
            if replay is not None:
                self.replayer.started(replay)
            return

    def _replayed(self, subscription: str, count: int) -> None:
        self.metrics.replayed.inc(count)
        self.dispatcher.replayed(subscription, count)

    def _replay_finished(self, replay: Replay, subscription: Subscription) -> None:
        # Every instance that stepped the replay may tell it: the id names it, de-duplicated.
        self.broker_events.emit(
            "replay.finished",
            {
                "subscription": replay.subscription,
                "replay": replay.id,
                "state": replay.state,
                "matched": replay.queued,
                "delivered": replay.delivered,
                "deadlettered": replay.deadlettered,
                "removed": replay.removed,
            },
            tenant=subscription.tenant,
            key=replay.id,
        )

    def _replay_settled(self) -> None:
        if self.replayer is not None:
            self.replayer.wake()

    def _keep(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sweep_seen(self) -> None:
        while True:
            await self._clock.sleep(SEEN_SWEEP)
            with contextlib.suppress(Exception):
                await self.log.purge_seen()
