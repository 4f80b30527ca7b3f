"""Prometheus metrics of the pipeline, in a registry of their own per broker instance.

Per-subscription labels are used for the first :data:`MAX_LABELLED` subscriptions seen; later
ones are counted under ``subscription="_other"`` so a broker with very many subscriptions does
not explode the series count.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

MAX_LABELLED = 500
OTHER = "_other"
#: The latency histogram's bucket bounds, in seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Latencies:
    """The observations of one label of a :class:`LatencyHistogram`: per bucket (the last one
    above every bound) and their sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        """Count one observation of ``amount`` (in the first bucket whose bound is not below it)."""
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class LatencyHistogram(Collector):
    """A histogram by ``subscription``, exposed as :class:`prometheus_client.Histogram` exposes
    one (``_bucket`` by ``le``, ``_count``, ``_sum``), whose observation is a bisection and two
    additions: the library's takes a lock for the sum and for the bucket and scans the bounds,
    about four times as long, and every confirmed delivery makes one. Observed on the event
    loop only; a scrape reads a copy of the counts."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        if not all(0 < bound < 1e6 for bound in buckets) or list(buckets) != sorted(set(buckets)):
            raise ValueError("bounds are increasing, above 0 and below a million")
        self._name = name
        self._documentation = documentation
        self._bounds = tuple(float(bound) for bound in buckets)
        # Bounds written as the library writes them below a million (Python's own form).
        self._les = [repr(bound) for bound in self._bounds] + ["+Inf"]
        self._children: dict[str, Latencies] = {}
        registry.register(self)

    def labels(self, subscription: str) -> Latencies:
        """The observations of ``subscription``'s label (created on first use)."""
        child = self._children.get(subscription)
        if child is None:
            child = self._children[subscription] = Latencies(self._bounds)
        return child

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=["subscription"])
        for label, child in list(self._children.items()):
            cumulative = list(accumulate(list(child.counts)))
            family.add_metric([label], list(zip(self._les, cumulative, strict=True)), child.sum)
        yield family


class PipelineMetrics:
    """Counters, gauges and histograms the pipeline updates."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events_in = Counter(
            "cebroker_events_received", "Events accepted at ingress, by outcome", ["outcome"], registry=r
        )
        self.events_rejected = Counter(
            "cebroker_events_rejected", "Ingress requests refused, by reason", ["reason"], registry=r
        )
        self.validation_warnings = Counter(
            "cebroker_event_validation_warnings",
            "Events that failed the registry check in warn mode",
            registry=r,
        )
        self.matches = Counter("cebroker_event_matches", "Deliveries created by matching", registry=r)
        self.expressions_over_budget = Counter(
            "cebroker_expressions_over_budget",
            "Filter expression evaluations stopped by their budget (each counted as no match), by dialect",
            ["dialect"],
            registry=r,
        )
        self.deliveries = Counter(
            "cebroker_deliveries", "Delivery attempts by outcome", ["subscription", "outcome"], registry=r
        )
        self.broker_events = Counter(
            "cebroker_broker_events", "Broker events (dev.cebroker.*) by outcome", ["outcome"], registry=r
        )
        self.retries = Counter("cebroker_delivery_retries", "Retries scheduled", ["subscription"], registry=r)
        self.dead_letters = Counter("cebroker_dead_letters", "Dead letters", ["subscription"], registry=r)
        # Pull delivery (docs/pull.md): what consumers received, how they settled it, which of
        # their tokens failed (``expired``: the lock ended first), how long receives waited.
        self.pull_received = Counter(
            "cebroker_pull_received", "Events handed out under a lock to pull consumers", registry=r
        )
        self.pull_settled = Counter(
            "cebroker_pull_settled",
            "Lock tokens settled by pull consumers, by action",
            ["action"],
            registry=r,
        )
        self.pull_failed = Counter(
            "cebroker_pull_failed_tokens", "Lock tokens that failed, by reason", ["reason"], registry=r
        )
        self.pull_waiting = Gauge("cebroker_pull_waiting", "Receives waiting for events now", registry=r)
        self.pull_wait = Histogram(
            "cebroker_pull_receive_wait_seconds",
            "How long a receive took, its long-poll wait included",
            buckets=(0.005, 0.05, 0.5, 1, 5, 15, 30, 60),
            registry=r,
        )
        self.backlog = Gauge("cebroker_delivery_backlog", "Deliveries pending in the durable log", registry=r)
        self.queued = Gauge("cebroker_delivery_queue_depth", "Deliveries held in memory queues", registry=r)
        self.circuit_open = Gauge(
            "cebroker_circuit_open",
            "Whether the subscription's sink circuit is open (1) or closed (0); _other: how many are open",
            ["subscription"],
            registry=r,
        )
        self.probes = Counter(
            "cebroker_circuit_probes",
            "Probes sent to sinks whose circuit is open",
            ["subscription"],
            registry=r,
        )
        self.latency = LatencyHistogram(
            "cebroker_delivery_latency_seconds",
            "From acceptance of the event to the sink's confirmation",
            LATENCY_BUCKETS,
            r,
        )
        self.archive_events = Gauge("cebroker_archive_events", "Events held in the archive", registry=r)
        self.archive_bytes = Gauge(
            "cebroker_archive_bytes", "Bytes of the JSON of the events held in the archive", registry=r
        )
        self.archive_oldest = Gauge(
            "cebroker_archive_oldest_timestamp_seconds",
            "Acceptance time of the oldest event held in the archive (0: none)",
            registry=r,
        )
        self.archive_pruned = Counter(
            "cebroker_archive_pruned", "Events taken out of the archive by the retention", registry=r
        )
        self.replayed = Counter("cebroker_replay_deliveries", "Deliveries queued by replays", registry=r)
        self._labelled: set[str] = set()
        self._delivered: dict[str, tuple[Counter, Latencies]] = {}
        #: When each subscription last had a delivery confirmed (epoch seconds), since the start.
        self.last_delivered: dict[str, float] = {}

    def label(self, subscription: str) -> str:
        """The label value to use for ``subscription`` (bounded cardinality)."""
        if subscription in self._labelled:
            return subscription
        if len(self._labelled) < MAX_LABELLED:
            self._labelled.add(subscription)
            return subscription
        return OTHER

    def delivered(self, subscription: str) -> tuple[Counter, Latencies]:
        """The ``delivered`` count and the latency histogram of ``subscription``'s label, looked
        up once per label rather than once per delivery (labels are never removed)."""
        label = self.label(subscription)
        found = self._delivered.get(label)
        if found is None:
            found = self._delivered[label] = (
                self.deliveries.labels(label, "delivered"),
                self.latency.labels(label),
            )
        return found

    def latency_of(self, subscription: str) -> Latencies:
        """The latency histogram of ``subscription``'s label (see :meth:`delivered`)."""
        return self.delivered(subscription)[1]

    def count_delivered(self, subscription: str, count: int) -> None:
        """Add ``count`` confirmed deliveries of ``subscription`` to its ``delivered`` count."""
        self.delivered(subscription)[0].inc(count)

    def over_budget(self, dialect: str, reason: str) -> None:
        """``cefilters.BudgetObserver``: count one evaluation stopped by its budget."""
        self.expressions_over_budget.labels(dialect).inc()
